// The devices a rank of hybrid mode sees and the GPUs they run on (libfakegpu-hybrid-devices.so):
// with FAKEGPU_HYBRID_DEVICES=N a process sees N devices, device d on GPU d % (GPUs here); without
// it every device is itself. Shared by the runtime's calls (hybrid_devices.cpp), the driver's
// (hybrid_driver.cpp) and NVML's (hybrid_nvml.cpp), with the way each reaches the real library.
#pragma once

#include <atomic>
#include <type_traits>

namespace fakegpu::hybrid {

// The real library a call is forwarded to: by the sonames it may be loaded under (where it was
// loaded without RTLD_GLOBAL, by a Python extension), and its name for messages.
struct Next {
  const char* const* sonames;
  const char* what;
};
// NVIDIA's runtime; the real driver and NVML under the names fgpu links them by in a folder of
// its own on LD_LIBRARY_PATH (this library takes their sonames: hybrid_driver.cpp says why).
extern const Next kRuntime, kDriver, kNvml;

// The next definition of `name` after this library, looked up once into `cache`.
void* next_symbol(const char* name, const Next& next);
template <typename Fn>
Fn real_symbol(const char* name, std::atomic<void*>& cache, const Next& next) {
  void* sym = cache.load(std::memory_order_acquire);
  if (!sym) cache.store(sym = next_symbol(name, next), std::memory_order_release);
  return reinterpret_cast<Fn>(sym);
}

// Calls the next library's `name` (of type Fn), or answers `missing`, saying once that it is not
// loaded.
void say_not_loaded(const char* name, const Next& next);
template <typename Fn, typename Missing, typename... Args>
std::invoke_result_t<Fn, Args...> call_next(const char* name, std::atomic<void*>& cache, const Next& next,
                                            Missing missing, Args... args) {
  auto real = real_symbol<Fn>(name, cache, next);
  if (!real) {
    say_not_loaded(name, next);
    return missing;
  }
  return real(args...);
}

// The next library's definition of `fn`, which this library defines too (so its type is fn's),
// called with the arguments given; each use looks it up once.
#define CALL_NEXT(next, missing, fn, ...)                                                         \
  ([&] {                                                                                          \
    static std::atomic<void*> cache{nullptr};                                                     \
    return ::fakegpu::hybrid::call_next<decltype(&fn)>(#fn, cache, next, missing, __VA_ARGS__);   \
  }())

int shown_devices();     // N, or 0 without sharing
bool sharing();          // whether devices are shared at all
bool valid(int device);  // an ordinal the program may name
int gpu_of(int device);  // the GPU under a device (a GPU's own ordinal maps to itself)
int device_of(int gpu);  // the device a GPU stands for on this thread: the one it chose there
void choose(int device); // this thread set `device`

}  // namespace fakegpu::hybrid
