// The fake runtime's entry points the driver answers from, resolved once in the process's
// runtime (runtime_symbol.h): its public calls by name, its private ones through the bridge
// table (fake_cuda_bridge.h). Each is nullptr when no fake runtime is loaded.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fake_cuda_bridge.h"

namespace fakegpu::driver {

struct RuntimeCalls {
  const fakegpu_cuda_bridge_table* bridge = nullptr;  // device identity, contexts, allocations
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
};

// What the runtime reports of a device: its name, UUID and memory. `check` turns the runtime's
// result (a cudaError_t) into the calling library's error.
struct DeviceIdentity {
  char name[256];
  unsigned char uuid[16];
  uint64_t memory_bytes = 0;
};
template <typename Check>
DeviceIdentity device_identity(const RuntimeCalls& rt, int device, Check&& check) {
  DeviceIdentity id;
  check(rt.bridge->device_identity(device, id.name, id.uuid, &id.memory_bytes));
  return id;
}

// The library these calls serve, as its messages name it ("libcuda.so.1"): each library that
// links runtime_calls.cpp defines it.
extern const char* const kRuntimeCaller;

// The runtime's calls; `loaded` is false when the process has no fake runtime, and then
// every driver call fails with CUDA_ERROR_NOT_INITIALIZED.
const RuntimeCalls& runtime();
bool runtime_loaded();

}  // namespace fakegpu::driver
