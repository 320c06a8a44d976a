// Minimal fake CUDA runtime: devices, memory, copies and streams on the host. Device memory
// is ordinary host memory, so the NCCL stub can read and write it directly. Work on streams
// runs synchronously for now; the full stream-ordered runtime replaces this.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include "device_memory.h"

#define FAKECUDA_API extern "C" __attribute__((visibility("default")))

namespace {

using fakegpu::cuda::DeviceMemory;
using fakegpu::cuda::SegmentRef;

constexpr int kDefaultDeviceCount = 8;

struct State {
  std::mutex mu;
  std::set<cudaStream_t> streams;
};
State& state() {
  static State* s = new State;  // never destroyed: CUDA calls may come from static destructors
  return *s;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

int device_count() {
  static const int count = [] {
    const char* v = std::getenv("FAKEGPU_DEVICE_COUNT");
    int n = v ? std::atoi(v) : 0;
    return n > 0 ? n : kDefaultDeviceCount;
  }();
  return count;
}

// Records an error for cudaGetLastError, as the real runtime does, and returns it.
cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

bool valid_stream(cudaStream_t s) {
  if (s == nullptr) return true;  // the legacy default stream
  std::lock_guard<std::mutex> lock(state().mu);
  return state().streams.count(s) != 0;
}

}  // namespace

FAKECUDA_API int fakegpu_cuda_is_fake(void) { return 1; }

FAKECUDA_API cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail(cudaErrorInvalidValue);
  *count = device_count();
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= device_count()) return fail(cudaErrorInvalidDevice);
  t_device = device;
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = t_device;
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

FAKECUDA_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
  if (count && (!dst || !src)) return fail(cudaErrorInvalidValue);
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return cudaMemcpy(dst, src, count, kind);
}

FAKECUDA_API cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  if (count && !ptr) return fail(cudaErrorInvalidValue);
  if (count) std::memset(ptr, value, count);
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  if (!valid_stream(stream)) return fail(cudaErrorInvalidResourceHandle);
  return cudaMemset(ptr, value, count);
}

FAKECUDA_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int /*flags*/) {
  if (!stream) return fail(cudaErrorInvalidValue);
  // A distinct non-null handle per stream; it is only ever compared, never dereferenced.
  auto* handle = reinterpret_cast<cudaStream_t>(new char);
  std::lock_guard<std::mutex> lock(state().mu);
  state().streams.insert(handle);
  *stream = handle;
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

FAKECUDA_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(state().mu);
  if (!stream || state().streams.erase(stream) == 0) return fail(cudaErrorInvalidResourceHandle);
  delete reinterpret_cast<char*>(stream);
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return valid_stream(stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

FAKECUDA_API cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return valid_stream(stream) ? cudaSuccess : fail(cudaErrorInvalidResourceHandle);
}

FAKECUDA_API cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

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
