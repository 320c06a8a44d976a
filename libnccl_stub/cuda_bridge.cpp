#include "cuda_bridge.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cuda_bridge_lookup.h"
#include "errors.h"
#include "runtime_symbol.h"

namespace fakegpu::stub {

using fakegpu::runtime_symbol;

namespace {
template <typename Fn>
void find(Fn*& fn, const char* name) {
  fn = reinterpret_cast<Fn*>(runtime_symbol(name));
}
}  // namespace

CudaBridge::CudaBridge() {
  bridge_ = find_cuda_bridge("NCCL");
  find(get_device_, "cudaGetDevice");
  find(device_properties_, "cudaGetDeviceProperties");
  find(stream_sync_, "cudaStreamSynchronize");
  find(memcpy_, "cudaMemcpy");
  find(malloc_, "cudaMalloc");
  find(free_, "cudaFree");
  find(launch_host_func_, "cudaLaunchHostFunc");
  find(memcpy_async_, "cudaMemcpyAsync");
  find(host_register_, "cudaHostRegister");
  find(is_capturing_, "cudaStreamIsCapturing");
  find_capture_info();
  find(user_object_create_, "cudaUserObjectCreate");
  find(graph_retain_user_object_, "cudaGraphRetainUserObject");
  find(host_alloc_, "cudaHostAlloc");
  find(host_device_pointer_, "cudaHostGetDevicePointer");
  if (!bridge_) find_driver_wait();
  // fakegpu's runtime has the bridge; any other runtime with cudaMemcpy has real device memory.
  host_accessible_ = bridge_ != nullptr || memcpy_ == nullptr;
}

const CudaBridge& cuda() {
  static const CudaBridge* bridge = new CudaBridge;
  return *bridge;
}

int CudaBridge::current_device() const {
  int dev = 0;
  if (get_device_ && get_device_(&dev) != 0) return 0;
  return dev;
}

std::string CudaBridge::device_name() const {
  if (!device_properties_) return "";
  // Larger than cudaDeviceProp of any CUDA version; the name leads it, NUL-terminated.
  alignas(8) char props[4096] = {};
  if (device_properties_(props, current_device()) != 0) return "";
  return std::string(props, strnlen(props, 256));
}

void CudaBridge::sync_stream(cudaStream_t stream) const {
  // fakegpu's runtime waits without counting it as the program's synchronisation.
  int err = bridge_ ? bridge_->drain_stream(stream) : stream_sync_ ? stream_sync_(stream) : 0;
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaStreamSynchronize failed with CUDA error " + std::to_string(err));
}

namespace {
// An exception must not unwind into the runtime's thread that calls host functions. The queued
// functions handle their own failures; this only keeps a stray one from ending the process.
void run_guarded(HostFunction& fn, StreamClock clock) noexcept {
  try {
    fn(clock);
  } catch (const std::exception& e) {
    warn(std::string("a host function queued on a stream failed: ") + e.what());
  } catch (...) {
    warn("a host function queued on a stream failed");
  }
}
// Queued through fakegpu's runtime, a function learns its stream's clock; through another
// runtime (cudaLaunchHostFunc) it runs without one. A persistent one outlives its run.
void run_clocked_host_function(void* fn, StreamClock clock) {
  std::unique_ptr<HostFunction> owned(static_cast<HostFunction*>(fn));
  run_guarded(*owned, clock);
}
void run_host_function(void* fn) { run_clocked_host_function(fn, nullptr); }
void run_persistent_clocked_host_function(void* fn, StreamClock clock) {
  run_guarded(*static_cast<HostFunction*>(fn), clock);
}
void run_persistent_host_function(void* fn) { run_persistent_clocked_host_function(fn, nullptr); }
void delete_host_function(void* fn) { delete static_cast<HostFunction*>(fn); }

// The two parts enqueue_started queues; `finish` runs last and frees both.
struct StartedPair {
  HostFunction start, finish;
  std::function<bool()> ready;
};
void run_start(void* pair, StreamClock clock) { run_guarded(static_cast<StartedPair*>(pair)->start, clock); }
int started_ready(void* pair) noexcept {
  try {
    return static_cast<StartedPair*>(pair)->ready() ? 1 : 0;
  } catch (...) {
    return 1;  // let finish run and report whatever is wrong
  }
}
void run_finish(void* pair, StreamClock clock) {
  std::unique_ptr<StartedPair> owned(static_cast<StartedPair*>(pair));
  run_guarded(owned->finish, clock);
}

constexpr unsigned kUserObjectNoDestructorSync = 1;  // the only flag cudaUserObjectCreate takes
constexpr unsigned kGraphUserObjectMove = 1;         // the graph takes over the caller's reference
}  // namespace

// NVIDIA's runtime loads the driver privately; the one loaded is the one to ask.
void CudaBridge::find_driver_wait() {
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD))
    driver_wait_value32_ = reinterpret_cast<decltype(driver_wait_value32_)>(dlsym(driver, "cuStreamWaitValue32_v2"));
}

