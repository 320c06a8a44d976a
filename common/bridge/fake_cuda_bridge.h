/* The private interface of fakegpu's CUDA runtime (libcudart), for fakegpu's other libraries:
 * the NCCL stub, the driver (libcuda) and cuBLAS. The runtime exports one function,
 * fakegpu_cuda_bridge, which hands out a table of typed function pointers; everything else in
 * it is found through that table, never by name. NVIDIA's runtime has no such function, so
 * finding the table also tells a library whose runtime it runs over. (Public CUDA calls such as
 * cudaMemcpy are still found by name: NVIDIA's runtime answers them too.)
 *
 * Versioning: a caller asks for FAKEGPU_CUDA_BRIDGE_VERSION, the version it was built with. The
 * runtime answers only its own version, with a table whose `version` and `size` say which
 * layout it filled; anything else is refused (find_cuda_bridge in cuda_bridge_lookup.h).
 * Adding a function: append a field at the end, bump the version, fill it in
 * libfakecuda/runtime/bridge.cpp.
 *
 * Plain C, so that C test programs can use it too. Streams are cudaStream_t values and error
 * codes cudaError_t values; they are spelled void* and int here so that this header needs no
 * CUDA header. */
#ifndef FAKEGPU_FAKE_CUDA_BRIDGE_H
#define FAKEGPU_FAKE_CUDA_BRIDGE_H

#include <stddef.h>
#include <stdint.h>

#include "op_facts.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FAKEGPU_CUDA_BRIDGE_VERSION 8u

/* A stream's modeled clock, opaque to callers: the time the work queued on the stream would
 * have taken on the modeled GPU. */
typedef struct fakegpu_stream_clock fakegpu_stream_clock;

/* One entry of the runtime's activity log: what a stream did on the modeled clock. Laid out as
 * fakegpu::wire::ActivitySlice (cuda_bridge_lookup.h checks that at compile time). */
typedef struct fakegpu_activity_slice {
  uint64_t track;    /* the stream */
  double start_us;
  double end_us;     /* a step mark has end_us == start_us */
  uint32_t count;    /* pieces of work merged into this slice */
  uint8_t kind;      /* a wire::ActivityKind */
} fakegpu_activity_slice;

/* A host function that learns which clock it runs against: the clock of the stream that runs
 * it (for a graph replay, the stream the graph was launched on). */
typedef void (*fakegpu_clocked_host_fn)(void* user, fakegpu_stream_clock* clock);

/* The parts of a device's memory that the runtime counts (cudaMemGetInfo, NVML and
 * torch.cuda.mem_get_info report their sum as in use). */
enum fakegpu_memory_part {
  FAKEGPU_MEMORY_CONTEXT = 0,   /* the CUDA context and the kernels loaded into it */
  FAKEGPU_MEMORY_PROGRAM = 1,   /* cudaMalloc and friends: PyTorch's caching allocator in a PyTorch job */
  FAKEGPU_MEMORY_NCCL = 2,      /* communicators' buffers, by NCCL's rules */
  FAKEGPU_MEMORY_LIBRARIES = 3, /* what cuBLAS and other libraries keep for themselves */
  FAKEGPU_MEMORY_PART_COUNT = 4
};

/* Libraries whose kernels load into the CUDA context as a program first uses them. */
enum fakegpu_library {
  FAKEGPU_LIBRARY_PYTORCH = 0,
  FAKEGPU_LIBRARY_CUBLAS = 1,
  FAKEGPU_LIBRARY_NCCL = 2,
  FAKEGPU_LIBRARY_PYTORCH_TRAINING = 3,  /* PyTorch's backward and optimizer kernels */
  FAKEGPU_LIBRARY_COUNT = 4
};

/* The largest live blocks of PyTorch's allocator kept with an out-of-memory error. */
#define FAKEGPU_MEMORY_LARGEST_BLOCKS 8

/* One device's memory over the process's run, as the runtime counted it. Times are the host's
 * modeled clock, in us; a step is the training step under way, from 1 (one more than the steps
 * marked ended before). */
