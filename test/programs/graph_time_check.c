/* Collectives in CUDA graphs and on the modeled clock, in one process driving two ranks.
 *
 * 1. An allreduce between two events: cudaEventElapsedTime reports the modeled duration, which
 *    the program prints as "MODELED_US <us>" for the test to compare with the report.
 * 2. An allreduce captured into a graph on each rank's stream and replayed three times with
 *    new inputs each time: every replay is a new operation with the right sum. Nothing runs
 *    during capture.
 * With argv[1] == "payload-free" (FAKEGPU_PAYLOAD=none) the results are not written: the
 * receive buffers keep their contents. Prints "GRAPH TIME OK" on success. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

#define NRANKS 2
#define COUNT (1 << 20)

#include "expect.h"

static float host[COUNT];

static void fill(float* dev, float value) {
  for (int i = 0; i < COUNT; ++i) host[i] = value;
  OK(cudaMemcpy(dev, host, sizeof host, cudaMemcpyHostToDevice));
}

static float first_of(const float* dev) {
  float v = -1;
  OK(cudaMemcpy(&v, dev, sizeof v, cudaMemcpyDeviceToHost));
  return v;
}

int main(int argc, char** argv) {
  const int payload_free = argc > 1 && strcmp(argv[1], "payload-free") == 0;
  ncclComm_t comms[NRANKS];
  cudaStream_t streams[NRANKS];
  float *send[NRANKS], *recv[NRANKS];
  OK(ncclCommInitAll(comms, NRANKS, NULL));
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    OK(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking));
    OK(cudaMalloc((void**)&send[r], COUNT * sizeof(float)));
    OK(cudaMalloc((void**)&recv[r], COUNT * sizeof(float)));
    fill(send[r], (float)(r + 1));
    fill(recv[r], -7.0f);
  }

  /* 1. Modeled time between events. */
  cudaEvent_t start, stop;
  OK(cudaSetDevice(0));
  OK(cudaEventCreate(&start));
  OK(cudaEventCreate(&stop));
  OK(cudaEventRecord(start, streams[0]));
  OK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r) OK(ncclAllReduce(send[r], recv[r], COUNT, ncclFloat, ncclSum, comms[r], streams[r]));
  OK(ncclGroupEnd());
  OK(cudaEventRecord(stop, streams[0]));
  OK(cudaEventSynchronize(stop));
  float ms = 0;
  OK(cudaEventElapsedTime(&ms, start, stop));
  EXPECT(ms > 0, "the modeled time of a 4 MiB allreduce is %f ms", ms);
  printf("MODELED_US %.3f\n", ms * 1000.0);
  EXPECT(first_of(recv[0]) == (payload_free ? -7.0f : 3.0f), "eager allreduce result %f", first_of(recv[0]));

  /* 2. Capture once, replay three times. */
  cudaGraph_t graphs[NRANKS];
  cudaGraphExec_t execs[NRANKS];
  fill(recv[0], -7.0f);
  for (int r = 0; r < NRANKS; ++r) OK(cudaStreamBeginCapture(streams[r], cudaStreamCaptureModeGlobal));
  OK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r) OK(ncclAllReduce(send[r], recv[r], COUNT, ncclFloat, ncclSum, comms[r], streams[r]));
  OK(ncclGroupEnd());
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaStreamEndCapture(streams[r], &graphs[r]));
    OK(cudaGraphInstantiate(&execs[r], graphs[r], 0));
  }
  EXPECT(first_of(recv[0]) == -7.0f, "a captured allreduce ran during capture");
  for (int replay = 1; replay <= 3; ++replay) {
    for (int r = 0; r < NRANKS; ++r) fill(send[r], (float)(replay * 10 + r));
    for (int r = 0; r < NRANKS; ++r) OK(cudaGraphLaunch(execs[r], streams[r]));
    for (int r = 0; r < NRANKS; ++r) OK(cudaStreamSynchronize(streams[r]));
    const float want = payload_free ? -7.0f : (float)(replay * 20 + 1);
    for (int r = 0; r < NRANKS; ++r)
      EXPECT(first_of(recv[r]) == want, "replay %d rank %d: %f, want %f", replay, r, first_of(recv[r]), want);
  }
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaGraphExecDestroy(execs[r]));
    OK(cudaGraphDestroy(graphs[r]));
    OK(ncclCommDestroy(comms[r]));
  }
  if (failures) return 1;
  printf("GRAPH TIME OK\n");
  return 0;
}
