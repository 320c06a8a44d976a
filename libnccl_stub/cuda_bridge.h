// The stub never links a CUDA runtime: it finds whichever one the program loaded (fakegpu's
// libcudart or, in hybrid mode, NVIDIA's) at run time. With none loaded it behaves as one
// device whose memory is host memory, except in hybrid mode, where that is an error. Public
// CUDA calls are found by name; fakegpu's private ones come from its runtime's bridge table
// (fake_cuda_bridge.h), which NVIDIA's runtime does not have.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fake_cuda_bridge.h"
#include "nccl.h"
#include "wire.h"

namespace fakegpu::stub {

// The modeled clock of the stream a queued function runs on, as fakegpu's runtime hands it to
// the function; nullptr over any other runtime, which keeps no modeled time.
using StreamClock = fakegpu_stream_clock*;
// What the stub queues on a stream: it learns the clock it runs against.
using HostFunction = std::function<void(StreamClock)>;

class CudaBridge {
 public:
  int current_device() const;
  // The name of the GPU under the current device, as the program's runtime reports it ("" when
  // it cannot say): in hybrid mode, the GPU the rank computes on.
  std::string device_name() const;
  // Waits for work already queued on the stream; throws NcclError on a CUDA failure.
  void sync_stream(cudaStream_t stream) const;
  // Whether work can be queued on streams (a runtime with cudaLaunchHostFunc is loaded).
  bool can_enqueue() const { return launch_host_func_ && memcpy_async_; }
  // The legacy default stream: work on it is synchronous with the host in fakegpu.
  static bool is_legacy(cudaStream_t stream) { return stream == nullptr || stream == reinterpret_cast<cudaStream_t>(1); }
  // Queues fn on the stream, in order with the stream's other work; it is freed once it has run.
  void enqueue(cudaStream_t stream, HostFunction fn) const;
  // Queues `start` then `finish` on the stream as one piece of work. With fakegpu's runtime, on
  // a stream with nothing queued or running, `start` runs before this returns, from the calling
  // thread, and `finish` waits at the stream's head for whoever needs the stream first (see
  // start_clocked_host_func); `ready` says whether `finish` would run without waiting. All
  // three are freed once `finish` has run.
  void enqueue_started(cudaStream_t stream, HostFunction start, HostFunction finish, std::function<bool()> ready) const;
  // Hands work that enqueue_started left parked on streams to the streams' workers: for a
  // caller about to wait for that work without synchronising with its stream.
  void kick_streams() const {
    if (bridge_) bridge_->kick_streams();
  }
  // Runs, on the calling thread, work that enqueue_started left parked and that would not wait:
  // for a caller that polls what that work reports, such as a communicator's asynchronous error.
  void poll_streams() const {
    if (bridge_) bridge_->poll_streams();
  }
  // Records fn into the graph the stream is capturing, to run at each replay. The graph owns it
  // (a CUDA user object), so destroying the graph and its instances frees it; on a runtime
  // without user objects it is never freed.
  void enqueue_captured(cudaStream_t stream, HostFunction fn) const;
  // Whether the stream is capturing a CUDA graph.
  bool capturing(cudaStream_t stream) const;
  void copy_to_host_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) const {
    copy_async(dst, src, bytes, kDeviceToHost, stream);
  }
  void copy_to_device_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) const {
    copy_async(dst, src, bytes, kHostToDevice, stream);
  }
  // True when device pointers are plain host memory (fakegpu's runtime, or none at all).
  bool host_accessible() const { return host_accessible_; }
  // Whether a CUDA runtime (NVIDIA's or fakegpu's) is loaded where the stub can call it.
  bool has_runtime() const { return memcpy_ != nullptr; }
  // Where fake device memory lives: true when [ptr, ptr + len) is in a shareable segment.
  struct Segment {
    uint64_t id = 0, offset = 0, size = 0;
    int fd = -1;
  };
  bool find_segment(const void* ptr, size_t len, Segment* out) const;
  // Page-locks host memory the runtime did not allocate (cudaHostRegister), so copies to and
  // from it can be asynchronous. False when the runtime refuses; true when there is none.
  bool pin(void* ptr, size_t bytes) const;
  // The clock of the current device's legacy stream, for calls run from the calling thread in
  // its place; nullptr without fakegpu's runtime.
  StreamClock legacy_clock() const { return bridge_ ? bridge_->legacy_stream_clock() : nullptr; }
  // The clock's time in us, or -1 without one, and its track id, or 0.
  double modeled_now(StreamClock clock, uint64_t* track) const;
  // A collective that became ready at ready_us ended at end_us on the clock's stream: the
  // stream waits until then (cudaEventElapsedTime and paced mode read its clock) and logs the
  // slice. Nothing without a clock.
  void collective_done(StreamClock clock, double ready_us, double end_us) const;
  // Moves up to `max` slices of the runtime's activity log into `out` (0 while fewer than
  // min_pending wait and none is a step mark; always 0 without fakegpu's runtime).
  size_t take_activity(wire::ActivitySlice* out, size_t max, size_t min_pending, uint64_t* dropped) const;
  // The PyTorch hook's per-operator totals so far, largest GPU time first, at most `max`
  // (none without fakegpu's runtime).
  std::vector<fakegpu_op_total> operator_totals(size_t max) const;
  // Counts bytes of the device's memory against a fakegpu_memory_part (negative: gives them
  // back). kNotCounted without fakegpu's runtime, or for a device it does not have (hybrid
  // mode's shared GPUs, where the real memory is the real GPU's).
  enum class Charge { kDone, kNoRoom, kNotCounted };
  Charge charge_memory(int device, int part, int64_t bytes) const;
  // A fakegpu_library's kernels join the device's context (once; nothing without fakegpu's runtime).
  void load_library(int device, int library) const {
    if (bridge_) bridge_->load_library(device, library);
  }
  // The runtime's memory figures per device, and one device's series (none without it).
  std::vector<fakegpu_memory_figures> memory_figures() const;
  std::vector<fakegpu_memory_sample> memory_samples(int device, size_t max) const;

  // Flags a stream can wait on (see flag_wait.h): page-locked host memory the GPU reads, with
  // in *device the address it reads it at. nullptr where the runtime cannot give such memory
  // or streams cannot wait on it (NVIDIA's runtime over a driver without cuStreamWaitValue32).
  uint32_t* allocate_flags(size_t count, uint64_t* device) const;
  // Queues on the stream a wait until (int32_t)(flag - value) >= 0, the flag given by both its
  // addresses (allocate_flags). The wait is the stream's, not a host function's.
  void wait_on_flag(cudaStream_t stream, const uint32_t* host, uint64_t device, uint32_t value) const;

  // Device memory through the loaded runtime; host memory when there is none.
  void* allocate(size_t bytes) const;
  void release(void* ptr) const;
  void copy_to_host(void* dst, const void* src, size_t bytes) const { copy(dst, src, bytes, kDeviceToHost); }
  void copy_to_device(void* dst, const void* src, size_t bytes) const { copy(dst, src, bytes, kHostToDevice); }

 private:
  friend const CudaBridge& cuda();
  CudaBridge();
  static constexpr int kHostToDevice = 1;  // cudaMemcpyKind values
  static constexpr int kDeviceToHost = 2;
  void copy(void* dst, const void* src, size_t bytes, int kind) const;
  void copy_async(void* dst, const void* src, size_t bytes, int kind, cudaStream_t stream) const;
  void find_capture_info();
  void find_driver_wait();
  // Queues fn (owned by the caller) on the stream; `persistent` when it must survive its run,
  // to run again at each replay of a graph. Returns the CUDA error.
  int launch(cudaStream_t stream, HostFunction* fn, bool persistent) const;
  const fakegpu_cuda_bridge_table* bridge_ = nullptr;  // fakegpu's runtime only
  using GetDevice = int (*)(int*);
  using StreamSync = int (*)(cudaStream_t);
  using Memcpy = int (*)(void*, const void*, size_t, int);
  GetDevice get_device_ = nullptr;
  // cudaGetDeviceProperties, of each version's layout (CUDA 12 keeps 11's under this name): only
  // the name, the first field of every one, is read.
  int (*device_properties_)(void*, int) = nullptr;
  StreamSync stream_sync_ = nullptr;
  Memcpy memcpy_ = nullptr;
  int (*malloc_)(void**, size_t) = nullptr;
  int (*free_)(void*) = nullptr;
  int (*launch_host_func_)(cudaStream_t, void (*)(void*), void*) = nullptr;
  int (*memcpy_async_)(void*, const void*, size_t, int, cudaStream_t) = nullptr;
  int (*host_alloc_)(void**, size_t, unsigned) = nullptr;
  int (*host_device_pointer_)(void**, void*, unsigned) = nullptr;
  // NVIDIA's driver's cuStreamWaitValue32_v2 (stream, device address, value, flags).
  int (*driver_wait_value32_)(cudaStream_t, unsigned long long, uint32_t, unsigned) = nullptr;
  int (*is_capturing_)(cudaStream_t, int*) = nullptr;
  // The graph a stream captures into: cudaStreamGetCaptureInfo_v3 (or CUDA 13's unversioned
  // name, which has its form), else the older _v2 form. Graphs and user objects are opaque here.
  using CaptureInfo = int (*)(cudaStream_t, int*, unsigned long long*, void**, const void**, const void**, size_t*);
  using CaptureInfoV2 = int (*)(cudaStream_t, int*, unsigned long long*, void**, const void**, size_t*);
  CaptureInfo capture_info_ = nullptr;
  CaptureInfoV2 capture_info_v2_ = nullptr;
  int (*user_object_create_)(void**, void*, void (*)(void*), unsigned, unsigned) = nullptr;
  int (*graph_retain_user_object_)(void*, void*, unsigned, unsigned) = nullptr;
  void* capture_graph(cudaStream_t stream) const;
  bool hand_to_graph(cudaStream_t stream, HostFunction* fn) const;
  int (*host_register_)(void*, size_t, unsigned) = nullptr;
  bool host_accessible_ = true;
};

const CudaBridge& cuda();

}  // namespace fakegpu::stub
