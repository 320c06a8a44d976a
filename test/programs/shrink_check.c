/* ncclCommShrink and ncclCommRevoke across processes. The last rank is the one left out.
 *
 * Usage (RANK and WORLD_SIZE set): shrink_check ID_FILE MODE, where MODE is
 *   exclude  the others shrink it away while it calls nothing more;
 *   dead     it exits without a word; the others see ncclRemoteError, then shrink it away;
 *   revoke   the others queue an allreduce it never joins, revoke the communicator to stop it,
 *            then everybody (it included) shrinks with no one excluded.
 * Each remaining rank then allreduces on the new communicator and checks the sum.
 * Prints "rank R: shrink OK" on success. */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "share_id.h"

static int g_rank;

#define CHECK(cond, ...)                              \
  do {                                                \
    if (!(cond)) {                                    \
      fprintf(stderr, "rank %d: ", g_rank);           \
      fprintf(stderr, __VA_ARGS__);                   \
      fprintf(stderr, " (%s)\n", ncclGetLastError(NULL)); \
      return 1;                                       \
    }                                                 \
  } while (0)

/* Allreduce of each member's global rank + 1 on comm; checks the sum over `members`. */
static int check_sum(ncclComm_t comm, int expected_sum) {
  int* buf;
  CHECK(cudaMalloc((void**)&buf, sizeof(int)) == cudaSuccess, "cudaMalloc");
  *buf = g_rank + 1;
  CHECK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, comm, NULL) == ncclSuccess, "allreduce on the new comm");
  CHECK(*buf == expected_sum, "sum is %d, expected %d", *buf, expected_sum);
  cudaFree(buf);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  g_rank = atoi(getenv("RANK"));
  int world = atoi(getenv("WORLD_SIZE"));
  const char* mode = argv[2];
  const int last = world - 1;
  ncclUniqueId id;
  if (share_unique_id(argv[1], g_rank, &id) != 0) return 2;
  ncclComm_t comm, shrunk;
  CHECK(ncclCommInitRank(&comm, world, id, g_rank) == ncclSuccess, "init");
  int survivors_sum = 0;
  for (int r = 0; r < last; ++r) survivors_sum += r + 1;
  int excluded[1] = {last};

  if (!strcmp(mode, "exclude")) {
    if (g_rank == last) {
      CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
      printf("rank %d: shrink OK (left out)\n", g_rank);
      return 0;
    }
    CHECK(ncclCommShrink(comm, excluded, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess, "shrink");
  } else if (!strcmp(mode, "dead")) {
    if (g_rank == last) _exit(0); /* no destroy, no goodbye: as if killed */
    int* buf;
    cudaMalloc((void**)&buf, sizeof(int));
    ncclResult_t r = ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, comm, NULL);
    CHECK(r == ncclRemoteError, "an allreduce with a dead peer returned %d, expected ncclRemoteError", r);
    CHECK(strstr(ncclGetLastError(NULL), "disconnected") != NULL, "the error should say the peer disconnected");
    CHECK(ncclCommShrink(comm, excluded, 1, &shrunk, NULL, NCCL_SHRINK_ABORT) == ncclSuccess, "shrink");
  } else if (!strcmp(mode, "revoke")) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    int* buf;
    cudaMalloc((void**)&buf, sizeof(int));
    if (g_rank != last)  /* queued, but it can never complete: the last rank never joins */
      CHECK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, comm, s) == ncclSuccess, "queue an allreduce");
    CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT) == ncclSuccess, "revoke");
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress) CHECK(ncclCommGetAsyncError(comm, &state) == ncclSuccess, "async error query");
    CHECK(state == ncclSuccess, "a revoked comm becomes quiescent (state %d)", state);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess, "the stream drains after the revoke");
    CHECK(ncclAllReduce(buf, buf, 1, ncclInt32, ncclSum, comm, s) == ncclInvalidUsage, "no work after revoke");
    CHECK(ncclCommFinalize(comm) == ncclInvalidUsage, "no finalize after revoke");
    CHECK(ncclCommShrink(comm, NULL, 0, &shrunk, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess, "shrink");
    survivors_sum += last + 1;
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }

  int n = 0, r = -1;
  CHECK(ncclCommCount(shrunk, &n) == ncclSuccess && ncclCommUserRank(shrunk, &r) == ncclSuccess, "query");
  int expected_n = !strcmp(mode, "revoke") ? world : world - 1;
  CHECK(n == expected_n && r == g_rank, "new comm: rank %d of %d, expected %d of %d", r, n, g_rank, expected_n);
  if (check_sum(shrunk, survivors_sum)) return 1;
  ncclCommDestroy(shrunk);
  ncclCommAbort(comm);
  printf("rank %d: shrink OK\n", g_rank);
  return 0;
}