void CudaBridge::find_capture_info() {
  find(capture_info_, "cudaStreamGetCaptureInfo_v3");
  if (capture_info_) return;
  // CUDA 13 gave the unversioned name the _v3 form; before 13 it has three parameters.
  int (*runtime_version)(int*) = nullptr;
  find(runtime_version, "cudaRuntimeGetVersion");
  int version = 0;
  if (runtime_version && runtime_version(&version) == 0 && version >= 13000)
    find(capture_info_, "cudaStreamGetCaptureInfo");
  else
    find(capture_info_v2_, "cudaStreamGetCaptureInfo_v2");
}

bool CudaBridge::capturing(cudaStream_t stream) const {
  int status = 0;  // cudaStreamCaptureStatusNone
  if (!is_capturing_ || is_legacy(stream) || is_capturing_(stream, &status) != 0) return false;
  return status != 0;
}

int CudaBridge::launch(cudaStream_t stream, HostFunction* fn, bool persistent) const {
  if (bridge_)
    return bridge_->launch_clocked_host_func(
        stream, persistent ? run_persistent_clocked_host_function : run_clocked_host_function, fn);
  return launch_host_func_(stream, persistent ? run_persistent_host_function : run_host_function, fn);
}

void CudaBridge::enqueue(cudaStream_t stream, HostFunction fn) const {
  auto heap = std::make_unique<HostFunction>(std::move(fn));
  int err = launch(stream, heap.get(), false);
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaLaunchHostFunc failed with CUDA error " + std::to_string(err));
  heap.release();  // run_host_function frees it
}

void CudaBridge::enqueue_started(cudaStream_t stream, HostFunction start, HostFunction finish,
                                 std::function<bool()> ready) const {
  if (!bridge_) {
    return enqueue(stream, [start = std::move(start), finish = std::move(finish)](StreamClock clock) {
      start(clock);
      finish(clock);
    });
  }
  auto pair = std::make_unique<StartedPair>(StartedPair{std::move(start), std::move(finish), std::move(ready)});
  int err = bridge_->start_clocked_host_func(stream, run_start, run_finish, pair->ready ? started_ready : nullptr,
                                             pair.get());
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaLaunchHostFunc failed with CUDA error " + std::to_string(err));
  pair.release();  // run_finish frees it
}

void* CudaBridge::capture_graph(cudaStream_t stream) const {
  int status = 0;
  unsigned long long id = 0;
  void* graph = nullptr;
  int err = capture_info_      ? capture_info_(stream, &status, &id, &graph, nullptr, nullptr, nullptr)
            : capture_info_v2_ ? capture_info_v2_(stream, &status, &id, &graph, nullptr, nullptr)
                               : -1;
  return err == 0 ? graph : nullptr;
}

// Makes fn a user object of the capture's graph. On failure it stays the caller's.
bool CudaBridge::hand_to_graph(cudaStream_t stream, HostFunction* fn) const {
  void* graph = capture_graph(stream);
  if (!graph || !user_object_create_ || !graph_retain_user_object_) return false;
  void* object = nullptr;
  if (user_object_create_(&object, fn, delete_host_function, 1, kUserObjectNoDestructorSync) != 0) return false;
  if (graph_retain_user_object_(graph, object, 1, kGraphUserObjectMove) == 0) return true;
  // The object is left unreleased, so it never deletes fn, which the caller still owns.
  return false;
}

void CudaBridge::enqueue_captured(cudaStream_t stream, HostFunction fn) const {
  auto heap = std::make_unique<HostFunction>(std::move(fn));
  const bool graph_owned = hand_to_graph(stream, heap.get());
  int err = launch(stream, heap.get(), true);
  // A function the graph owns is the graph's to free, recorded or not. One it does not own, once
  // recorded, must outlive every replay: having no way to know the last, it is never freed.
  if (graph_owned || err == 0) heap.release();
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaLaunchHostFunc failed with CUDA error " + std::to_string(err));
}

void CudaBridge::copy_async(void* dst, const void* src, size_t bytes, int kind, cudaStream_t stream) const {
  int err = memcpy_async_(dst, src, bytes, kind, stream);
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaMemcpyAsync of " + std::to_string(bytes) +
                                                            " bytes failed with CUDA error " + std::to_string(err));
}

bool CudaBridge::find_segment(const void* ptr, size_t len, Segment* out) const {
  return bridge_ && bridge_->find_segment(ptr, len, &out->id, &out->offset, &out->fd, &out->size) == 1;
}

