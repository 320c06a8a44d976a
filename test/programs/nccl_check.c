/* A plain NCCL program, one process per rank, that checks every element it receives.
 * It uses only the public NCCL and CUDA runtime APIs, so it builds against NVIDIA's headers
 * as well as fakegpu's.
 *
 * Usage: nccl_check ID_FILE [--count N] [--iters K] [--tp T]
 *   Rank and world size come from RANK and WORLD_SIZE. Rank 0 writes the unique id to
 *   ID_FILE; the others wait for it. With --tp T the world is split into tensor-parallel
 *   groups of T consecutive ranks and data-parallel groups across them, and each iteration
 *   allreduces on the world, on both groups separately, and on both inside one group call.
 */
#include <errno.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "share_id.h"

#define CHECK_NCCL(call)                                                                                   \
  do {                                                                                                     \
    ncclResult_t r_ = (call);                                                                              \
    if (r_ != ncclSuccess) {                                                                               \
      fprintf(stderr, "rank %d: %s failed: %s (%s)\n", g_rank, #call, ncclGetErrorString(r_), ncclGetLastError(NULL)); \
      exit(2);                                                                                             \
    }                                                                                                      \
  } while (0)

#define CHECK_CUDA(call)                                                             \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      fprintf(stderr, "rank %d: %s failed: %s\n", g_rank, #call, cudaGetErrorString(e_)); \
      exit(2);                                                                       \
    }                                                                                \
  } while (0)

static int g_rank = -1;

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : fallback;
}

/* Rank r contributes (r + 1) * (i % 97 + 1) at element i: small integers, exact in float. */
static float contribution(int rank, size_t i, int iter) { return (float)((rank + 1) * (int)(i % 97 + 1) + iter); }

typedef struct {
  ncclComm_t comm;
  int nranks;
  const int* members; /* global ranks of the communicator, in its rank order */
  float* send;
  float* recv;
} Target;