typedef struct fakegpu_memory_figures {
  int32_t device;
  int32_t peak_step;
  uint64_t capacity;
  uint64_t in_use[FAKEGPU_MEMORY_PART_COUNT]; /* now */
  uint64_t peak;                              /* the most in use at once */
  uint64_t peak_parts[FAKEGPU_MEMORY_PART_COUNT];
  double peak_us;
  /* The last allocation refused for want of memory (failures == 0: none was). */
  uint64_t failures;
  uint64_t failed_bytes;
  uint64_t failed_parts[FAKEGPU_MEMORY_PART_COUNT]; /* in use when it was refused */
  double failed_us;
  int32_t failed_step;
  int32_t failed_part; /* the fakegpu_memory_part that asked */
  /* PyTorch's own figures, as its hook last gave them (all 0 without PyTorch). */
  uint64_t torch_peak_allocated;
  uint64_t torch_peak_reserved;
  /* Set when PyTorch raised torch.cuda.OutOfMemoryError: its request, and the largest blocks
   * its allocator had live then, largest first (0 where there were fewer). */
  uint64_t torch_oom_bytes;
  uint64_t torch_oom_largest[FAKEGPU_MEMORY_LARGEST_BLOCKS];
} fakegpu_memory_figures;

/* A point of a device's memory in use over time, for the trace's counter. */
typedef struct fakegpu_memory_sample {
  double us;
  uint64_t bytes;
} fakegpu_memory_sample;

