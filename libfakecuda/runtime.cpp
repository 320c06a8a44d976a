// Fake CUDA runtime: devices, device memory and errors. Device memory is shared host memory
// (device_memory.h), so the NCCL stub and the coordinator can read and write it directly.
// Streams, events and copies are in stream_api.cpp.
#include <cstdlib>

#include "device_memory.h"
#include "runtime_state.h"

using fakegpu::cuda::DeviceMemory;
using fakegpu::cuda::fail;
using fakegpu::cuda::SegmentRef;

namespace fakegpu::cuda {

constexpr int kDefaultDeviceCount = 8;
thread_local cudaError_t t_last_error = cudaSuccess;

int device_count() {
  static const int count = [] {
    const char* v = std::getenv("FAKEGPU_DEVICE_COUNT");
    int n = v ? std::atoi(v) : 0;
    return n > 0 ? n : kDefaultDeviceCount;
  }();
  return count;
}

int& current_device() {
  thread_local int device = 0;
  return device;
}

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

}  // namespace fakegpu::cuda

using fakegpu::cuda::current_device;
using fakegpu::cuda::device_count;
using fakegpu::cuda::t_last_error;

FAKECUDA_API int fakegpu_cuda_is_fake(void) { return 1; }

FAKECUDA_API cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = device_count();
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  current_device() = device;
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (!ptr) return fail(cudaErrorInvalidValue);
  void* p = DeviceMemory::instance().allocate(size);
  if (!p) return fail(cudaErrorMemoryAllocation);
  *ptr = p;
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  return DeviceMemory::instance().release(ptr) ? cudaSuccess : fail(cudaErrorInvalidDevicePointer);
}

// For fakegpu's NCCL: whether [ptr, ptr + len) is fake device memory in a shareable segment,
// and which. Returns 1 and fills the outputs when it is.
FAKECUDA_API int fakegpu_cuda_find_segment(const void* ptr, size_t len, uint64_t* segment_id, uint64_t* offset,
                                           int* fd, uint64_t* segment_size) {
  SegmentRef ref;
  if (!ptr || !DeviceMemory::instance().find(ptr, len, &ref) || ref.fd < 0) return 0;
  *segment_id = ref.id;
  *offset = ref.offset;
  *fd = ref.fd;
  *segment_size = ref.size;
  return 1;
}

FAKECUDA_API cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

FAKECUDA_API cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

FAKECUDA_API const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    default: return "cudaErrorUnknown";
  }
}

FAKECUDA_API const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorNotSupported: return "operation not supported";
    default: return "unknown error";
  }
}

FAKECUDA_API cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = FAKEGPU_CUDART_MAJOR * 1000;
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaDriverGetVersion(int* version) { return cudaRuntimeGetVersion(version); }
