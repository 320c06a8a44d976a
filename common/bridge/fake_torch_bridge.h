/* The interface fakegpu's CUDA runtime offers its PyTorch hook (fakegpu/torch_hook): one
 * exported function, fakegpu_torch_bridge, hands out a table of typed function pointers, which
 * the hook mirrors with ctypes (bridge.py) and calls through; nothing else is looked up
 * by name. Versioning as for the runtime's bridge to fakegpu's libraries (fake_cuda_bridge.h): the
 * caller asks for the version it was written against, and only that version is answered; a new
 * field goes at the end with a new version, in this header, compute_time.cpp's table and the hook.
 *
 * Streams are cudaStream_t values and errors cudaError_t values, spelled void* and int. */
#ifndef FAKEGPU_FAKE_TORCH_BRIDGE_H
#define FAKEGPU_FAKE_TORCH_BRIDGE_H

#include <stdint.h>

#include "op_facts.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 4: fakegpu_op_cost's workspace; 5: capture, host functions, flush; 6: describe_group;
 * 7: op_facts' dims for elementwise loops that cannot vectorize and for matrices' layouts;
 * 8: record_measured_op; 9: fakegpu_op_total's measured_us */
#define FAKEGPU_TORCH_BRIDGE_VERSION 9u

/* Host work outside any one operator (host_event). */
enum fakegpu_host_event {
  FAKEGPU_HOST_BACKWARD_CALL = 0, /* a backward pass starts; count unused */
  FAKEGPU_HOST_MODULE_CALL = 1,   /* count: nn.Module calls */
  FAKEGPU_HOST_OPTIMIZER_STEP = 2 /* count: parameters the step updates times the entries of state
                                      each keeps */
};

typedef struct fakegpu_torch_bridge_table {
  uint32_t version; /* FAKEGPU_TORCH_BRIDGE_VERSION of the runtime that filled it */
  uint32_t size;    /* sizeof(fakegpu_torch_bridge_table) as that runtime was built */

  /* Waits for the work queued on the stream, leaving the host's modeled clock where it was: the
   * program itself did not wait. */
  int (*drain_stream)(void* stream);
  /* Prices one operator with the kernel model on the current device: the host's modeled clock
   * advances by its launch time, then its kernels' time is queued on the stream. `name` (when not
   * NULL) counts it in the rank's table of operators; `cost` (when not NULL) gets the price. */
  int (*record_op)(void* stream, const char* name, const fakegpu_op_facts* op, fakegpu_op_cost* cost);
  /* Advances the host's modeled clock by what a fakegpu_host_event costs. */
  int (*host_event)(int event, int64_t count);
  /* The share of its rate a matrix product of this math and row alignment keeps on the current
   * device, so that the hook can say when a product is slowed. */
  int (*matmul_share)(int math, int row_alignment, double* share);
  /* Marks a training step's beginning (begin != 0) or end on the stream, for the report. */
  int (*mark_step)(void* stream, int begin);

  /* ---- added in version 2 ---- */
  /* PyTorch's own peaks on the device (torch.cuda.max_memory_allocated and
   * max_memory_reserved), for the report beside what the runtime counted. */
  int (*torch_memory)(int device, uint64_t peak_allocated, uint64_t peak_reserved);
  /* PyTorch raised torch.cuda.OutOfMemoryError for `bytes` on the device; `largest` holds the
   * sizes of its allocator's largest live blocks then (up to FAKEGPU_MEMORY_LARGEST_BLOCKS of
   * `count`). */
  int (*torch_out_of_memory)(int device, uint64_t bytes, const uint64_t* largest, int count);

  /* ---- added in version 5 ---- */
  /* As cudaStreamIsCapturing: *capturing gets 1 while the stream captures a graph, else 0. */
  int (*stream_capturing)(void* stream, int* capturing);
  /* As cudaLaunchHostFunc: fn(user) runs on the stream in its order (under capture, as a node of
   * the graph, at every replay). */
  int (*launch_host_func)(void* stream, void (*fn)(void* user), void* user);
  /* *linked gets 1 when fakegpu's NCCL library is loaded, which sends the runtime's figures to
   * the coordinator; 0 otherwise (then flush_to_coordinator sends nothing). */
  int (*coordinator_linked)(int* linked);
  /* Sends what the runtime logged so far (activity, operator totals, memory) to the coordinator
   * through fakegpu's NCCL library, connecting first if the process has not. */
  int (*flush_to_coordinator)(void);
  /* ---- added in version 6 ---- */
  /* Names a process group the program made (its name and the global ranks it holds) to the
   * coordinator through fakegpu's NCCL library, for representative runs. cudaErrorNotSupported
   * when that library is not loaded, cudaErrorUnknown when the message could not be sent. */
  int (*describe_group)(const char* name, int nranks, const int32_t* ranks);
  /* ---- added in version 8 ---- */
  /* As record_op, for an operator whose kernels took `measured_us` on a real GPU of the profile
   * named `measured_on` (fgpu --measure-kernels): its kernels take that time scaled by the ratio of
   * the kernel model's times for the current device and for that GPU (measured_on NULL or the
   * current device's own profile: as measured). The host's part is the model's, as for record_op.
   * cudaErrorInvalidValue for a profile fakegpu does not know. */
  int (*record_measured_op)(void* stream, const char* name, const fakegpu_op_facts* op, double measured_us,
                            const char* measured_on, fakegpu_op_cost* cost);
} fakegpu_torch_bridge_table;

const fakegpu_torch_bridge_table* fakegpu_torch_bridge(unsigned version);

#ifdef __cplusplus
}
#endif

#endif /* FAKEGPU_FAKE_TORCH_BRIDGE_H */
