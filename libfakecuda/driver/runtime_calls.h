// The fake runtime's entry points the driver answers from, resolved once in the process's
// runtime (runtime_symbol.h). Each is nullptr when no fake runtime is loaded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fakegpu::driver {

struct RuntimeCalls {
  int (*is_fake)() = nullptr;
  int (*get_device_count)(int*) = nullptr;
  int (*get_device)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*device_get_attribute)(int*, int, int) = nullptr;
  int (*device_get_pci_bus_id)(char*, int, int) = nullptr;
  int (*device_synchronize)() = nullptr;
  int (*driver_get_version)(int*) = nullptr;
  int (*mem_get_info)(size_t*, size_t*) = nullptr;
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*memcpy_async)(void*, const void*, size_t, int, void*) = nullptr;
  int (*memset_async)(void*, int, size_t, void*) = nullptr;
  int (*launch_host_func)(void*, void (*)(void*), void*) = nullptr;
  int (*stream_synchronize)(void*) = nullptr;
  int (*device_identity)(int, char*, unsigned char*, uint64_t*) = nullptr;
  int (*primary_context_active)(int) = nullptr;
  int (*allocation_of)(const void*, void**, size_t*, int*, int*) = nullptr;
};

// The runtime's calls; `loaded` is false when the process has no fake runtime, and then
// every driver call fails with CUDA_ERROR_NOT_INITIALIZED.
const RuntimeCalls& runtime();
bool runtime_loaded();

}  // namespace fakegpu::driver
