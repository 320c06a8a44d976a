// The driver's calls that name a device, mapped as the runtime's are (hybrid_devices.cpp), so
// that PyTorch sees the node's devices too. PyTorch reaches the driver three ways, and each
// finds these definitions first:
// - through the dynamic linker (libcaffe2_nvrtc.so links libcuda.so.1): this library is
//   preloaded, so its symbols come first;
// - with dlopen("libcuda.so.1") and dlsym on that handle (ATen's lazy NVRTC, which asks each
//   device's primary context whether it is active as autograd starts its device threads): this
//   library's soname is libcuda.so.1, so that dlopen returns it, and dlsym finds its own symbols
//   and then those of its one dependency, the real driver, which fgpu links under the name
//   kRealDriver (device_map.h) in a folder of its own on LD_LIBRARY_PATH;
// - through the runtime's cudaGetDriverEntryPoint(ByVersion) (c10's driver API: virtual memory
//   for expandable segments): the entry points of the calls below are this library's.
// The runtime's own driver calls (cuGetProcAddress) stay the real driver's, so NVIDIA's runtime
// still counts the GPUs that are here.
#include <cstddef>
#include <cstring>
#include <vector>

#ifdef FAKEGPU_WITH_REAL_CUDA_H
// The build compiles this file once more against NVIDIA's headers, where they are at hand, so
// that a call defined here with other types than the driver's fails to compile.
#define __CUDA_API_VERSION_INTERNAL 1  // the plain names of Release, Reset and SetFlags, not _v2
#include <cuda.h>
#include <cuda_runtime_api.h>
#else
#include "cuda_runtime.h"
#endif
#include "device_map.h"