typedef struct fakegpu_cuda_bridge_table {
  /* FAKEGPU_CUDA_BRIDGE_VERSION of the runtime that filled the table. */
  uint32_t version;
  /* sizeof(fakegpu_cuda_bridge_table) as that runtime was built: a table whose fields were
   * changed without a new version number shows here. */
  uint32_t size;

  /* ---- streams and modeled time ---- */
  /* Waits for the work queued on the stream without counting as the program's
   * synchronisation: the host's modeled time stays where it was. */
  int (*drain_stream)(void* stream);
  /* As cudaLaunchHostFunc, but fn also receives the clock of the stream that runs it. */
  int (*launch_clocked_host_func)(void* stream, fakegpu_clocked_host_fn fn, void* user);
  /* The clock of the current device's legacy default stream, for work the caller runs itself
   * in the legacy stream's place. */
  fakegpu_stream_clock* (*legacy_stream_clock)(void);
  /* The clock's time in microseconds; *track (when not NULL) gets the stream's track id, which
   * names the stream in the activity log. */
  double (*modeled_now)(fakegpu_stream_clock* clock, uint64_t* track);
  /* A collective that became ready at ready_us ended at end_us: the clock waits until then, and
   * the activity log gets the slice from ready_us to end_us. */
  void (*collective_done)(fakegpu_stream_clock* clock, double ready_us, double end_us);
  /* Moves up to `max` slices of the activity log, oldest first, into `out`. Returns 0 while
   * fewer than min_pending wait and none is a step mark. *dropped (when not NULL) gets the
   * slices lost since the last call. */
  size_t (*take_activity)(fakegpu_activity_slice* out, size_t max, size_t min_pending, uint64_t* dropped);

  /* ---- memory ---- */
  /* Whether [ptr, ptr + len) is fake device memory in a shareable segment; returns 1 and fills
   * the segment's id, the offset of ptr in it, its file descriptor and its size when it is. */
  int (*find_segment)(const void* ptr, size_t len, uint64_t* segment_id, uint64_t* offset, int* fd,
                      uint64_t* segment_size);
  /* The live allocation holding ptr: returns 1 and fills its start, size, kind (0 device,
   * 1 host, 2 managed) and device when there is one. */
  int (*allocation_of)(const void* ptr, void** base, size_t* bytes, int* kind, int* device);

  /* ---- devices ---- */
  /* The device's name, UUID and memory size, as cudaGetDeviceProperties reports them. */
  int (*device_identity)(int device, char name[256], unsigned char uuid[16], uint64_t* memory_bytes);
  /* 1 when the device's primary context is active (the program has used the device). */
  int (*primary_context_active)(int device);
  /* Kernel launches the runtime has run so far, for tests. */
  uint64_t (*kernel_launches)(void);

  /* ---- streams, added in version 3 ---- */
  /* Work in two parts, such as a collective that is posted, then waited for: on a created or
   * per-thread stream with nothing queued or running, start runs before this returns, on the
   * calling thread, and finish becomes the stream's next work, parked: the stream's worker is
   * not woken for it. A thread that synchronises with the stream runs it, and so does one that
   * queries the stream once ready (when not NULL) returns nonzero: finish would not wait. The
   * worker runs it once more work is queued or kick_streams is called. Otherwise both are queued
   * as one. Either way they run in the stream's order and on its clock; user is passed to all
   * three, start first and finish last. */
  int (*start_clocked_host_func)(void* stream, fakegpu_clocked_host_fn start, fakegpu_clocked_host_fn finish,
                                 int (*ready)(void* user), void* user);
  /* Hands work parked on any stream to the streams' workers, for a caller that waits for it
   * some other way than by synchronising with its stream. */
  void (*kick_streams)(void);
  /* Looks at every stream as cudaStreamQuery does: parked work whose ready probe holds runs on
   * the calling thread, for a caller that polls something that work reports (a communicator's
   * asynchronous error). */
  void (*poll_streams)(void);

  /* ---- virtual memory, added in version 4: the driver's cuMemAddressReserve family ---- */
  /* A range of `bytes` (a multiple of vmm_granularity) for mappings; NULL when refused. */
  void* (*vmm_reserve)(size_t bytes);
  /* Frees a range with nothing mapped in it. */
  int (*vmm_free)(void* base);
  /* A handle to `bytes` of the device's memory, counted against it (cudaErrorMemoryAllocation
   * when the device is full). */
  int (*vmm_create)(size_t bytes, int device, uint64_t* handle);
  int (*vmm_release)(uint64_t handle);
  /* Maps a whole handle at `at`, inside a range, where nothing is mapped; unmapping drops the
   * contents. */
  int (*vmm_map)(void* at, size_t bytes, uint64_t handle);
  int (*vmm_unmap)(void* at, size_t bytes);
  size_t (*vmm_granularity)(void);
  /* Bytes of the device's memory allocated so far (what cudaMemGetInfo counts as not free),
   * without making it current. */
  uint64_t (*device_memory_used)(int device);

  /* ---- the PyTorch hook's operators, added in version 5 ---- */
  /* Copies up to `max` per-operator totals of this process so far (fake_torch_bridge.h's
   * record_op), largest GPU time first, into `out` (room for `max`); returns how many there are
   * in all. */
  size_t (*operator_totals)(fakegpu_op_total* out, size_t max);

  /* ---- device memory by part, added in version 6 ---- */
  /* Counts `bytes` of the device's memory against `part` (a fakegpu_memory_part) without an
   * allocation behind it, for memory the program never sees (a communicator's buffers);
   * negative bytes give it back. cudaErrorMemoryAllocation when the device is full. */
  int (*charge_memory)(int device, int part, int64_t bytes);
  /* Copies the figures of up to `max` devices the process has used into `out`; returns how
   * many there are. */
  size_t (*memory_figures)(fakegpu_memory_figures* out, size_t max);
  /* Copies up to `max` points of the device's memory in use over time, oldest first; returns
   * how many were copied. */
  size_t (*memory_samples)(int device, fakegpu_memory_sample* out, size_t max);
  /* A fakegpu_library is first used on the device: its kernels join the context (once per
   * device and library; later calls do nothing). */
  int (*load_library)(int device, int library);

  /* ---- streams waiting on host memory, added in version 7 ---- */
  /* As the driver's cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_GEQ: the stream's later work
   * waits until (int32_t)(*flag - value) >= 0, where another thread raises *flag. It is stream
   * work, not a host function: it holds up no other stream. */
  int (*stream_wait_value32)(void* stream, const uint32_t* flag, uint32_t value);
} fakegpu_cuda_bridge_table;

/* The one exported entry point: the table for `version`, or NULL when the runtime is of another
 * version. */
const fakegpu_cuda_bridge_table* fakegpu_cuda_bridge(unsigned version);
typedef const fakegpu_cuda_bridge_table* (*fakegpu_cuda_bridge_fn)(unsigned version);

#ifdef __cplusplus
}
#endif

#endif /* FAKEGPU_FAKE_CUDA_BRIDGE_H */
