#include "device_map.h"

#include <dlfcn.h>

#include <string>

#include "env.h"
#include "log_once.h"

namespace fakegpu::hybrid {

namespace {
const char* const kRuntimes[] = {"libcudart.so.13", "libcudart.so.12", nullptr};
// Not "libcuda.so.1" nor "libnvidia-ml.so.1": those sonames are the hybrid libraries' own.
const char* const kDrivers[] = {"libfakegpu-cuda-driver.so.1", nullptr};
const char* const kNvmls[] = {"libfakegpu-nvml.so.1", nullptr};
}  // namespace

const Next kRuntime{kRuntimes, "NVIDIA's CUDA runtime"};
const Next kDriver{kDrivers, "NVIDIA's driver"};
const Next kNvml{kNvmls, "NVIDIA's NVML"};

void* next_symbol(const char* name, const Next& next) {
  if (void* sym = dlsym(RTLD_NEXT, name)) return sym;
  for (const char* const* s = next.sonames; *s; ++s)
    if (void* handle = dlopen(*s, RTLD_LAZY | RTLD_NOLOAD)) {
      void* sym = dlsym(handle, name);
      dlclose(handle);  // drops the reference NOLOAD took; whoever loaded it keeps it loaded
      if (sym) return sym;
    }
  return nullptr;
}

void say_not_loaded(const char* name, const Next& next) {
  log_once(name, (std::string(next.what) + " is not loaded in this process").c_str());
}

namespace {

// The GPUs here, as NVIDIA's runtime counts them.
int real_devices() {
  static const int count = [] {
    static std::atomic<void*> cache{nullptr};
    auto count_devices = real_symbol<int (*)(int*)>("cudaGetDeviceCount", cache, kRuntime);
    int n = 0;
    return count_devices && count_devices(&n) == 0 && n > 0 ? n : 1;
  }();
  return count;
}

thread_local int chosen = -1;  // the device this thread set, -1 before it sets one

}  // namespace

int shown_devices() {
  static const int count = []() -> int {
    try {
      return static_cast<int>(env::find(env::kHybridDevices).value_or(0));
    } catch (const env::SettingError& e) {
      log_once("FAKEGPU_HYBRID_DEVICES", e.what());
      return 0;
    }
  }();
  return count;
}

bool sharing() { return shown_devices() > 0; }
bool valid(int device) { return device >= 0 && device < (sharing() ? shown_devices() : 1 << 30); }
int gpu_of(int device) { return sharing() ? device % real_devices() : device; }
int device_of(int gpu) { return chosen >= 0 && gpu_of(chosen) == gpu ? chosen : gpu; }
void choose(int device) { chosen = device; }

}  // namespace fakegpu::hybrid
