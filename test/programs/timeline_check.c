/* The modeled timeline follows the program, checked with CUDA events on programs whose right
 * answer is known by hand: one process drives two ranks (two fake GPUs of one node), with two
 * communicators and two streams per rank. T is one allreduce's modeled time; K the modeled time
 * of a kernel fakegpu's runtime prices (fakegpu_cuda_record_kernel, as the PyTorch hook does).
 *
 * 1. Two allreduces in a row on one stream: 2T.
 * 2. An allreduce on one stream beside a kernel of 3T on another: 3T, they overlap.
 * 3. An allreduce on communicator A, then one on B on another stream that waits for it through
 *    an event: 2T.
 * 4. The same with the host synchronizing the first stream instead of an event: 2T.
 * 5. Rank 1 runs a kernel of K before the allreduce, rank 0 does not: rank 0 waits, K + T.
 * 6. A grouped ring (each rank sends to the next, receives from the previous): the two
 *    directions share no link, so not 2S (S: one send alone); each send's channels also receive,
 *    copying both ways as NCCL's do, so no faster than S.
 * Each within 1% (6: within its bounds). Prints "TIMELINE OK" on success. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>

#include "expect.h"

#define NRANKS 2
#define COUNT (1 << 20)

/* fakegpu's runtime: queues a kernel's modeled cost (math 0: memory-bound, priced by bytes). */
cudaError_t fakegpu_cuda_record_kernel(cudaStream_t stream, int math, double flops, double bytes, int row_alignment,
                                       int64_t* cost_ns);

static ncclComm_t comm_a[NRANKS], comm_b[NRANKS];
static cudaStream_t first[NRANKS], second[NRANKS];
static float *send[NRANKS], *recv[NRANKS];
static cudaEvent_t start, stop, between[NRANKS];

static void allreduce(ncclComm_t* comms, cudaStream_t* streams) {
  OK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r) OK(ncclAllReduce(send[r], recv[r], COUNT, ncclFloat, ncclSum, comms[r], streams[r]));
  OK(ncclGroupEnd());
}

/* Every stream done and the host past all of it: each scenario starts from one point in time. */
static void settle(void) {
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    OK(cudaStreamSynchronize(first[r]));
    OK(cudaStreamSynchronize(second[r]));
  }
  OK(cudaSetDevice(0));
}

/* Modeled microseconds from `start`, recorded on rank 0's first stream before the scenario, to
 * `stop`, recorded on `end_stream` after it. */
static double elapsed_us(cudaStream_t end_stream) {
  OK(cudaEventRecord(stop, end_stream));
  OK(cudaEventSynchronize(stop));
  float ms = 0;
  OK(cudaEventElapsedTime(&ms, start, stop));
  return ms * 1000.0;
}

static double kernel(int rank, cudaStream_t stream, double us) {
  int64_t cost_ns = 0;
  OK(cudaSetDevice(rank));
  /* A memory-bound kernel: the runtime prices it by bytes over the memory bandwidth kernels reach. */
  OK(fakegpu_cuda_record_kernel(stream, 0, 0.0, us * 3.35e6, 16, &cost_ns));
  OK(cudaSetDevice(0));
  return cost_ns / 1e3;
}

static void expect_near(const char* what, double got, double want) {
  EXPECT(got > 0.99 * want && got < 1.01 * want, "%s: %.3f us, want %.3f us", what, got, want);
  printf("%s: %.3f us (want %.3f)\n", what, got, want);
}

int main(void) {
  OK(ncclCommInitAll(comm_a, NRANKS, NULL));
  OK(ncclCommInitAll(comm_b, NRANKS, NULL));
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    OK(cudaStreamCreateWithFlags(&first[r], cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&second[r], cudaStreamNonBlocking));
    OK(cudaMalloc((void**)&send[r], COUNT * sizeof(float)));
    OK(cudaMalloc((void**)&recv[r], COUNT * sizeof(float)));
    OK(cudaEventCreate(&between[r]));
  }
  OK(cudaSetDevice(0));
  OK(cudaEventCreate(&start));
  OK(cudaEventCreate(&stop));

  settle();
  OK(cudaEventRecord(start, first[0]));
  allreduce(comm_a, first);
  const double t = elapsed_us(first[0]);
  EXPECT(t > 1, "one allreduce of 4 MiB took %f modeled us", t);
  printf("T: %.3f us\n", t);

  settle();
  OK(cudaEventRecord(start, first[0]));
  allreduce(comm_a, first);
  allreduce(comm_a, first);
  expect_near("1. two in a row on one stream", elapsed_us(first[0]), 2 * t);

  settle();
  OK(cudaEventRecord(start, first[0]));
  double k = 0;
  for (int r = 0; r < NRANKS; ++r) k = kernel(r, second[r], 3 * t);
  allreduce(comm_a, first);
  OK(cudaEventRecord(between[0], second[0]));
  OK(cudaStreamWaitEvent(first[0], between[0], 0));
  expect_near("2. beside a kernel on another stream", elapsed_us(first[0]), k);

  settle();
  OK(cudaEventRecord(start, first[0]));
  allreduce(comm_a, first);
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    OK(cudaEventRecord(between[r], first[r]));
    OK(cudaStreamWaitEvent(second[r], between[r], 0));
  }
  OK(cudaSetDevice(0));
  allreduce(comm_b, second);
  expect_near("3. across communicators through an event", elapsed_us(second[0]), 2 * t);

  settle();
  OK(cudaEventRecord(start, first[0]));
  allreduce(comm_a, first);
  for (int r = 0; r < NRANKS; ++r) {
    OK(cudaSetDevice(r));
    OK(cudaStreamSynchronize(first[r]));
  }
  OK(cudaSetDevice(0));
  allreduce(comm_b, second);
  expect_near("4. after a host synchronize", elapsed_us(second[0]), 2 * t);

  settle();
  OK(cudaEventRecord(start, first[0]));
  k = kernel(1, first[1], 2 * t);
  allreduce(comm_a, first);
  expect_near("5. waiting for a slower rank", elapsed_us(first[0]), k + t);

  settle();
  OK(cudaEventRecord(start, first[0]));
  OK(ncclGroupStart());
  OK(ncclSend(send[0], COUNT, ncclFloat, 1, comm_a[0], first[0]));
  OK(ncclRecv(recv[1], COUNT, ncclFloat, 0, comm_a[1], first[1]));
  OK(ncclGroupEnd());
  const double one_send = elapsed_us(first[0]);
  settle();
  OK(cudaEventRecord(start, first[0]));
  OK(ncclGroupStart());
  for (int r = 0; r < NRANKS; ++r) {
    OK(ncclSend(send[r], COUNT, ncclFloat, (r + 1) % NRANKS, comm_a[r], first[r]));
    OK(ncclRecv(recv[r], COUNT, ncclFloat, (r + NRANKS - 1) % NRANKS, comm_a[r], first[r]));
  }
  OK(ncclGroupEnd());
  const double ring = elapsed_us(first[0]);
  printf("6. a grouped ring: %.3f us (one send alone: %.3f us)\n", ring, one_send);
  EXPECT(ring >= 0.99 * one_send && ring < 1.5 * one_send, "6. a grouped ring: %.3f us, want from %.3f to %.3f us",
         ring, one_send, 1.5 * one_send);

  for (int r = 0; r < NRANKS; ++r) {
    OK(ncclCommDestroy(comm_a[r]));
    OK(ncclCommDestroy(comm_b[r]));
  }
  if (failures) return 1;
  printf("TIMELINE OK\n");
  return 0;
}
