#include "cuda_bridge.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

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
  find(get_device_, "cudaGetDevice");
  // fakegpu's runtime waits without counting it as the program's synchronisation.
  find(stream_sync_, "fakegpu_cuda_drain_stream");
  if (!stream_sync_) find(stream_sync_, "cudaStreamSynchronize");
  find(memcpy_, "cudaMemcpy");
  find(malloc_, "cudaMalloc");
  find(free_, "cudaFree");
  find(launch_host_func_, "cudaLaunchHostFunc");
  find(memcpy_async_, "cudaMemcpyAsync");
  find(find_segment_, "fakegpu_cuda_find_segment");
  find(host_register_, "cudaHostRegister");
  find(is_capturing_, "cudaStreamIsCapturing");
  find(modeled_now_, "fakegpu_cuda_modeled_now");
  find(collective_done_, "fakegpu_cuda_collective_done");
  find(take_activity_, "fakegpu_cuda_take_activity");
  // fakegpu's runtime announces itself; any other runtime with cudaMemcpy has real device memory.
  bool fake = runtime_symbol("fakegpu_cuda_is_fake") != nullptr;
  host_accessible_ = fake || memcpy_ == nullptr;
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

void CudaBridge::sync_stream(cudaStream_t stream) const {
  if (!stream_sync_) return;
  int err = stream_sync_(stream);
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaStreamSynchronize failed with CUDA error " + std::to_string(err));
}

namespace {
void run_host_function(void* fn) {
  std::unique_ptr<std::function<void()>> owned(static_cast<std::function<void()>*>(fn));
  (*owned)();
}
void run_persistent_host_function(void* fn) { (*static_cast<std::function<void()>*>(fn))(); }
}  // namespace

bool CudaBridge::capturing(cudaStream_t stream) const {
  int status = 0;  // cudaStreamCaptureStatusNone
  if (!is_capturing_ || is_legacy(stream) || is_capturing_(stream, &status) != 0) return false;
  return status != 0;
}

void CudaBridge::enqueue(cudaStream_t stream, std::function<void()> fn, bool persistent) const {
  auto* heap = new std::function<void()>(std::move(fn));
  int err = launch_host_func_(stream, persistent ? run_persistent_host_function : run_host_function, heap);
  if (err != 0) {
    delete heap;
    throw NcclError(ncclUnhandledCudaError, "cudaLaunchHostFunc failed with CUDA error " + std::to_string(err));
  }
}

void CudaBridge::copy_async(void* dst, const void* src, size_t bytes, int kind, cudaStream_t stream) const {
  int err = memcpy_async_(dst, src, bytes, kind, stream);
  if (err != 0) throw NcclError(ncclUnhandledCudaError, "cudaMemcpyAsync of " + std::to_string(bytes) +
                                                            " bytes failed with CUDA error " + std::to_string(err));
}

bool CudaBridge::find_segment(const void* ptr, size_t len, Segment* out) const {
  return find_segment_ && find_segment_(ptr, len, &out->id, &out->offset, &out->fd, &out->size) == 1;
}

bool CudaBridge::pin(void* ptr, size_t bytes) const {
  return !host_register_ || host_register_(ptr, bytes, 0 /* cudaHostRegisterDefault */) == 0;
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
