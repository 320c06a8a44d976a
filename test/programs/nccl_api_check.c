/* One process, several ranks: checks the communicator API paths that need no other process.
 * ncclCommInitAll with grouped allreduces from one thread, non-blocking init observed through
 * ncclCommGetAsyncError, configs of older (smaller) layouts, and the error codes of bad calls.
 * Needs a coordinator whose cluster has at least 4 ranks. Prints "API OK" on success. */
#include <dlfcn.h>
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NDEV 4
#define COUNT 4099

/* Part of NCCL's device API (nccl_device.h), declared here to probe it like programs do. */
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* reqs, void* outDevComm);

#include "expect.h"

#define EXPECT_OK(call) EXPECT((call) == ncclSuccess, "%s did not succeed: %s", #call, ncclGetLastError(NULL))

static void check_init_all(void) {
  ncclComm_t comms[NDEV];
  int devs[NDEV] = {3, 2, 1, 0};
  EXPECT_OK(ncclCommInitAll(comms, NDEV, devs));
  float* buf[NDEV];
  for (int i = 0; i < NDEV; ++i) {
    int n = 0, r = -1, d = -1;
    EXPECT_OK(ncclCommCount(comms[i], &n));
    EXPECT_OK(ncclCommUserRank(comms[i], &r));
    EXPECT_OK(ncclCommCuDevice(comms[i], &d));
    EXPECT(n == NDEV && r == i && d == devs[i], "comm %d: count %d rank %d device %d", i, n, r, d);
    EXPECT(cudaSetDevice(devs[i]) == cudaSuccess, "cudaSetDevice");
    EXPECT(cudaMalloc((void**)&buf[i], COUNT * sizeof(float)) == cudaSuccess, "cudaMalloc");
    for (int k = 0; k < COUNT; ++k) buf[i][k] = (float)(i + k % 13);
  }
  /* One thread drives all four ranks: only possible because the group posts before waiting. */
  EXPECT_OK(ncclGroupStart());
  for (int i = 0; i < NDEV; ++i) EXPECT_OK(ncclAllReduce(buf[i], buf[i], COUNT, ncclFloat, ncclSum, comms[i], NULL));
  EXPECT_OK(ncclGroupEnd());
  for (int i = 0; i < NDEV; ++i)
    for (int k = 0; k < COUNT; ++k) {
      float expect = (float)(0 + 1 + 2 + 3 + NDEV * (k % 13));
      if (buf[i][k] != expect) {
        EXPECT(0, "rank %d element %d is %g, expected %g", i, k, buf[i][k], expect);
        break;
      }
    }
  /* Nested groups behave as one. */
  EXPECT_OK(ncclGroupStart());
  EXPECT_OK(ncclGroupStart());
  for (int i = 0; i < NDEV; ++i) EXPECT_OK(ncclAllReduce(buf[i], buf[i], 1, ncclFloat, ncclMax, comms[i], NULL));
  EXPECT_OK(ncclGroupEnd());
  EXPECT_OK(ncclGroupEnd());
  for (int i = 0; i < NDEV; ++i) {
    cudaFree(buf[i]);
    EXPECT_OK(ncclCommDestroy(comms[i]));
  }
}

/* Non-blocking init of two ranks from one thread, with a config cut to an older layout's size. */
static void check_nonblocking_init(size_t config_size) {
  ncclUniqueId id;
  EXPECT_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.size = config_size;
  config.blocking = 0;
  ncclComm_t comms[2];
  EXPECT_OK(ncclGroupStart());
  for (int r = 0; r < 2; ++r) EXPECT_OK(ncclCommInitRankConfig(&comms[r], 2, id, r, &config));
  ncclResult_t end = ncclGroupEnd();
  EXPECT(end == ncclInProgress || end == ncclSuccess, "group end returned %d", end);
  for (int r = 0; r < 2; ++r) {
    ncclResult_t state = ncclInProgress;
    time_t deadline = time(NULL) + 60; /* generous: only a hang should ever reach it */
    while (state == ncclInProgress && time(NULL) < deadline) EXPECT_OK(ncclCommGetAsyncError(comms[r], &state));
    EXPECT(state == ncclSuccess, "rank %d async state %d", r, state);
  }
  for (int r = 0; r < 2; ++r) EXPECT_OK(ncclCommDestroy(comms[r]));
}

