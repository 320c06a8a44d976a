// The driver's virtual memory family (cuMemAddressReserve, cuMemCreate, cuMemMap, ...), served
// to fakegpu's driver through the bridge: ranges, handles and mappings live in the runtime's
// device memory (device_memory.h), so that mapped memory is device memory to every other call,
// counts against the device, and takes the zero-copy data plane. PyTorch's expandable segments
// (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) allocate this way.
#include "bridge.h"
#include "device_memory.h"
#include "devices.h"

namespace fakegpu::cuda {
namespace {
DeviceMemory& memory() { return DeviceMemory::instance(); }
}  // namespace

void* vmm_reserve(size_t bytes) {
  try {
    return memory().reserve(bytes);
  } catch (...) {
    return nullptr;
  }
}

int vmm_free(void* base) { return memory().free_reservation(base) ? 0 : cudaErrorInvalidValue; }

int vmm_create(size_t bytes, int device, uint64_t* handle) {
  return guarded([&] {
    const VirtualDevice& d = device_or_throw(device);
    if (bytes == 0 || bytes % DeviceMemory::kGranularity) throw cudaErrorInvalidValue;
    *handle = memory().create_physical(bytes, device, d.memory_bytes);
    if (!*handle) throw cudaErrorMemoryAllocation;
    mark_context_active(device);
  });
}

int vmm_release(uint64_t handle) { return memory().release_physical(handle) ? 0 : cudaErrorInvalidValue; }

int vmm_map(void* at, size_t bytes, uint64_t handle) {
  return memory().map_physical(at, bytes, handle) ? 0 : cudaErrorInvalidValue;
}

int vmm_unmap(void* at, size_t bytes) { return memory().unmap_physical(at, bytes) ? 0 : cudaErrorInvalidValue; }

size_t vmm_granularity() { return DeviceMemory::kGranularity; }

uint64_t device_memory_used(int device) { return memory().used_on(device); }

}  // namespace fakegpu::cuda
