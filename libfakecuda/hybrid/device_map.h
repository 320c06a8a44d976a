// The devices a rank of hybrid mode sees and the GPUs they run on (libfakegpu-hybrid-devices.so):
// with FAKEGPU_HYBRID_DEVICES=N a process sees N devices, device d on GPU d % (GPUs here); without
// it every device is itself. Shared by the runtime's calls (hybrid_devices.cpp) and the driver's
// (hybrid_driver.cpp).
#pragma once

#include <atomic>

namespace fakegpu::hybrid {

// The soname under which the library that preloads this finds the real driver: fgpu links it
// to NVIDIA's libcuda.so.1 in a folder of its own on LD_LIBRARY_PATH (hybrid_driver.cpp says why).
inline constexpr const char* kRealDriver = "libfakegpu-cuda-driver.so.1";
// And the real NVML, for libfakegpu-hybrid-nvml.so.
inline constexpr const char* kRealNvml = "libfakegpu-nvml.so.1";

extern const char* const kRuntimes[];  // NVIDIA's runtime, by soname
extern const char* const kDrivers[];   // the real driver, by the name above

// The next definition of `name` after this library, looked up once into `cache`: NVIDIA's
// runtime or (with kDrivers) driver, whether loaded with the program or, without RTLD_GLOBAL,
// by a Python extension.
void* next_symbol(const char* name, const char* const* sonames);
template <typename Fn>
Fn real_symbol(const char* name, std::atomic<void*>& cache, const char* const* sonames) {
  void* sym = cache.load(std::memory_order_acquire);
  if (!sym) cache.store(sym = next_symbol(name, sonames), std::memory_order_release);
  return reinterpret_cast<Fn>(sym);
}

int shown_devices();     // N, or 0 without sharing
bool sharing();          // whether devices are shared at all
bool valid(int device);  // an ordinal the program may name
int gpu_of(int device);  // the GPU under a device (a GPU's own ordinal maps to itself)
int device_of(int gpu);  // the device a GPU stands for on this thread: the one it chose there
void choose(int device); // this thread set `device`

}  // namespace fakegpu::hybrid
