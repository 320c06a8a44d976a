// libfakegpu-hybrid-devices.so: in hybrid mode, where a node's ranks outnumber this machine's
// GPUs, each rank sees the node's devices (FAKEGPU_HYBRID_DEVICES of them) and device d runs on
// GPU d % (GPUs here). A program that selects its LOCAL_RANK then runs unchanged.
//
// fgpu preloads it ahead of NVIDIA's runtime, so its definitions of the calls that name a device
// come first; each maps the device and forwards to the runtime's own. A thread keeps the device
// it set, so cudaGetDevice answers what the program chose, not the GPU under it; a thread that
// set none is on device 0, as with CUDA. The driver's cuDeviceGet and cuDeviceGetCount are
// mapped too.
//
// Not for PyTorch (yet): it asks the driver about every device it counts through entry points
// it looks up itself (dlopen of libcuda.so.1), which a preloaded library cannot take over, so
// its backward pass would fail on device 1. In a process that has PyTorch's CUDA library loaded
// when the first device call comes, every device is itself, and the program selects
// LOCAL_RANK % torch.cuda.device_count() (docs/hybrid.md).
#include <dlfcn.h>

#include <atomic>

#include "cuda_runtime.h"
#include "env.h"
#include "log_once.h"

namespace {

// The next definition of `name` after this library: NVIDIA's runtime or driver, whether loaded
// with the program or, without RTLD_GLOBAL, by a Python extension (found by its soname).
void* next_symbol(const char* name, const char* const* sonames) {
  if (void* sym = dlsym(RTLD_NEXT, name)) return sym;
  for (const char* const* s = sonames; *s; ++s)
    if (void* handle = dlopen(*s, RTLD_LAZY | RTLD_NOLOAD)) {
      void* sym = dlsym(handle, name);
      dlclose(handle);  // drops the reference NOLOAD took; whoever loaded it keeps it loaded
      if (sym) return sym;
    }
  return nullptr;
}

const char* const kRuntimes[] = {"libcudart.so.13", "libcudart.so.12", nullptr};
const char* const kDrivers[] = {"libcuda.so.1", nullptr};

// The runtime's (or, with kDrivers, the driver's) own `name`, looked up once; Fn is its
// function pointer type.
template <typename Fn>
Fn real_symbol(const char* name, std::atomic<void*>& cache, const char* const* sonames = kRuntimes) {
  void* sym = cache.load(std::memory_order_acquire);
  if (!sym) cache.store(sym = next_symbol(name, sonames), std::memory_order_release);
  return reinterpret_cast<Fn>(sym);
}

// Calls the runtime's own `name`, or fails naming it.
template <typename Fn, typename... Args>
cudaError_t call_runtime(const char* name, std::atomic<void*>& cache, Args... args) {
  auto real = real_symbol<Fn>(name, cache);
  if (!real) {
    fakegpu::log_once(name, "NVIDIA's CUDA runtime is not loaded in this process");
    return cudaErrorNotSupported;
  }
  return real(args...);
}

// The runtime's definition of `fn` called with the arguments given; each use looks it up once.
#define REAL(fn, ...)                                                                  \
  ([&] {                                                                               \
    static std::atomic<void*> cache{nullptr};                                          \
    return call_runtime<decltype(&fn)>(#fn, cache, __VA_ARGS__);                       \
  }())

int shown_devices() {
  static const int count = []() -> int {
    int asked = 0;
    try {
      asked = static_cast<int>(fakegpu::env::find(fakegpu::env::kHybridDevices).value_or(0));
    } catch (const fakegpu::env::SettingError& e) {
      fakegpu::log_once("FAKEGPU_HYBRID_DEVICES", e.what());
      return 0;
    }
    void* torch = asked > 0 ? dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD) : nullptr;
    if (torch) {
      dlclose(torch);
      fakegpu::log_once("FAKEGPU_HYBRID_DEVICES",
                        "PyTorch is loaded: its ranks see this machine's GPUs and select LOCAL_RANK % "
                        "torch.cuda.device_count() (devices shared with PyTorch are not supported yet)");
      return 0;
    }
    return asked;
  }();
  return count;
}

int real_devices() {
  static const int count = [] {
    int n = 0;
    return REAL(cudaGetDeviceCount, &n) == cudaSuccess && n > 0 ? n : 1;
  }();
  return count;
}

// Without FAKEGPU_HYBRID_DEVICES every device is itself.
bool sharing() { return shown_devices() > 0; }
bool valid(int device) { return device >= 0 && device < (sharing() ? shown_devices() : 1 << 30); }
int gpu_of(int device) { return sharing() ? device % real_devices() : device; }

thread_local int chosen = -1;  // the device this thread set, -1 before it sets one

// The device a GPU stands for on this thread: the one it chose when that runs there.
int device_of(int gpu) { return chosen >= 0 && gpu_of(chosen) == gpu ? chosen : gpu; }

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  if (!sharing()) return REAL(cudaGetDeviceCount, count);
  if (!count) return cudaErrorInvalidValue;
  int gpus = 0;
  cudaError_t rc = REAL(cudaGetDeviceCount, &gpus);
  if (rc == cudaSuccess) *count = shown_devices();
  return rc;
}