/* Non-blocking init outside a group returns ncclInProgress at once. */
static void check_nonblocking_returns_in_progress(void) {
  ncclUniqueId id;
  EXPECT_OK(ncclGetUniqueId(&id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.commName = "solo";
  ncclComm_t comm;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 1, id, 0, &config);
  EXPECT(r == ncclInProgress || r == ncclSuccess, "non-blocking init returned %d", r);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) EXPECT_OK(ncclCommGetAsyncError(comm, &state));
  EXPECT(state == ncclSuccess, "async state %d", state);
  EXPECT_OK(ncclCommFinalize(comm));
  EXPECT_OK(ncclCommDestroy(comm));
}

static void check_bad_calls(void) {
  ncclUniqueId id;
  EXPECT_OK(ncclGetUniqueId(&id));
  ncclComm_t comm;
  EXPECT(ncclCommInitRank(NULL, 1, id, 0) == ncclInvalidArgument, "NULL comm pointer");
  EXPECT(ncclCommInitRank(&comm, 2, id, 5) == ncclInvalidArgument, "rank out of range");
  EXPECT(strstr(ncclGetLastError(NULL), "rank 5 is outside") != NULL, "last error: %s", ncclGetLastError(NULL));
  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0;
  EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &bad) == ncclInvalidArgument, "bad config magic");
  ncclUniqueId garbage;
  memset(&garbage, 0x5a, sizeof garbage);
  EXPECT(ncclCommInitRank(&comm, 1, garbage, 0) == ncclInvalidArgument, "foreign unique id");

  EXPECT_OK(ncclCommInitRank(&comm, 1, id, 0));
  float x = 1;
  EXPECT(ncclAllReduce(&x, &x, 1, (ncclDataType_t)42, ncclSum, comm, NULL) == ncclInvalidArgument, "bad dtype");
  EXPECT(ncclAllReduce(&x, &x, 1, ncclFloat, (ncclRedOp_t)9, comm, NULL) == ncclInvalidArgument, "bad op");
  EXPECT(ncclAllReduce(NULL, &x, 1, ncclFloat, ncclSum, comm, NULL) == ncclInvalidArgument, "NULL buffer");
  EXPECT(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, comm, NULL) == ncclSuccess, "count 0 is legal");
  EXPECT(ncclAllReduce(&x, &x, SIZE_MAX / 2, ncclFloat, ncclSum, comm, NULL) == ncclInvalidArgument, "count overflow");
  EXPECT(strstr(ncclGetLastError(NULL), "overflows the addressable size") != NULL, "last error: %s", ncclGetLastError(NULL));
  EXPECT(ncclDevCommCreate(comm, NULL, NULL) == ncclInvalidUsage, "an unsupported call fails cleanly");
  EXPECT(ncclCommRevoke(comm, 5) == ncclInvalidArgument, "revoke flags must be 0");

  /* Memory, registration and windows. */
  void* mem = NULL;
  EXPECT_OK(ncclMemAlloc(&mem, 1 << 20));
  EXPECT(mem != NULL, "ncclMemAlloc gave NULL");
  void* handle = NULL;
  EXPECT_OK(ncclCommRegister(comm, mem, 1 << 20, &handle));
  EXPECT_OK(ncclCommDeregister(comm, handle));
  EXPECT(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "double deregistration");
  ncclWindow_t win;
  EXPECT_OK(ncclCommWindowRegister(comm, mem, 1 << 20, &win, NCCL_WIN_COLL_SYMMETRIC));
  void* user = NULL;
  EXPECT_OK(ncclWinGetUserPtr(comm, win, &user));
  EXPECT(user == mem, "ncclWinGetUserPtr gave %p for a window on %p", user, mem);
  EXPECT_OK(ncclCommWindowDeregister(comm, win));
  EXPECT_OK(ncclCommRegister(comm, mem, 64, &handle)); /* left registered: freed with the comm */
  EXPECT_OK(ncclMemFree(mem));

  /* NCCL 2.29's suspend and resume: no operations while suspended. */
  uint64_t stat = 7;
  EXPECT_OK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &stat));
  EXPECT(stat == 0, "a new communicator reports suspended = %llu", (unsigned long long)stat);
  EXPECT_OK(ncclCommSuspend(comm, NCCL_SUSPEND_MEM));
  EXPECT_OK(ncclCommMemStats(comm, ncclStatGpuMemSuspended, &stat));
  EXPECT(stat == 1, "a suspended communicator reports suspended = %llu", (unsigned long long)stat);
  EXPECT(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL) == ncclInvalidUsage, "collective while suspended");
  EXPECT(ncclCommSuspend(comm, 0) == ncclInvalidUsage, "suspending twice");
  EXPECT_OK(ncclCommResume(comm));
  EXPECT(ncclCommResume(comm) == ncclInvalidUsage, "resuming a communicator that is not suspended");
  EXPECT(ncclCommGrow(comm, 2, NULL, -1, NULL, NULL) == ncclInvalidUsage, "growing is not simulated");

  /* PreMulSum operator misuse. */
  ncclRedOp_t premul;
  float scalar = 2;
  EXPECT_OK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
  EXPECT(premul >= ncclNumOps, "PreMulSum op %d collides with a built-in", premul);
  EXPECT(ncclAllReduce(&x, &x, 1, ncclDouble, premul, comm, NULL) == ncclInvalidArgument, "op used with another type");
  x = 3;
  EXPECT_OK(ncclAllReduce(&x, &x, 1, ncclFloat, premul, comm, NULL));
  EXPECT(x == 6, "PreMulSum on one rank gave %g, expected 6", x);
  EXPECT(ncclRedOpDestroy(ncclSum, comm) == ncclInvalidArgument, "destroying a built-in op");
  EXPECT_OK(ncclRedOpDestroy(premul, comm));
  EXPECT(ncclRedOpDestroy(premul, comm) == ncclInvalidArgument, "destroying twice");
  EXPECT(ncclAllReduce(&x, &x, 1, ncclFloat, premul, comm, NULL) == ncclInvalidArgument, "destroyed op");
  EXPECT(ncclSend(&x, 1, ncclFloat, 1, comm, NULL) == ncclInvalidArgument, "peer outside the communicator");
  EXPECT(ncclBroadcast(&x, &x, 1, ncclFloat, -1, comm, NULL) == ncclInvalidArgument, "negative root");
  /* A rank may send to itself; inside a group both halves are posted before either waits. */
  float y = 0;
  x = 42;
  EXPECT_OK(ncclGroupStart());
  EXPECT_OK(ncclSend(&x, 1, ncclFloat, 0, comm, NULL));
  EXPECT_OK(ncclRecv(&y, 1, ncclFloat, 0, comm, NULL));
  EXPECT_OK(ncclGroupEnd());
  EXPECT(y == 42, "self send/recv delivered %g", y);
  EXPECT(ncclGroupEnd() == ncclInvalidUsage, "unmatched group end");
  EXPECT_OK(ncclCommDestroy(comm));
  int n = 0;
  EXPECT(ncclCommCount(comm, &n) == ncclInvalidArgument, "use after destroy");
  EXPECT(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL) == ncclInvalidArgument, "collective after destroy");
  EXPECT(ncclCommDestroy(NULL) == ncclSuccess, "destroying NULL is allowed");
}

static void check_aliases(void) {
  typedef ncclResult_t (*GetVersion)(int*);
  GetVersion p = (GetVersion)dlsym(RTLD_DEFAULT, "pncclGetVersion");
  int v = 0;
  EXPECT(p && p(&v) == ncclSuccess && v == 22809, "pncclGetVersion gives %d", v);
  EXPECT(strcmp(ncclGetErrorString(ncclInProgress), "NCCL operation in progress") == 0, "error string");
}

int main(void) {
  check_init_all();
  check_nonblocking_init(sizeof(ncclConfig_t));
  /* An NCCL 2.18-era config ends before splitShare; its blocking field must still be honoured. */
  check_nonblocking_init(offsetof(ncclConfig_t, splitShare));
  check_nonblocking_returns_in_progress();
  check_bad_calls();
  check_aliases();
  if (failures) {
    fprintf(stderr, "%d API checks failed\n", failures);
    return 1;
  }
  printf("API OK\n");
  return 0;
}