namespace {

using namespace fakegpu::hybrid;

#ifdef FAKEGPU_WITH_REAL_CUDA_H
using Result = CUresult;
using Device = CUdevice;
using Context = CUcontext;
using DevicePointer = CUdeviceptr;
using DeviceAttribute = CUdevice_attribute;
using PointerAttribute = CUpointer_attribute;
using Granularity = CUmemAllocationGranularity_flags;
using AllocationHandle = CUmemGenericAllocationHandle;
using MemLocation = CUmemLocation;
using MemAllocationProp = CUmemAllocationProp;
using MemAccessDesc = CUmemAccessDesc;
#else
// cuda.h's types, as far as these calls use them.
using Result = int;
using Device = int;
using Context = void*;
using DevicePointer = unsigned long long;
using DeviceAttribute = int;
using PointerAttribute = int;
using Granularity = int;
using AllocationHandle = unsigned long long;
struct MemLocation {
  int type;
  int id;
};
struct MemAllocationProp {
  int type;
  int requestedHandleTypes;
  MemLocation location;
  void* win32HandleMetaData;
  unsigned char allocFlags[8];
};
struct MemAccessDesc {
  MemLocation location;
  int flags;
};
#endif
static_assert(sizeof(MemAllocationProp) == 32 && offsetof(MemAllocationProp, location) == 8);
static_assert(sizeof(MemAccessDesc) == 12);
constexpr int kLocationDevice = 1;         // CU_MEM_LOCATION_TYPE_DEVICE
constexpr int kPointerDeviceOrdinal = 9;  // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr Result kSuccess = Result(0), kErrorInvalidValue = Result(1), kErrorInvalidDevice = Result(101),
                 kErrorNotFound = Result(500);

// A location the program may name: any but a device it does not see.
bool valid_location(const MemLocation& where) { return where.type != kLocationDevice || valid(where.id); }

// A device the program names, as the GPU under it.
MemLocation on_gpu(MemLocation where) {
  if (where.type == kLocationDevice) where.id = gpu_of(where.id);
  return where;
}

// The real driver's definition of `fn` called with the arguments given.
#define DRIVER(fn, ...) CALL_NEXT(kDriver, kErrorNotFound, fn, __VA_ARGS__)

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT Result cuDeviceGet(Device* device, int ordinal) {
  if (!valid(ordinal)) return kErrorInvalidDevice;
  return DRIVER(cuDeviceGet, device, gpu_of(ordinal));
}

EXPORT Result cuDeviceGetCount(int* count) {
  Result rc = DRIVER(cuDeviceGetCount, count);
  if (rc == kSuccess && count && sharing()) *count = shown_devices();
  return rc;
}

EXPORT Result cuDeviceGetAttribute(int* value, DeviceAttribute attribute, Device device) {
  if (!valid(device)) return kErrorInvalidDevice;
  return DRIVER(cuDeviceGetAttribute, value, attribute, gpu_of(device));
}

EXPORT Result cuDeviceGetName(char* name, int length, Device device) {
  if (!valid(device)) return kErrorInvalidDevice;
  return DRIVER(cuDeviceGetName, name, length, gpu_of(device));
}

EXPORT Result cuDeviceGetPCIBusId(char* bus_id, int length, Device device) {
  if (!valid(device)) return kErrorInvalidDevice;
  return DRIVER(cuDeviceGetPCIBusId, bus_id, length, gpu_of(device));
}

// Two devices on one GPU share its memory, as cudaDeviceCanAccessPeer says too.
EXPORT Result cuDeviceCanAccessPeer(int* can, Device device, Device peer) {
  if (!valid(device) || !valid(peer)) return kErrorInvalidDevice;
  if (can && device != peer && gpu_of(device) == gpu_of(peer)) {
    *can = 1;
    return kSuccess;
  }
  return DRIVER(cuDeviceCanAccessPeer, can, gpu_of(device), gpu_of(peer));
}

// Primary contexts: a device's is its GPU's.
EXPORT Result cuDevicePrimaryCtxGetState(Device device, unsigned int* flags, int* active) {
  if (!valid(device)) return kErrorInvalidDevice;
  return DRIVER(cuDevicePrimaryCtxGetState, gpu_of(device), flags, active);
}

EXPORT Result cuDevicePrimaryCtxRetain(Context* context, Device device) {
  if (!valid(device)) return kErrorInvalidDevice;
  return DRIVER(cuDevicePrimaryCtxRetain, context, gpu_of(device));
}

// Release, Reset and SetFlags each have a _v2, which cuda.h names for programs since CUDA 11 and
// which the entry points of their plain names give; the plain symbols are older programs'.
#define FORWARD_PRIMARY_CONTEXT(name)               \
  EXPORT Result name(Device device) {               \
    if (!valid(device)) return kErrorInvalidDevice; \
    return DRIVER(name, gpu_of(device));            \
  }
FORWARD_PRIMARY_CONTEXT(cuDevicePrimaryCtxRelease)
FORWARD_PRIMARY_CONTEXT(cuDevicePrimaryCtxRelease_v2)
FORWARD_PRIMARY_CONTEXT(cuDevicePrimaryCtxReset)
FORWARD_PRIMARY_CONTEXT(cuDevicePrimaryCtxReset_v2)
#undef FORWARD_PRIMARY_CONTEXT

EXPORT Result cuDevicePrimaryCtxSetFlags(Device device, unsigned int flags) {
  if (!valid(device)) return kErrorInvalidDevice;
  return DRIVER(cuDevicePrimaryCtxSetFlags, gpu_of(device), flags);
}

EXPORT Result cuDevicePrimaryCtxSetFlags_v2(Device device, unsigned int flags) {
  if (!valid(device)) return kErrorInvalidDevice;
  return DRIVER(cuDevicePrimaryCtxSetFlags_v2, gpu_of(device), flags);
}

// The device of the current context: the one this thread chose where that runs on its GPU.
EXPORT Result cuCtxGetDevice(Device* device) {
  Result rc = DRIVER(cuCtxGetDevice, device);
  if (rc == kSuccess && device) *device = device_of(*device);
  return rc;
}

EXPORT Result cuPointerGetAttribute(void* data, PointerAttribute attribute, DevicePointer pointer) {
  Result rc = DRIVER(cuPointerGetAttribute, data, attribute, pointer);
  if (rc == kSuccess && data && attribute == kPointerDeviceOrdinal) {
    int* ordinal = static_cast<int*>(data);
    *ordinal = device_of(*ordinal);
  }
  return rc;
}

// Virtual memory (PyTorch's expandable segments) names the device in the allocation's location.
EXPORT Result cuMemCreate(AllocationHandle* handle, size_t size, const MemAllocationProp* prop,
                          unsigned long long flags) {
  if (!prop) return kErrorInvalidValue;
  if (!valid_location(prop->location)) return kErrorInvalidDevice;
  MemAllocationProp on = *prop;
  on.location = on_gpu(on.location);
  return DRIVER(cuMemCreate, handle, size, &on, flags);
}

EXPORT Result cuMemGetAllocationGranularity(size_t* granularity, const MemAllocationProp* prop, Granularity option) {
  if (!prop) return kErrorInvalidValue;
  if (!valid_location(prop->location)) return kErrorInvalidDevice;
  MemAllocationProp on = *prop;
  on.location = on_gpu(on.location);
  return DRIVER(cuMemGetAllocationGranularity, granularity, &on, option);
}

EXPORT Result cuMemSetAccess(DevicePointer pointer, size_t size, const MemAccessDesc* desc, size_t count) {
  if (!desc && count) return kErrorInvalidValue;
  // Devices on one GPU name it once: the driver refuses a location listed twice.
  std::vector<MemAccessDesc> on;
  for (size_t i = 0; i < count; ++i) {
    if (!valid_location(desc[i].location)) return kErrorInvalidDevice;
    MemAccessDesc d = desc[i];
    d.location = on_gpu(d.location);
    bool seen = false;
    for (MemAccessDesc& earlier : on)
      if (earlier.location.type == d.location.type && earlier.location.id == d.location.id) {
        earlier.flags = decltype(d.flags)(earlier.flags | d.flags);
        seen = true;
      }
    if (!seen) on.push_back(d);
  }
  return DRIVER(cuMemSetAccess, pointer, size, on.data(), on.size());
}

EXPORT Result cuMemGetAllocationPropertiesFromHandle(MemAllocationProp* prop, AllocationHandle handle) {
  Result rc = DRIVER(cuMemGetAllocationPropertiesFromHandle, prop, handle);
  if (rc == kSuccess && prop && prop->location.type == kLocationDevice)
    prop->location.id = device_of(prop->location.id);
  return rc;
}

namespace {

// The calls above by the names a program asks the runtime for their entry points with. Entry
// points are the current version of a call, so Release, Reset and SetFlags are their _v2.
struct Mapped {
  const char* name;
  void* fn;
};
const Mapped kMapped[] = {
    {"cuDeviceGet", reinterpret_cast<void*>(&cuDeviceGet)},
    {"cuDeviceGetCount", reinterpret_cast<void*>(&cuDeviceGetCount)},
    {"cuDeviceGetAttribute", reinterpret_cast<void*>(&cuDeviceGetAttribute)},
    {"cuDeviceGetName", reinterpret_cast<void*>(&cuDeviceGetName)},
    {"cuDeviceGetPCIBusId", reinterpret_cast<void*>(&cuDeviceGetPCIBusId)},
    {"cuDeviceCanAccessPeer", reinterpret_cast<void*>(&cuDeviceCanAccessPeer)},
    {"cuDevicePrimaryCtxGetState", reinterpret_cast<void*>(&cuDevicePrimaryCtxGetState)},
    {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease_v2)},
    {"cuDevicePrimaryCtxReset", reinterpret_cast<void*>(&cuDevicePrimaryCtxReset_v2)},
    {"cuDevicePrimaryCtxSetFlags", reinterpret_cast<void*>(&cuDevicePrimaryCtxSetFlags_v2)},
    {"cuCtxGetDevice", reinterpret_cast<void*>(&cuCtxGetDevice)},
    {"cuPointerGetAttribute", reinterpret_cast<void*>(&cuPointerGetAttribute)},
    {"cuMemCreate", reinterpret_cast<void*>(&cuMemCreate)},
    {"cuMemGetAllocationGranularity", reinterpret_cast<void*>(&cuMemGetAllocationGranularity)},
    {"cuMemSetAccess", reinterpret_cast<void*>(&cuMemSetAccess)},
    {"cuMemGetAllocationPropertiesFromHandle", reinterpret_cast<void*>(&cuMemGetAllocationPropertiesFromHandle)},
};

// The runtime found `symbol`: a call above gets this library's definition in its place.
cudaError_t mapped_entry_point(cudaError_t rc, const char* symbol, void** out) {
  if (rc != cudaSuccess || !symbol || !out || !*out) return rc;
  for (const Mapped& m : kMapped)
    if (std::strcmp(m.name, symbol) == 0) *out = m.fn;
  return rc;
}

}  // namespace

// The runtime's entry point of `symbol` into `out`, a call above's being this library's.
#define ENTRY_POINT(lookup, ...) \
  mapped_entry_point(CALL_NEXT(kRuntime, cudaErrorNotSupported, lookup, symbol, out, __VA_ARGS__), symbol, out)

EXPORT cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** out, unsigned long long flags,
                                           cudaDriverEntryPointQueryResult* status) {
  return ENTRY_POINT(cudaGetDriverEntryPoint, flags, status);
}

EXPORT cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** out, unsigned long long flags,
                                                cudaDriverEntryPointQueryResult* status) {
  return ENTRY_POINT(cudaGetDriverEntryPoint_ptsz, flags, status);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** out, unsigned int version,
                                                    unsigned long long flags,
                                                    cudaDriverEntryPointQueryResult* status) {
  return ENTRY_POINT(cudaGetDriverEntryPointByVersion, version, flags, status);
}

EXPORT cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** out, unsigned int version,
                                                         unsigned long long flags,
                                                         cudaDriverEntryPointQueryResult* status) {
  return ENTRY_POINT(cudaGetDriverEntryPointByVersion_ptsz, version, flags, status);
}
