#include "cuda_bridge.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "errors.h"

namespace fakegpu::stub {

CudaBridge::CudaBridge() {
  get_device_ = reinterpret_cast<GetDevice>(dlsym(RTLD_DEFAULT, "cudaGetDevice"));
  stream_sync_ = reinterpret_cast<StreamSync>(dlsym(RTLD_DEFAULT, "cudaStreamSynchronize"));
  memcpy_ = reinterpret_cast<Memcpy>(dlsym(RTLD_DEFAULT, "cudaMemcpy"));
  malloc_ = reinterpret_cast<int (*)(void**, size_t)>(dlsym(RTLD_DEFAULT, "cudaMalloc"));
  free_ = reinterpret_cast<int (*)(void*)>(dlsym(RTLD_DEFAULT, "cudaFree"));
  launch_host_func_ = reinterpret_cast<decltype(launch_host_func_)>(dlsym(RTLD_DEFAULT, "cudaLaunchHostFunc"));
  memcpy_async_ = reinterpret_cast<decltype(memcpy_async_)>(dlsym(RTLD_DEFAULT, "cudaMemcpyAsync"));
  find_segment_ = reinterpret_cast<decltype(find_segment_)>(dlsym(RTLD_DEFAULT, "fakegpu_cuda_find_segment"));
  host_register_ = reinterpret_cast<decltype(host_register_)>(dlsym(RTLD_DEFAULT, "cudaHostRegister"));
  is_capturing_ = reinterpret_cast<decltype(is_capturing_)>(dlsym(RTLD_DEFAULT, "cudaStreamIsCapturing"));
  add_modeled_time_ = reinterpret_cast<decltype(add_modeled_time_)>(dlsym(RTLD_DEFAULT, "fakegpu_cuda_add_modeled_time"));
  // fakegpu's runtime announces itself; any other runtime with cudaMemcpy has real device memory.
  bool fake = dlsym(RTLD_DEFAULT, "fakegpu_cuda_is_fake") != nullptr;
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
