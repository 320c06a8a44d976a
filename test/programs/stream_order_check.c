/* Stream-ordered, asynchronous collectives, in one process driving two ranks.
 *
 * A gate stream is held by a host function until the test opens it. Each rank's stream waits
 * for the gate, then fills its send buffer (a host function), then allreduces. Before the gate
 * opens, the collectives have been queued but cannot have run: the streams and the events after
 * them report cudaErrorNotReady. After it opens, the results must include the values written by
 * the fill, which only stream order guarantees. Prints "STREAMS OK" on success. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NRANKS 2
#define COUNT 1000

#include "expect.h"
#include "gate.h"


struct Fill {
  float* buf;
  float value;
};
static void fill(void* arg) {
  struct Fill* f = arg;
  for (int i = 0; i < COUNT; ++i) f->buf[i] = f->value + (float)i;
}

int main(void) {
  ncclComm_t comms[NRANKS];
  OK(ncclCommInitAll(comms, NRANKS, NULL));
  cudaStream_t gate, streams[NRANKS];
  cudaEvent_t opened, started[NRANKS], done[NRANKS];
  float* bufs[NRANKS];
  struct Fill fills[NRANKS];
  /* Non-blocking: legacy-stream calls below (cudaMemset) must not wait for the closed gate. */
  OK(cudaStreamCreateWithFlags(&gate, cudaStreamNonBlocking));
  OK(cudaEventCreate(&opened));
  OK(cudaLaunchHostFunc(gate, wait_for_gate, NULL));
  OK(cudaEventRecord(opened, gate));
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    OK(cudaEventCreate(&started[r]));
    OK(cudaEventCreate(&done[r]));
    OK(cudaMalloc((void**)&bufs[r], COUNT * sizeof(float)));
    OK(cudaMemset(bufs[r], 0, COUNT * sizeof(float)));
    fills[r].buf = bufs[r];
    fills[r].value = 1000.0f * (float)(r + 1);
    OK(cudaStreamWaitEvent(streams[r], opened, 0));
    OK(cudaEventRecord(started[r], streams[r]));
    OK(cudaLaunchHostFunc(streams[r], fill, &fills[r]));
  }
  OK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r) OK(ncclAllReduce(bufs[r], bufs[r], COUNT, ncclFloat, ncclSum, comms[r], streams[r]));
  OK(ncclGroupEnd());  /* returns at once: everything is queued behind the gate */
  for (int r = 0; r < NRANKS; ++r) OK(cudaEventRecord(done[r], streams[r]));

  for (int r = 0; r < NRANKS; ++r) {
    EXPECT(cudaStreamQuery(streams[r]) == cudaErrorNotReady, "stream %d should still be waiting", r);
    EXPECT(cudaEventQuery(done[r]) == cudaErrorNotReady, "event after the allreduce of rank %d completed early", r);
    EXPECT(bufs[r][0] == 0.0f, "rank %d's buffer changed before its stream ran", r);
  }
  ncclResult_t state;
  OK(ncclCommGetAsyncError(comms[0], &state));
  EXPECT(state == ncclSuccess, "queued work is not an error (state %d)", state);

  open_gate();

  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaEventSynchronize(done[r]));
    EXPECT(cudaStreamQuery(streams[r]) == cudaSuccess, "stream %d idle after its last event", r);
    for (int i = 0; i < COUNT; ++i) {
      float want = 1000.0f + 2000.0f + 2.0f * (float)i;
      if (bufs[r][i] != want) {
        EXPECT(0, "rank %d element %d is %g, expected %g (the fill must run first)", r, i, bufs[r][i], want);
        break;
      }
    }
    float ms = -1;
    OK(cudaEventElapsedTime(&ms, started[r], done[r]));
    EXPECT(ms >= 0, "elapsed time %g", ms);
  }

  /* ncclCommFinalize and ncclCommDestroy flush what is still queued. */
  OK(ncclAllReduce(bufs[0], bufs[0], COUNT, ncclFloat, ncclSum, comms[0], streams[0]));
  OK(ncclAllReduce(bufs[1], bufs[1], COUNT, ncclFloat, ncclSum, comms[1], streams[1]));
  for (int r = 0; r < NRANKS; ++r) OK(ncclCommFinalize(comms[r]));
  EXPECT(bufs[0][0] == 2.0f * 3000.0f, "finalize flushed the queued allreduce (got %g)", bufs[0][0]);
  for (int r = 0; r < NRANKS; ++r) {
    OK(ncclCommDestroy(comms[r]));
    OK(cudaStreamDestroy(streams[r]));
  }
  OK(cudaStreamDestroy(gate));
  if (failures) return 1;
  printf("STREAMS OK\n");
  return 0;
}
