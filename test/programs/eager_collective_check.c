/* Collectives on created streams keep CUDA's and NCCL's semantics however they run: posted by the
 * calling thread when the stream is idle (FAKEGPU_EAGER_COLLECTIVES=1, the default) or queued
 * whole for the stream's worker (0). Two processes, one rank each (RANK / WORLD_SIZE set by the
 * launcher). Usage: eager_collective_check ID_FILE GO_FILE DONE_FILE.
 *
 * 1. A copy and an event queued after an AllReduce on an idle stream see its result and its
 *    modeled time. Rank 0 prints that time, which must not depend on how the collective ran.
 * 2. The call returns before the peers arrive, and collectives make progress without their
 *    caller synchronising, one queued behind another too: rank 1 finishes two AllReduces while
 *    rank 0 waits for it to say so.
 * 3. A caller that only polls (cudaStreamQuery, cudaEventQuery, as torch's watchdog does) sees
 *    the collective end.
 * 4. Two communicators' collectives issued in opposite orders on the two ranks, each on its own
 *    stream, both complete (NCCL allows it: the calls return at once).
 * 5. While rank 0's AllReduce waits for a late rank 1, a host function that another thread
 *    queues on the same stream runs after it: it sees the result.
 * 6. Behind work already queued (a host function holding the stream) the AllReduce is queued
 *    too: it runs once the stream reaches it.
 * 7. ncclCommDestroy right after an AllReduce, with no synchronisation, waits for it.
 * Prints "EAGER OK" on success. */
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

static void touch(const char* path) {
  FILE* f = fopen(path, "wb");
  EXPECT(f && fclose(f) == 0, "cannot write %s", path);
}

static void idle_stream(void) {
  float* send = device_floats((float)(rank + 1));
  float* recv = device_floats(0);
  float* copy = device_floats(0);
  cudaEvent_t before, after;
  OK(cudaEventCreate(&before));
  OK(cudaEventCreate(&after));
  OK(cudaEventRecord(before, stream));
  OK(cudaStreamSynchronize(stream)); /* the stream is idle again */
  OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  OK(cudaMemcpyAsync(copy, recv, COUNT * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  OK(cudaEventRecord(after, stream));
  OK(cudaStreamSynchronize(stream));
  EXPECT(copy[COUNT - 1] == expected_sum(), "the copy after the AllReduce saw %g", copy[COUNT - 1]);
  float ms = -1;
  OK(cudaEventElapsedTime(&ms, before, after));
  EXPECT(ms > 0, "the AllReduce took no modeled time on its stream (%g ms)", ms);
  if (rank == 0) printf("modeled_ms %.9f\n", ms);
}

static void progress_without_caller(const char* done_file) {
  float* send = device_floats((float)(rank + 1));
  float* recv = device_floats(0);
  float* twice = device_floats(0);
  OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  OK(ncclAllReduce(recv, twice, COUNT, ncclFloat, ncclSum, comm, stream)); /* queued behind the first */
  if (rank == 1) {
    OK(cudaStreamSynchronize(stream));
    touch(done_file);
    return;
  }
  /* Rank 0 neither synchronises nor polls until rank 1 says both AllReduces are done. */
  EXPECT(wait_for_file(done_file) == 0, "rank 1's AllReduces never finished while rank 0 left its own alone");
  OK(cudaStreamSynchronize(stream));
  EXPECT(recv[0] == expected_sum() && twice[0] == world * expected_sum(), "the AllReduces gave %g and %g", recv[0],
         twice[0]);
}

static void polled_to_the_end(void) {
  float* send = device_floats((float)(rank + 1));
  float* recv = device_floats(0);
  OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  int polls = 0;
  while (cudaStreamQuery(stream) == cudaErrorNotReady && polls < 60000) sleep_ms(1), ++polls;
  EXPECT(cudaStreamQuery(stream) == cudaSuccess, "cudaStreamQuery never saw the AllReduce end");
  EXPECT(recv[0] == expected_sum(), "the polled AllReduce gave %g", recv[0]);
  cudaEvent_t end;
  OK(cudaEventCreateWithFlags(&end, cudaEventDisableTiming));
  OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  OK(cudaEventRecord(end, stream));
  for (polls = 0; cudaEventQuery(end) == cudaErrorNotReady && polls < 60000; ++polls) sleep_ms(1);
  EXPECT(cudaEventQuery(end) == cudaSuccess, "cudaEventQuery never saw the AllReduce end");
  OK(cudaEventDestroy(end));
}

static void opposite_orders(void) {
  ncclComm_t other;
  cudaStream_t other_stream;
  OK(ncclCommSplit(comm, 0, rank, &other, NULL));
  OK(cudaStreamCreate(&other_stream));
  float* a = device_floats((float)(rank + 1));
  float* b = device_floats((float)(rank + 1));
  if (rank == 0) {
    OK(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, stream));
    OK(ncclAllReduce(b, b, COUNT, ncclFloat, ncclSum, other, other_stream));
  } else {
    OK(ncclAllReduce(b, b, COUNT, ncclFloat, ncclSum, other, other_stream));
    OK(ncclAllReduce(a, a, COUNT, ncclFloat, ncclSum, comm, stream));
  }
  OK(cudaStreamSynchronize(stream));
  OK(cudaStreamSynchronize(other_stream));
  EXPECT(a[0] == expected_sum() && b[0] == expected_sum(), "opposite orders gave %g and %g", a[0], b[0]);
  OK(ncclCommDestroy(other));
  OK(cudaStreamDestroy(other_stream));
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
  pthread_join(caller, NULL); /* the call returns before rank 1 has joined */
  EXPECT(cudaStreamQuery(stream) == cudaErrorNotReady, "the AllReduce ended before rank 1 joined");
  float seen = -1;
  float* watch[2] = {call.recv, &seen};
  OK(cudaLaunchHostFunc(stream, look, watch));
  touch(go_file);
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

static void destroy_without_sync(void) {
  float* send = device_floats((float)(rank + 1));
  float* recv = device_floats(0);
  OK(ncclAllReduce(send, recv, COUNT, ncclFloat, ncclSum, comm, stream));
  OK(ncclCommDestroy(comm));
  EXPECT(recv[0] == expected_sum(), "ncclCommDestroy returned before the AllReduce ended (%g)", recv[0]);
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  rank = atoi(getenv("RANK"));
  world = atoi(getenv("WORLD_SIZE"));
  ncclUniqueId id;
  if (share_unique_id(argv[1], rank, &id) != 0) return 2;
  OK(ncclCommInitRank(&comm, world, id, rank));
  OK(cudaStreamCreate(&stream));
  idle_stream();
  progress_without_caller(argv[3]);
  polled_to_the_end();
  opposite_orders();
  work_queued_meanwhile(argv[2]);
  behind_queued_work();
  destroy_without_sync();
  OK(cudaStreamDestroy(stream));
  if (failures) return 1;
  printf("EAGER OK\n");
  return 0;
}
