// libfakegpu-hybrid-nvml.so: NVML's count of devices and its handles by index, shared as the
// CUDA calls are (device_map.h), so that torch.cuda.device_count(), which asks NVML before CUDA
// starts, counts the node's devices. Like libfakegpu-hybrid-devices.so it takes the soname of
// the library it stands before, libnvidia-ml.so.1, so that dlopen of that name (PyTorch's, by
// ctypes) returns it, and it depends on the real NVML under another name (device_map.h's kNvml),
// which fgpu links to NVIDIA's. Device n is GPU n % (NVML's GPUs here); NVML is asked, not CUDA,
// as PyTorch asks NVML so as not to start CUDA.
#include "device_map.h"

using namespace fakegpu::hybrid;

namespace {

using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t kSuccess = 0, kInvalidArgument = 2, kFunctionNotFound = 13;

// NVML's answer to a count, with the devices the program sees in it.
nvmlReturn_t shown_count(nvmlReturn_t rc, unsigned int* count) {
  if (rc == kSuccess && count && sharing()) *count = static_cast<unsigned int>(shown_devices());
  return rc;
}

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))
// NVML's definition of `fn` called with the arguments given.
#define REAL(fn, ...) CALL_NEXT(kNvml, kFunctionNotFound, fn, __VA_ARGS__)

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return shown_count(REAL(nvmlDeviceGetCount_v2, count), count);
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return shown_count(REAL(nvmlDeviceGetCount, count), count);
}

namespace {

// NVML's GPUs here.
unsigned int real_gpus() {
  static const unsigned int gpus = [] {
    unsigned int n = 0;
    return REAL(nvmlDeviceGetCount_v2, &n) == kSuccess && n > 0 ? n : 1u;
  }();
  return gpus;
}

// The GPU under device `index`, or false when the program sees no such device.
bool gpu_index(unsigned int* index) {
  if (!sharing()) return true;
  if (*index >= static_cast<unsigned int>(shown_devices())) return false;
  *index %= real_gpus();
  return true;
}

}  // namespace

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!gpu_index(&index)) return kInvalidArgument;
  return REAL(nvmlDeviceGetHandleByIndex_v2, index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  if (!gpu_index(&index)) return kInvalidArgument;
  return REAL(nvmlDeviceGetHandleByIndex, index, device);
}
