/* Collectives that run from the calling thread because their stream is idle keep stream order
 * and modeled time. Two processes, one rank each (RANK / WORLD_SIZE set by the launcher).
 * Usage: inline_collective_check ID_FILE GO_FILE EXPECT_INLINE.
 *
 * 1. On an idle stream the AllReduce has run when the call returns (only checked with
 *    EXPECT_INLINE 1); a copy and an event queued after it see its result and its modeled
 *    time. Rank 0 prints that time, which must not depend on where the collective ran.
 * 2. While rank 0's AllReduce waits for a late rank 1, a host function that another thread
 *    queues on the same stream runs after it: it sees the result.
 * 3. Behind work already queued (a host function holding the stream), the AllReduce is queued
 *    too: the call returns before it runs, and it runs once the stream reaches it.
 * Prints "INLINE OK" on success. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "expect.h"
#include "gate.h"
#include "share_id.h"

#define COUNT 256

static ncclComm_t comm;
static cudaStream_t stream;
static int rank, world;

static float expected_sum(void) { return (float)world * (world + 1) / 2; }

/* Device buffers are host memory on fakegpu: the checks read them directly. */
static float* device_floats(float value) {
  float* p = NULL;
  OK(cudaMalloc((void**)&p, COUNT * sizeof(float)));
  for (int i = 0; i < COUNT; ++i) p[i] = value;
  return p;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int wait_for_file(const char* path) {
  for (int waited_ms = 0; waited_ms < 60000; ++waited_ms) {
    FILE* f = fopen(path, "rb");
    if (f) return fclose(f), 0;
    sleep_ms(1);
  }
  return -1;
}

static void idle_stream(int expect_inline) {
  float* send = device_floats((float)(rank + 1));
  float* recv = device_floats(0);
  float* copy = device_floats(0);
  cudaEvent_t before, after;
  OK(cudaEventCreate(&before));
  OK(cudaEventCreate(&after));
  OK(cudaEventRecord(before, stream));
  OK(cudaStreamSynchronize(stream)); /* the stream is idle again */
  OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  if (expect_inline) {
    EXPECT(recv[0] == expected_sum(), "the AllReduce on an idle stream had not run when the call returned (%g)", recv[0]);
    EXPECT(cudaStreamQuery(stream) == cudaSuccess, "the stream is busy after an AllReduce that ran inline");
  }
  OK(cudaMemcpyAsync(copy, recv, COUNT * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  OK(cudaEventRecord(after, stream));
  OK(cudaStreamSynchronize(stream));
  EXPECT(copy[COUNT - 1] == expected_sum(), "the copy after the AllReduce saw %g", copy[COUNT - 1]);
  float ms = -1;
  OK(cudaEventElapsedTime(&ms, before, after));
  EXPECT(ms > 0, "the AllReduce took no modeled time on its stream (%g ms)", ms);
  if (rank == 0) printf("modeled_ms %.9f\n", ms);
}

struct Call {
  float* send;
  float* recv;
};
static void* allreduce_on_stream(void* arg) {
  struct Call* c = arg;
  OK(ncclAllReduce(c->send, c->recv, COUNT, ncclFloat, ncclSum, comm, stream));
  return NULL;
}

static void look(void* arg) {
  float** seen = arg;
  *seen[1] = *seen[0];
}

static void work_queued_meanwhile(const char* go_file) {
  struct Call call = {device_floats((float)(rank + 1)), device_floats(0)};
  if (rank != 0) {
    /* Late: rank 0 has queued its host function behind the AllReduce by now. */
    EXPECT(wait_for_file(go_file) == 0, "no %s appeared", go_file);
    allreduce_on_stream(&call);
    OK(cudaStreamSynchronize(stream));
    return;
  }
  pthread_t caller;
  EXPECT(pthread_create(&caller, NULL, allreduce_on_stream, &call) == 0, "no thread");
  /* The AllReduce cannot finish before rank 1 joins, which waits for go_file. */
  while (cudaStreamQuery(stream) == cudaSuccess) sleep_ms(1);
  float seen = -1;
  float* watch[2] = {call.recv, &seen};
  OK(cudaLaunchHostFunc(stream, look, watch));
  FILE* f = fopen(go_file, "wb");
  EXPECT(f && fclose(f) == 0, "cannot write %s", go_file);
  pthread_join(caller, NULL);
  OK(cudaStreamSynchronize(stream));
  EXPECT(seen == expected_sum(), "a host function queued during the AllReduce ran before it ended (saw %g)", seen);
}


static void behind_queued_work(void) {
  float* send = device_floats((float)(rank + 1));
  float* recv = device_floats(0);
  OK(cudaLaunchHostFunc(stream, wait_for_gate, NULL));
  OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  EXPECT(recv[0] == 0, "the AllReduce ran before the work queued ahead of it (%g)", recv[0]);
  EXPECT(cudaStreamQuery(stream) == cudaErrorNotReady, "the held stream reports itself idle");
  open_gate();
  OK(cudaStreamSynchronize(stream));
  EXPECT(recv[0] == expected_sum(), "the queued AllReduce gave %g", recv[0]);
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  rank = atoi(getenv("RANK"));
  world = atoi(getenv("WORLD_SIZE"));
  ncclUniqueId id;
  if (share_unique_id(argv[1], rank, &id) != 0) return 2;
  OK(ncclCommInitRank(&comm, world, id, rank));
  OK(cudaStreamCreate(&stream));
  idle_stream(atoi(argv[3]));
  work_queued_meanwhile(argv[2]);
  behind_queued_work();
  OK(ncclCommDestroy(comm));
  OK(cudaStreamDestroy(stream));
  if (failures) return 1;
  printf("INLINE OK\n");
  return 0;
}
