// The driver's virtual memory family: reserve an address range, create handles to device
// memory, map them into the range. The runtime keeps the ranges, handles and mappings
// (virtual_memory.cpp), so mapped memory is device memory to every other call. Exporting a
// handle to another process is not simulated (driver_unsupported.cpp).
#include "driver.h"

using namespace fakegpu::driver;

namespace {

// CUmemAllocationProp and CUmemAccessDesc, as far as fakegpu reads them.
struct AllocationProp {
  int type;  // CU_MEM_ALLOCATION_TYPE_PINNED = 1
  int requested_handle_types;
  int location_type;  // CU_MEM_LOCATION_TYPE_DEVICE = 1
  int location_id;
};
struct AccessDesc {
  int location_type;
  int location_id;
  int flags;
};
constexpr int kPinned = 1, kOnDevice = 1;

void check_device_location(const RuntimeCalls& rt, int type, int id) {
  require(type == kOnDevice && id >= 0 && id < device_count(rt));
}

void* address(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

}  // namespace

FAKECU_API CUresult cuMemGetAllocationGranularity(size_t* granularity, const AllocationProp* prop, int) {
  return call([&](const RuntimeCalls& rt) {
    require(granularity != nullptr && prop != nullptr && prop->type == kPinned);
    check_device_location(rt, prop->location_type, prop->location_id);
    *granularity = rt.bridge->vmm_granularity();
  });
}

FAKECU_API CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr,
                                        unsigned long long) {
  return call([&](const RuntimeCalls& rt) {
    require(ptr != nullptr && size > 0 && size % rt.bridge->vmm_granularity() == 0);
    void* base = rt.bridge->vmm_reserve(size);
    require(base != nullptr, kOutOfMemory);
    if (alignment && reinterpret_cast<uintptr_t>(base) % alignment) {
      rt.bridge->vmm_free(base);
      log_once("cuMemAddressReserve", "fakegpu aligns ranges to their start page only");
      throw DriverError{kNotSupported};
    }
    *ptr = reinterpret_cast<uintptr_t>(base);
  });
}

FAKECU_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t) {
  return call([&](const RuntimeCalls& rt) { check(rt.bridge->vmm_free(address(ptr))); });
}

FAKECU_API CUresult cuMemCreate(unsigned long long* handle, size_t size, const AllocationProp* prop,
                                unsigned long long) {
  return call([&](const RuntimeCalls& rt) {
    require(handle != nullptr && prop != nullptr && prop->type == kPinned);
    check_device_location(rt, prop->location_type, prop->location_id);
    uint64_t h = 0;
    check(rt.bridge->vmm_create(size, prop->location_id, &h));
    *handle = h;
  });
}

FAKECU_API CUresult cuMemRelease(unsigned long long handle) {
  return call([&](const RuntimeCalls& rt) { check(rt.bridge->vmm_release(handle)); });
}

FAKECU_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, unsigned long long handle,
                             unsigned long long) {
  return call([&](const RuntimeCalls& rt) {
    if (offset != 0) {
      log_once("cuMemMap", "fakegpu maps whole handles only (offset 0)");
      throw DriverError{kNotSupported};
    }
    check(rt.bridge->vmm_map(address(ptr), size, handle));
  });
}

FAKECU_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  return call([&](const RuntimeCalls& rt) { check(rt.bridge->vmm_unmap(address(ptr), size)); });
}

// Every device reaches every mapping (fake device memory is the host's): only the request is checked.
FAKECU_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const AccessDesc* desc, size_t count) {
  return call([&](const RuntimeCalls& rt) {
    require(ptr != 0 && size > 0 && desc != nullptr && count > 0);
    for (size_t i = 0; i < count; ++i) check_device_location(rt, desc[i].location_type, desc[i].location_id);
  });
}