static void fill(Target* t, size_t count, int iter) {
  float* host = malloc(count * sizeof(float) + 1);
  for (size_t i = 0; i < count; ++i) host[i] = contribution(g_rank, i, iter);
  CHECK_CUDA(cudaMemcpy(t->send, host, count * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(t->recv, 0xff, count * sizeof(float)));
  free(host);
}

static int verify(const Target* t, const float* result_dev, size_t count, int iter, const char* what) {
  float* host = malloc(count * sizeof(float) + 1);
  CHECK_CUDA(cudaMemcpy(host, result_dev, count * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (size_t i = 0; i < count && bad < 5; ++i) {
    float expect = 0;
    for (int m = 0; m < t->nranks; ++m) expect += contribution(t->members[m], i, iter);
    if (host[i] != expect) {
      fprintf(stderr, "rank %d: %s iter %d element %zu is %g, expected %g\n", g_rank, what, iter, i, host[i], expect);
      ++bad;
    }
  }
  free(host);
  return bad;
}

static Target make_target(ncclComm_t comm, const int* members, size_t count) {
  Target t;
  t.comm = comm;
  CHECK_NCCL(ncclCommCount(comm, &t.nranks));
  t.members = members;
  CHECK_CUDA(cudaMalloc((void**)&t.send, count * sizeof(float) + 1));
  CHECK_CUDA(cudaMalloc((void**)&t.recv, count * sizeof(float) + 1));
  return t;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ID_FILE [--count N] [--iters K] [--tp T]\n", argv[0]);
    return 2;
  }
  const char* id_file = argv[1];
  size_t count = 1000;
  int iters = 2, tp = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--count")) count = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--tp")) tp = atoi(argv[i + 1]);
  }
  g_rank = env_int("RANK", -1);
  int world = env_int("WORLD_SIZE", -1);
  if (g_rank < 0 || world <= 0) {
    fprintf(stderr, "RANK and WORLD_SIZE must be set\n");
    return 2;
  }
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  CHECK_CUDA(cudaSetDevice(env_int("LOCAL_RANK", g_rank) % ndev));

  int version = 0;
  CHECK_NCCL(ncclGetVersion(&version));
  ncclUniqueId id;
  if (share_unique_id(id_file, g_rank, &id) != 0) return 2;
  ncclComm_t world_comm;
  CHECK_NCCL(ncclCommInitRank(&world_comm, world, id, g_rank));
  int n = 0, r = -1;
  CHECK_NCCL(ncclCommCount(world_comm, &n));
  CHECK_NCCL(ncclCommUserRank(world_comm, &r));
  if (n != world || r != g_rank) {
    fprintf(stderr, "rank %d: communicator reports rank %d of %d\n", g_rank, r, n);
    return 1;
  }

  int* world_members = malloc(sizeof(int) * world);
  for (int i = 0; i < world; ++i) world_members[i] = i;
  if (tp <= 0 || world % tp != 0) tp = world > 1 ? 2 : 1;
  if (world % tp != 0) tp = 1;
  /* Tensor-parallel group: tp consecutive ranks. Data-parallel group: same position in each. */
  int dp = world / tp;
  int* tp_members = malloc(sizeof(int) * tp);
  int* dp_members = malloc(sizeof(int) * dp);
  for (int i = 0; i < tp; ++i) tp_members[i] = (g_rank / tp) * tp + i;
  for (int i = 0; i < dp; ++i) dp_members[i] = i * tp + g_rank % tp;
  ncclComm_t tp_comm, dp_comm;
  CHECK_NCCL(ncclCommSplit(world_comm, g_rank / tp, g_rank, &tp_comm, NULL));
  CHECK_NCCL(ncclCommSplit(world_comm, g_rank % tp, g_rank, &dp_comm, NULL));
  CHECK_NCCL(ncclCommUserRank(tp_comm, &r));
  if (r != g_rank % tp) {
    fprintf(stderr, "rank %d: tp communicator rank is %d, expected %d\n", g_rank, r, g_rank % tp);
    return 1;
  }

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  Target targets[3] = {make_target(world_comm, world_members, count), make_target(tp_comm, tp_members, count),
                       make_target(dp_comm, dp_members, count)};
  const char* names[3] = {"world", "tp", "dp"};
  int bad = 0;
  for (int iter = 0; iter < iters; ++iter) {
    for (int t = 0; t < 3; ++t) {
      fill(&targets[t], count, iter);
      CHECK_NCCL(ncclAllReduce(targets[t].send, targets[t].recv, count, ncclFloat, ncclSum, targets[t].comm, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      bad += verify(&targets[t], targets[t].recv, count, iter, names[t]);
    }
    /* In place, and tp + dp together in one group. */
    fill(&targets[1], count, iter);
    fill(&targets[2], count, iter);
    CHECK_NCCL(ncclGroupStart());
    CHECK_NCCL(ncclAllReduce(targets[1].send, targets[1].send, count, ncclFloat, ncclSum, tp_comm, stream));
    CHECK_NCCL(ncclAllReduce(targets[2].send, targets[2].send, count, ncclFloat, ncclSum, dp_comm, stream));
    CHECK_NCCL(ncclGroupEnd());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    bad += verify(&targets[1], targets[1].send, count, iter, "tp grouped in-place");
    bad += verify(&targets[2], targets[2].send, count, iter, "dp grouped in-place");
  }

  for (int t = 0; t < 3; ++t) {
    CHECK_CUDA(cudaFree(targets[t].send));
    CHECK_CUDA(cudaFree(targets[t].recv));
  }
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_NCCL(ncclCommDestroy(tp_comm));
  CHECK_NCCL(ncclCommDestroy(dp_comm));
  CHECK_NCCL(ncclCommFinalize(world_comm));
  CHECK_NCCL(ncclCommDestroy(world_comm));
  if (bad) {
    fprintf(stderr, "rank %d: FAILED with %d wrong elements\n", g_rank, bad);
    return 1;
  }
  int device = -1;
  CHECK_CUDA(cudaGetDevice(&device));
  printf("rank %d/%d: OK (%zu elements, %d iterations, tp %d x dp %d, NCCL %d, device %d of %d)\n", g_rank, world, count,
         iters, tp, dp, version, device, ndev);
  return 0;
}
