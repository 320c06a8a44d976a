/* A collective that cannot be queued must leave no trace: no operation left counted in flight
 * (ncclCommDestroy would wait for it forever) and no sequence number used up (the rank's next
 * collective would no longer match its peers'). One process per rank (RANK / WORLD_SIZE set by
 * the launcher). Usage: failed_enqueue_check ID_FILE MODE, where MODE is
 *   fail:   rank 0 makes failing calls (alone and in a group), then every rank allreduces;
 *   gap:    one rank, a group whose failing call sits between two calls that are queued: its
 *           number cannot be given back, so the communicator must report an error;
 *   graphs: collectives captured into graphs, replayed, and the graphs destroyed, many times;
 *   user_objects: a user object lives exactly as long as the graphs that hold it.
 * Prints "FAILED ENQUEUE OK" on success. */
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"
#include "share_id.h"

#define COUNT 256

/* A handle no stream has: every call that queues on it fails. */
static cudaStream_t invalid_stream(void) { return (cudaStream_t)(uintptr_t)0x5eed0; }

static float* device_floats(float value) {
  float host[COUNT];
  float* dev = NULL;
  for (int i = 0; i < COUNT; ++i) host[i] = value;
  OK(cudaMalloc((void**)&dev, sizeof host));
  OK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
  return dev;
}

/* Every element of dev must equal want. */
static void expect_floats(const float* dev, float want, const char* what) {
  float host[COUNT];
  OK(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost));
  for (int i = 0; i < COUNT; ++i)
    if (host[i] != want) {
      EXPECT(0, "%s: element %d is %g, expected %g", what, i, host[i], want);
      return;
    }
}

static void failing_calls(ncclComm_t comm, float* buf) {
  EXPECT(ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, invalid_stream()) != ncclSuccess,
         "an allreduce on an invalid stream succeeded");
  OK(ncclGroupStart());
  OK(ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, invalid_stream()));
  EXPECT(ncclGroupEnd() != ncclSuccess, "a group with an allreduce on an invalid stream succeeded");
}

/* The sum over ranks of (rank + 1). */
static float rank_sum(int world) { return (float)(world * (world + 1) / 2); }

static void check_fail(ncclComm_t comm, int rank, int world, cudaStream_t stream) {
  float* buf = device_floats((float)(rank + 1));
  if (rank == 0) failing_calls(comm, buf);
  OK(ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, comm, stream));
  OK(cudaStreamSynchronize(stream));
  expect_floats(buf, rank_sum(world), "allreduce after failed calls");
  ncclResult_t async = ncclSuccess;
  OK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async == ncclSuccess, "the communicator reports asynchronous error %d", (int)async);
  OK(cudaFree(buf));
}

static void check_gap(ncclComm_t comm, cudaStream_t stream) {
  float* a = device_floats(1.0f);
  float* b = device_floats(2.0f);
  OK(ncclGroupStart());
  OK(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, stream));
  OK(ncclAllReduce(b, b, COUNT, ncclFloat, ncclSum, comm, invalid_stream()));
  OK(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, stream));
  EXPECT(ncclGroupEnd() != ncclSuccess, "a group with an allreduce on an invalid stream succeeded");
  OK(cudaStreamSynchronize(stream));
  ncclResult_t async = ncclSuccess;
  OK(ncclCommGetAsyncError(comm, &async));
  EXPECT(async != ncclSuccess, "the communicator cannot match its peers any more, yet reports no error");
  /* Later calls fail, and say why. */
  EXPECT(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, stream) != ncclSuccess,
         "an allreduce on a communicator that cannot match its peers succeeded");
  EXPECT(strstr(ncclGetLastError(comm), "can no longer match its peers") != NULL,
         "the last error does not say why: %s", ncclGetLastError(comm));
  OK(cudaFree(a));
  OK(cudaFree(b));
}

static void check_graphs(ncclComm_t comm, int rank, int world, cudaStream_t stream, int rounds) {
  float* send = device_floats((float)(rank + 1));
  float* recv = device_floats(0.0f);
  for (int round = 0; round < rounds; ++round) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
    OK(cudaStreamEndCapture(stream, &graph));
    OK(cudaGraphInstantiate(&exec, graph, 0));
    OK(cudaGraphLaunch(exec, stream));
    OK(cudaGraphLaunch(exec, stream));
    OK(cudaGraphExecDestroy(exec)); /* before its launches have run: they must still complete */
    OK(cudaGraphDestroy(graph));
    OK(cudaStreamSynchronize(stream));
    expect_floats(recv, rank_sum(world), "replayed allreduce");
  }
  OK(cudaFree(send));
  OK(cudaFree(recv));
}

static int destroyed = 0;
static void count_destroy(void* counter) { ++*(int*)counter; }
static void no_op(void* unused) { (void)unused; }

static void check_user_objects(cudaStream_t stream) {
  cudaUserObject_t object;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  OK(cudaUserObjectCreate(&object, &destroyed, count_destroy, 1, cudaUserObjectNoDestructorSync));
  OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  OK(cudaLaunchHostFunc(stream, no_op, NULL));
  OK(cudaStreamEndCapture(stream, &graph));
  OK(cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove));
  OK(cudaGraphInstantiate(&exec, graph, 0));
  OK(cudaGraphDestroy(graph));
  EXPECT(destroyed == 0, "the user object went with the graph while an instance holds it");
  OK(cudaGraphLaunch(exec, stream));
  OK(cudaGraphExecDestroy(exec));
  OK(cudaStreamSynchronize(stream));
  EXPECT(destroyed == 1, "the user object was destroyed %d times after its graphs were", destroyed);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* mode = argv[2];
  int rank = atoi(getenv("RANK")), world = atoi(getenv("WORLD_SIZE"));
  cudaStream_t stream;
  OK(cudaStreamCreate(&stream));
  if (strcmp(mode, "user_objects") == 0) {
    check_user_objects(stream);
  } else {
    ncclUniqueId id;
    if (share_unique_id(argv[1], rank, &id) != 0) return 2;
    ncclComm_t comm;
    OK(ncclCommInitRank(&comm, world, id, rank));
    if (strcmp(mode, "fail") == 0)
      check_fail(comm, rank, world, stream);
    else if (strcmp(mode, "gap") == 0)
      check_gap(comm, stream);
    else if (strcmp(mode, "graphs") == 0)
      check_graphs(comm, rank, world, stream, argc > 3 ? atoi(argv[3]) : 10);
    else
      EXPECT(0, "unknown mode %s", mode);
    OK(ncclCommDestroy(comm)); /* must return: nothing may be left counted in flight */
  }
  OK(cudaStreamDestroy(stream));
  if (failures) return 1;
  printf("FAILED ENQUEUE OK\n");
  return 0;
}