EXPORT cudaError_t cudaSetDevice(int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  cudaError_t rc = REAL(cudaSetDevice, gpu_of(device));
  if (rc == cudaSuccess) chosen = device;
  return rc;
}

EXPORT cudaError_t cudaGetDevice(int* device) {
  if (!device) return cudaErrorInvalidValue;
  int gpu = 0;
  cudaError_t rc = REAL(cudaGetDevice, &gpu);
  if (rc == cudaSuccess) *device = device_of(gpu);
  return rc;
}

EXPORT cudaError_t cudaInitDevice(int device, unsigned int device_flags, unsigned int flags) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaInitDevice, gpu_of(device), device_flags, flags);
}

// CUDA 12 binaries call the _v2 name, CUDA 13 ones the plain one; each forwards to its own.
EXPORT cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaGetDeviceProperties, prop, gpu_of(device));
}

EXPORT cudaError_t cudaGetDeviceProperties_v2(cudaDeviceProp* prop, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaGetDeviceProperties_v2, prop, gpu_of(device));
}

EXPORT cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaDeviceGetAttribute, value, attr, gpu_of(device));
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaDeviceGetPCIBusId, bus_id, len, gpu_of(device));
}

EXPORT cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus_id) {
  if (!device) return cudaErrorInvalidValue;
  int gpu = 0;
  cudaError_t rc = REAL(cudaDeviceGetByPCIBusId, &gpu, bus_id);
  if (rc == cudaSuccess) *device = device_of(gpu);
  return rc;
}

// Two devices on one GPU share its memory: each reaches the other's, with nothing to enable.
EXPORT cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!valid(device) || !valid(peer)) return cudaErrorInvalidDevice;
  if (can && gpu_of(device) == gpu_of(peer) && device != peer) {
    *can = 1;
    return cudaSuccess;
  }
  return REAL(cudaDeviceCanAccessPeer, can, gpu_of(device), gpu_of(peer));
}

EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (!valid(peer)) return cudaErrorInvalidDevice;
  int gpu = 0;
  if (cudaGetDevice(&gpu) == cudaSuccess && gpu_of(gpu) == gpu_of(peer)) return cudaSuccess;
  return REAL(cudaDeviceEnablePeerAccess, gpu_of(peer), flags);
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  if (!valid(peer)) return cudaErrorInvalidDevice;
  int gpu = 0;
  if (cudaGetDevice(&gpu) == cudaSuccess && gpu_of(gpu) == gpu_of(peer)) return cudaSuccess;
  return REAL(cudaDeviceDisablePeerAccess, gpu_of(peer));
}

EXPORT cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
  if (!valid(dst_device) || !valid(src_device)) return cudaErrorInvalidDevice;
  return REAL(cudaMemcpyPeer, dst, gpu_of(dst_device), src, gpu_of(src_device), count);
}

EXPORT cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                       cudaStream_t stream) {
  if (!valid(dst_device) || !valid(src_device)) return cudaErrorInvalidDevice;
  return REAL(cudaMemcpyPeerAsync, dst, gpu_of(dst_device), src, gpu_of(src_device), count, stream);
}

EXPORT cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  cudaError_t rc = REAL(cudaPointerGetAttributes, attributes, ptr);
  if (rc == cudaSuccess && attributes && attributes->device >= 0) attributes->device = device_of(attributes->device);
  return rc;
}

EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  cudaError_t rc = REAL(cudaStreamGetDevice, stream, device);
  if (rc == cudaSuccess && device) *device = device_of(*device);
  return rc;
}

// The driver's device handle for an ordinal, for programs linked against libcuda.so.1.
using CUresult = int;
using CUdevice = int;
constexpr CUresult kCudaErrorInvalidDevice = 101, kCudaErrorNotFound = 500;

EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  static std::atomic<void*> cache{nullptr};
  auto real = real_symbol<CUresult (*)(CUdevice*, int)>("cuDeviceGet", cache, kDrivers);
  if (!real) return kCudaErrorNotFound;
  if (!valid(ordinal)) return kCudaErrorInvalidDevice;
  return real(device, gpu_of(ordinal));
}

EXPORT CUresult cuDeviceGetCount(int* count) {
  static std::atomic<void*> cache{nullptr};
  auto real = real_symbol<CUresult (*)(int*)>("cuDeviceGetCount", cache, kDrivers);
  if (!real) return kCudaErrorNotFound;
  CUresult rc = real(count);
  if (rc == 0 && count && sharing()) *count = shown_devices();
  return rc;
}