double CudaBridge::modeled_now(StreamClock clock, uint64_t* track) const {
  *track = 0;
  return bridge_ && clock ? bridge_->modeled_now(clock, track) : -1;
}

void CudaBridge::collective_done(StreamClock clock, double ready_us, double end_us) const {
  if (bridge_ && clock && ready_us >= 0 && end_us > ready_us) bridge_->collective_done(clock, ready_us, end_us);
}

size_t CudaBridge::take_activity(wire::ActivitySlice* out, size_t max, size_t min_pending, uint64_t* dropped) const {
  return bridge_ ? bridge_->take_activity(bridge_slices(out), max, min_pending, dropped) : 0;
}

std::vector<fakegpu_op_total> CudaBridge::operator_totals(size_t max) const {
  if (!bridge_) return {};
  std::vector<fakegpu_op_total> rows(max);
  rows.resize(std::min(max, bridge_->operator_totals(rows.data(), max)));
  return rows;
}

CudaBridge::Charge CudaBridge::charge_memory(int device, int part, int64_t bytes) const {
  if (!bridge_) return Charge::kNotCounted;
  constexpr int kMemoryAllocation = 2;  // cudaErrorMemoryAllocation
  const int err = bridge_->charge_memory(device, part, bytes);
  return err == 0 ? Charge::kDone : err == kMemoryAllocation ? Charge::kNoRoom : Charge::kNotCounted;
}

std::vector<fakegpu_memory_figures> CudaBridge::memory_figures() const {
  if (!bridge_) return {};
  std::vector<fakegpu_memory_figures> out(8);
  size_t n = bridge_->memory_figures(out.data(), out.size());
  if (n > out.size()) {
    out.resize(n);
    n = bridge_->memory_figures(out.data(), out.size());
  }
  out.resize(std::min(n, out.size()));
  return out;
}

std::vector<fakegpu_memory_sample> CudaBridge::memory_samples(int device, size_t max) const {
  if (!bridge_) return {};
  std::vector<fakegpu_memory_sample> out(max);
  out.resize(bridge_->memory_samples(device, out.data(), max));
  return out;
}

bool CudaBridge::pin(void* ptr, size_t bytes) const {
  return !host_register_ || host_register_(ptr, bytes, 0 /* cudaHostRegisterDefault */) == 0;
}

uint32_t* CudaBridge::allocate_flags(size_t count, uint64_t* device) const {
  constexpr unsigned kPortableMapped = 0x01 | 0x02;  // cudaHostAllocPortable | cudaHostAllocMapped
  if (!host_alloc_ || !host_device_pointer_ || !(bridge_ || driver_wait_value32_)) return nullptr;
  void* host = nullptr;
  void* on_device = nullptr;
  if (host_alloc_(&host, count * sizeof(uint32_t), kPortableMapped) != 0) return nullptr;
  if (host_device_pointer_(&on_device, host, 0) != 0) return nullptr;  // kept: a few bytes, once
  std::memset(host, 0, count * sizeof(uint32_t));
  *device = reinterpret_cast<uint64_t>(on_device);
  return static_cast<uint32_t*>(host);
}

void CudaBridge::wait_on_flag(cudaStream_t stream, const uint32_t* host, uint64_t device, uint32_t value) const {
  constexpr unsigned kWaitGeq = 0;  // CU_STREAM_WAIT_VALUE_GEQ
  const int err = bridge_ ? bridge_->stream_wait_value32(stream, host, value)
                          : driver_wait_value32_(stream, device, value, kWaitGeq);
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cuStreamWaitValue32 failed with CUDA error " + std::to_string(err));
}

void* CudaBridge::allocate(size_t bytes) const {
  void* p = nullptr;
  if (malloc_) {
    int err = malloc_(&p, bytes);
    if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaMalloc of " + std::to_string(bytes) + " bytes failed with CUDA error " + std::to_string(err));
  } else if (posix_memalign(&p, 4096, bytes ? bytes : 1) != 0) {
    throw NcclError(ncclSystemError, "cannot allocate " + std::to_string(bytes) + " bytes");
  }
  return p;
}

void CudaBridge::release(void* ptr) const {
  if (!malloc_) return std::free(ptr);
  int err = free_ ? free_(ptr) : 0;
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaFree failed with CUDA error " + std::to_string(err));
}

void CudaBridge::copy(void* dst, const void* src, size_t bytes, int kind) const {
  if (host_accessible_) {
    std::memcpy(dst, src, bytes);
    return;
  }
  int err = memcpy_(dst, src, bytes, kind);
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaMemcpy of " + std::to_string(bytes) +
                                                            " bytes failed with CUDA error " + std::to_string(err));
}

}  // namespace fakegpu::stub
