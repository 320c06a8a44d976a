// libfakegpu-hybrid-nvml.so: NVML's count of devices and its handles by index, shared as the
// CUDA calls are (device_map.h), so that torch.cuda.device_count(), which asks NVML before CUDA
// starts, counts the node's devices. Like libfakegpu-hybrid-devices.so it takes the soname of
// the library it stands before, libnvidia-ml.so.1, so that dlopen of that name (PyTorch's, by
// ctypes) returns it, and it depends on the real NVML under the name kRealNvml, which fgpu links
// to NVIDIA's. Device n is GPU n % (NVML's GPUs here); NVML is asked, not CUDA, as PyTorch asks
// NVML so as not to start CUDA.
#include <atomic>

#include "device_map.h"
#include "log_once.h"

namespace {

using namespace fakegpu::hybrid;

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kSuccess = 0, kInvalidArgument = 2, kFunctionNotFound = 13;
const char* const kNvmls[] = {kRealNvml, nullptr};

template <typename Fn>
Fn real(const char* name, std::atomic<void*>& cache) {
  auto fn = real_symbol<Fn>(name, cache, kNvmls);
  if (!fn) fakegpu::log_once(name, "NVIDIA's NVML is not loaded in this process");
  return fn;
}

using Count = nvmlReturn_t (*)(unsigned int*);
using ByIndex = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);

// NVML's GPUs here.
unsigned int real_gpus() {
  static const unsigned int gpus = [] {
    static std::atomic<void*> cache{nullptr};
    unsigned int n = 0;
    Count count = real<Count>("nvmlDeviceGetCount_v2", cache);
    return count && count(&n) == kSuccess && n > 0 ? n : 1u;
  }();
  return gpus;
}

nvmlReturn_t shown_count(const char* name, std::atomic<void*>& cache, unsigned int* count) {
  Count fn = real<Count>(name, cache);
  if (!fn) return kFunctionNotFound;
  nvmlReturn_t rc = fn(count);
  if (rc == kSuccess && count && sharing()) *count = static_cast<unsigned int>(shown_devices());
  return rc;
}

nvmlReturn_t handle_by_index(const char* name, std::atomic<void*>& cache, unsigned int index, nvmlDevice_t* device) {
  ByIndex fn = real<ByIndex>(name, cache);
  if (!fn) return kFunctionNotFound;
  if (!sharing()) return fn(index, device);
  if (index >= static_cast<unsigned int>(shown_devices())) return kInvalidArgument;
  return fn(index % real_gpus(), device);
}

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  static std::atomic<void*> cache{nullptr};
  return shown_count("nvmlDeviceGetCount_v2", cache, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  static std::atomic<void*> cache{nullptr};
  return shown_count("nvmlDeviceGetCount", cache, count);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  static std::atomic<void*> cache{nullptr};
  return handle_by_index("nvmlDeviceGetHandleByIndex_v2", cache, index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  static std::atomic<void*> cache{nullptr};
  return handle_by_index("nvmlDeviceGetHandleByIndex", cache, index, device);
}
