// The stub never links a CUDA runtime: it finds whichever one the program loaded (fakegpu's
// libcudart or, in hybrid mode, NVIDIA's) at run time. With none loaded it behaves as one
// device whose memory is host memory, except in hybrid mode, where that is an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "nccl.h"
#include "wire.h"

namespace fakegpu::stub {

class CudaBridge {
 public:
  int current_device() const;
  // Waits for work already queued on the stream; throws NcclError on a CUDA failure.
  void sync_stream(cudaStream_t stream) const;
  // Whether work can be queued on streams (a runtime with cudaLaunchHostFunc is loaded).
  bool can_enqueue() const { return launch_host_func_ && memcpy_async_; }
  // The legacy default stream: work on it is synchronous with the host in fakegpu.
  static bool is_legacy(cudaStream_t stream) { return stream == nullptr || stream == reinterpret_cast<cudaStream_t>(1); }
  // Queues fn on the stream, in order with the stream's other work; it is freed once it has run.
  void enqueue(cudaStream_t stream, std::function<void()> fn) const;
  // Records fn into the graph the stream is capturing, to run at each replay. The graph owns it
  // (a CUDA user object), so destroying the graph and its instances frees it; on a runtime
  // without user objects it is never freed.
  void enqueue_captured(cudaStream_t stream, std::function<void()> fn) const;
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
  // The modeled clock of the stream running this work (fakegpu's runtime only; NVIDIA's keeps
  // none): its time in us, or -1, and its track id, or 0.
  double modeled_now(uint64_t* track) const {
    *track = 0;
    return modeled_now_ ? modeled_now_(track) : -1;
  }
  // A collective that became ready at ready_us ended at end_us: the stream waits until then
  // (cudaEventElapsedTime and paced mode read its clock) and logs the slice.
  void collective_done(double ready_us, double end_us) const {
    if (collective_done_ && ready_us >= 0 && end_us > ready_us) collective_done_(ready_us, end_us);
  }
  // Moves up to `max` slices of the runtime's activity log into `out` (0 while fewer than
  // min_pending wait and none is a step mark; always 0 without fakegpu's runtime).
  size_t take_activity(wire::ActivitySlice* out, size_t max, size_t min_pending, uint64_t* dropped) const {
    return take_activity_ ? take_activity_(out, max, min_pending, dropped) : 0;
  }

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
  using GetDevice = int (*)(int*);
  using StreamSync = int (*)(cudaStream_t);
  using Memcpy = int (*)(void*, const void*, size_t, int);
  GetDevice get_device_ = nullptr;
  StreamSync stream_sync_ = nullptr;
  Memcpy memcpy_ = nullptr;
  int (*malloc_)(void**, size_t) = nullptr;
  int (*free_)(void*) = nullptr;
  int (*find_segment_)(const void*, size_t, uint64_t*, uint64_t*, int*, uint64_t*) = nullptr;
  int (*launch_host_func_)(cudaStream_t, void (*)(void*), void*) = nullptr;
  int (*memcpy_async_)(void*, const void*, size_t, int, cudaStream_t) = nullptr;
  double (*modeled_now_)(uint64_t*) = nullptr;
  void (*collective_done_)(double, double) = nullptr;
  size_t (*take_activity_)(wire::ActivitySlice*, size_t, size_t, uint64_t*) = nullptr;
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
  bool hand_to_graph(cudaStream_t stream, std::function<void()>* fn) const;
  int (*host_register_)(void*, size_t, unsigned) = nullptr;
  bool host_accessible_ = true;
};

const CudaBridge& cuda();

}  // namespace fakegpu::stub
