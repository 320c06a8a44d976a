/* AllReduce latency benchmark, one process per rank (RANK / WORLD_SIZE set by the launcher).
 * Usage: allreduce_bench ID_FILE BYTES [ITERS [MODE]]. MODE says where the timed AllReduces go:
 *   legacy   the legacy default stream, which runs them from the calling thread (the default);
 *   stream   a created stream, synchronised after each, as nccl-tests and PyTorch queue them;
 *   barrier  as stream, but every rank first waits for all the others (an untimed 4-byte
 *            AllReduce), as in a training step; each iteration counts its slowest rank's time.
 * Rank 0 prints: ranks, bytes, median time per call in us, this machine's memcpy bandwidth in
 * GB/s (best of 5 copies of 64 MiB), and the 99th percentile time per call in us. It exits 3
 * when a final AllReduce of known values is not exact. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "share_id.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double memcpy_gbps(void) {
  size_t n = 64u << 20;
  char* a = malloc(n);
  char* b = malloc(n);
  memset(a, 1, n);
  memset(b, 2, n);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    double start = now_us();
    memcpy(b, a, n);
    double t = now_us() - start;
    if (t < best) best = t;
  }
  free(a);
  free(b);
  return n / best / 1e3;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int rank = atoi(getenv("RANK")), world = atoi(getenv("WORLD_SIZE"));
  size_t bytes = strtoull(argv[2], NULL, 10);
  int iters = argc > 3 ? atoi(argv[3]) : 50;
  const char* mode = argc > 4 ? argv[4] : "legacy";
  const int barrier = strcmp(mode, "barrier") == 0;
  if (!barrier && strcmp(mode, "stream") != 0 && strcmp(mode, "legacy") != 0) return 2;
  ncclUniqueId id;
  if (share_unique_id(argv[1], rank, &id) != 0) return 2;
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, world, id, rank) != ncclSuccess) return 1;
  size_t count = bytes / sizeof(float);
  float* buf;
  cudaStream_t stream = NULL;
  if (strcmp(mode, "legacy") != 0 && cudaStreamCreate(&stream) != cudaSuccess) return 1;
  cudaMalloc((void**)&buf, bytes + 4);
  memset(buf, 0, bytes + 4);
  float* gate;
  cudaMalloc((void**)&gate, sizeof(float));
  *gate = 0;
  double* t = malloc(sizeof(double) * iters);
  for (int i = -5; i < iters; ++i) {
    if (barrier) {
      if (ncclAllReduce(gate, gate, 1, ncclFloat, ncclSum, comm, stream) != ncclSuccess) return 1;
      cudaStreamSynchronize(stream);
    }
    double start = now_us();
    if (ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream) != ncclSuccess) return 1;
    cudaStreamSynchronize(stream);
    if (i >= 0) t[i] = now_us() - start;
  }
  if (barrier) {
    /* Each iteration took as long as its slowest rank. */
    double* all;
    cudaMalloc((void**)&all, sizeof(double) * iters);
    memcpy(all, t, sizeof(double) * iters);
    if (ncclAllReduce(all, all, iters, ncclDouble, ncclMax, comm, stream) != ncclSuccess) return 1;
    cudaStreamSynchronize(stream);
    memcpy(t, all, sizeof(double) * iters);
    cudaFree(all);
  }
  /* The timed loop sums zeros; one last sum of known values proves the results are exact. */
  for (size_t i = 0; i < count; ++i) buf[i] = (float)(rank + 1);
  if (ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream) != ncclSuccess) return 1;
  cudaStreamSynchronize(stream);
  const float expected = (float)world * (world + 1) / 2;
  for (size_t i = 0; i < count; ++i) {
    if (buf[i] != expected) {
      fprintf(stderr, "rank %d: element %zu is %g, expected %g\n", rank, i, buf[i], expected);
      return 3;
    }
  }
  qsort(t, iters, sizeof(double), cmp);
  if (rank == 0) printf("%d %zu %.1f %.2f %.1f\n", world, bytes, t[iters / 2], memcpy_gbps(), t[iters * 99 / 100]);
  ncclCommDestroy(comm);
  if (stream) cudaStreamDestroy(stream);
  return 0;
}
