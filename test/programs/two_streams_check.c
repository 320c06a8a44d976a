/* Collectives on different streams must never wait on each other through the host functions
 * that run them. NVIDIA's runtime runs every host function of a process on one thread
 * (FAKEGPU_SERIAL_HOST_FUNCTIONS=1 makes fakegpu's do the same), so a collective that waited
 * for its peers inside a host function would hold up the peers' own host functions.
 *
 * One process drives two ranks, as NCCL's single-process examples do:
 * 1. each rank all-reduces on its own stream, rank 0's call first, outside a group;
 * 2. with two communicators per rank, rank 0 all-gathers on its first stream, then
 *    reduce-scatters on its second, while rank 1 does the two in the other order (as FSDP's
 *    all-gathers and reduce-scatters on two streams can be met);
 * 3. the same two collectives captured into a CUDA graph each, replayed twice in those orders.
 * Prints "TWO STREAMS OK" when every result is right; a hang ends the program after 60 s. */
#include <nccl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NRANKS 2
#define COUNT 4096

#include "expect.h"

static void hung(int sig) {
  (void)sig;
  static const char message[] = "two_streams_check: still waiting after 60 s: the collectives deadlocked\n";
  (void)!write(2, message, sizeof message - 1);
  _exit(3);
}

static float* device_floats(const float* values, size_t n) {
  float* d = NULL;
  OK(cudaMalloc((void**)&d, n * sizeof(float)));
  if (values) OK(cudaMemcpy(d, values, n * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

static void read_back(float* host, const float* device, size_t n) {
  OK(cudaMemcpy(host, device, n * sizeof(float), cudaMemcpyDeviceToHost));
}

/* The graph of what `record` queues on the stream, instantiated. */
#define CAPTURED(exec, stream, record)                                        \
  do {                                                                        \
    cudaGraph_t graph_;                                                       \
    OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));         \
    OK(record);                                                               \
    OK(cudaStreamEndCapture(stream, &graph_));                                \
    OK(cudaGraphInstantiate(&(exec), graph_, 0));                             \
    OK(cudaGraphDestroy(graph_));                                             \
  } while (0)

int main(void) {
  signal(SIGALRM, hung);
  alarm(60);
  ncclComm_t first[NRANKS], second[NRANKS];
  OK(ncclCommInitAll(first, NRANKS, NULL));
  OK(ncclCommInitAll(second, NRANKS, NULL));
  cudaStream_t streams[NRANKS][2];
  float *sum[NRANKS], *gather_in[NRANKS], *gather_out[NRANKS], *scatter_in[NRANKS], *scatter_out[NRANKS];
  static float values[NRANKS * COUNT];
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    for (int s = 0; s < 2; ++s) OK(cudaStreamCreateWithFlags(&streams[r][s], cudaStreamNonBlocking));
    for (int i = 0; i < NRANKS * COUNT; ++i) values[i] = (float)(r * 100000 + i);
    sum[r] = device_floats(values, COUNT);
    gather_in[r] = device_floats(values, COUNT);
    gather_out[r] = device_floats(NULL, NRANKS * COUNT);
    scatter_in[r] = device_floats(values, NRANKS * COUNT);
    scatter_out[r] = device_floats(NULL, COUNT);
  }

  /* 1: one stream per rank, rank 0's collective queued before rank 1's exists. */
  for (int r = 0; r < NRANKS; ++r) OK(ncclAllReduce(sum[r], sum[r], COUNT, ncclFloat, ncclSum, first[r], streams[r][0]));
  /* 2: two streams per rank, met in the other order by the other rank. */
  OK(ncclAllGather(gather_in[0], gather_out[0], COUNT, ncclFloat, first[0], streams[0][0]));
  OK(ncclReduceScatter(scatter_in[0], scatter_out[0], COUNT, ncclFloat, ncclSum, second[0], streams[0][1]));
  OK(ncclReduceScatter(scatter_in[1], scatter_out[1], COUNT, ncclFloat, ncclSum, second[1], streams[1][1]));
  OK(ncclAllGather(gather_in[1], gather_out[1], COUNT, ncclFloat, first[1], streams[1][0]));
  for (int r = 0; r < NRANKS; ++r)
    for (int s = 0; s < 2; ++s) OK(cudaStreamSynchronize(streams[r][s]));

  /* 3: each collective of 2 captured into a graph of its own, replayed twice in the same orders
   * (the results are those of 2 each time). */
  cudaGraphExec_t gather_graph[NRANKS], scatter_graph[NRANKS];
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    CAPTURED(gather_graph[r], streams[r][0],
             ncclAllGather(gather_in[r], gather_out[r], COUNT, ncclFloat, first[r], streams[r][0]));
    CAPTURED(scatter_graph[r], streams[r][1],
             ncclReduceScatter(scatter_in[r], scatter_out[r], COUNT, ncclFloat, ncclSum, second[r], streams[r][1]));
  }
  for (int replay = 0; replay < 2; ++replay) {
    OK(cudaGraphLaunch(gather_graph[0], streams[0][0]));
    OK(cudaGraphLaunch(scatter_graph[0], streams[0][1]));
    OK(cudaGraphLaunch(scatter_graph[1], streams[1][1]));
    OK(cudaGraphLaunch(gather_graph[1], streams[1][0]));
  }
  for (int r = 0; r < NRANKS; ++r) {
    for (int s = 0; s < 2; ++s) OK(cudaStreamSynchronize(streams[r][s]));
    OK(cudaGraphExecDestroy(gather_graph[r]));
    OK(cudaGraphExecDestroy(scatter_graph[r]));
  }

  static float got[NRANKS * COUNT];
  for (int r = 0; r < NRANKS; ++r) {
    read_back(got, sum[r], COUNT);
    for (int i = 0; i < COUNT; ++i)
      if (got[i] != (float)(100000 + 2 * i)) {
        EXPECT(0, "rank %d: all-reduce [%d] = %g, expected %g", r, i, got[i], (double)(100000 + 2 * i));
        break;
      }
    read_back(got, gather_out[r], NRANKS * COUNT);
    for (int i = 0; i < NRANKS * COUNT; ++i) {
      const float expected = (float)((i / COUNT) * 100000 + i % COUNT);
      if (got[i] != expected) {
        EXPECT(0, "rank %d: all-gather [%d] = %g, expected %g", r, i, got[i], (double)expected);
        break;
      }
    }
    read_back(got, scatter_out[r], COUNT);
    for (int i = 0; i < COUNT; ++i) {
      const float expected = (float)(100000 + 2 * (r * COUNT + i));
      if (got[i] != expected) {
        EXPECT(0, "rank %d: reduce-scatter [%d] = %g, expected %g", r, i, got[i], (double)expected);
        break;
      }
    }
  }
  for (int r = 0; r < NRANKS; ++r) {
    OK(ncclCommDestroy(first[r]));
    OK(ncclCommDestroy(second[r]));
  }
  if (failures) return 1;
  printf("TWO STREAMS OK\n");
  return 0;
}
