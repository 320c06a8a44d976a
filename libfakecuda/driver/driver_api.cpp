// The driver calls fakegpu answers: initialisation and versions, devices, primary contexts,
// pointers and a few memory operations. Devices, memory and streams are the fake runtime's,
// so the driver and the runtime can never disagree. Every call goes through `call`, the one
// place where a failure becomes a CUresult.
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <vector>

#include "driver.h"
#include "runtime_calls.h"

using namespace fakegpu::driver;

namespace fakegpu::driver {

const char* const kRuntimeCaller = "libcuda.so.1";

namespace {
thread_local Context* t_current = nullptr;  // set by cuCtxSetCurrent/PushCurrent; else the runtime's device
thread_local bool t_current_set = false;
}  // namespace

Context* primary_context(int device) {
  static std::mutex mu;
  static auto* contexts = new std::vector<Context*>;  // never freed: handles outlive static destructors
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0) return nullptr;
  while (contexts->size() <= static_cast<size_t>(device)) contexts->push_back(new Context{int(contexts->size())});
  return (*contexts)[device];
}

CUresult from_runtime(int cuda_error) {
  switch (cuda_error) {
    case 0: return kSuccess;
    case 1: return kInvalidValue;
    case 2: return kOutOfMemory;
    case 3: return kNotInitialized;
    case 100: return kNoDevice;
    case 101: return kInvalidDevice;
    case 801: return kNotSupported;
    default: return kUnknown;
  }
}

}  // namespace fakegpu::driver

namespace {

Context* checked_context(const RuntimeCalls& rt, CUcontext ctx) {
  require(ctx != nullptr && ctx == primary_context(ctx->device), kInvalidContext);
  check_device(rt, ctx->device);
  return ctx;
}

// The calling thread's context: the one it set, or the primary context of its runtime device
// once that is active (the runtime makes a device's primary context current when it uses it).
Context* current_context(const RuntimeCalls& rt) {
  if (t_current_set) return t_current;
  int dev = 0;
  check(rt.get_device(&dev));
  return rt.bridge->primary_context_active(dev) ? primary_context(dev) : nullptr;
}

void make_current(const RuntimeCalls& rt, Context* ctx) {
  t_current = ctx;
  t_current_set = true;
  if (ctx) check(rt.set_device(ctx->device));
}

struct Range {
  void* base;
  size_t bytes;
  int kind;  // 0 device, 1 host, 2 managed
  int device;
};
Range allocation_of(const RuntimeCalls& rt, CUdeviceptr ptr) {
  Range r{};
  require(rt.bridge->allocation_of(reinterpret_cast<void*>(ptr), &r.base, &r.bytes, &r.kind, &r.device) == 1, kInvalidValue);
  return r;
}

// The CU_POINTER_ATTRIBUTE_* values fakegpu answers.
enum PointerAttribute {
  kAttrContext = 1,
  kAttrMemoryType = 2,
  kAttrDevicePointer = 3,
  kAttrHostPointer = 4,
  kAttrSyncMemops = 6,
  kAttrBufferId = 7,
  kAttrIsManaged = 8,
  kAttrDeviceOrdinal = 9,
  kAttrIpcCapable = 10,
  kAttrRangeStart = 11,
  kAttrRangeSize = 12,
  kAttrMapped = 13,
};
constexpr unsigned kMemoryTypeHost = 1, kMemoryTypeDevice = 2;

void pointer_attribute(const RuntimeCalls& rt, void* data, int attribute, CUdeviceptr ptr) {
  require(data != nullptr);
  const Range r = allocation_of(rt, ptr);
  void* const p = reinterpret_cast<void*>(ptr);
  switch (attribute) {
    case kAttrContext: *static_cast<CUcontext*>(data) = primary_context(r.device); break;
    case kAttrMemoryType: *static_cast<unsigned*>(data) = r.kind == 1 ? kMemoryTypeHost : kMemoryTypeDevice; break;
    case kAttrDevicePointer: *static_cast<CUdeviceptr*>(data) = ptr; break;
    case kAttrHostPointer: *static_cast<void**>(data) = p; break;  // fake device memory is host memory
    case kAttrSyncMemops: *static_cast<int*>(data) = 1; break;
    case kAttrBufferId: *static_cast<unsigned long long*>(data) = reinterpret_cast<uintptr_t>(r.base); break;
    case kAttrIsManaged: *static_cast<int*>(data) = r.kind == 2; break;
    case kAttrDeviceOrdinal: *static_cast<int*>(data) = r.device; break;
    case kAttrIpcCapable: *static_cast<int*>(data) = r.kind == 0; break;
    case kAttrRangeStart: *static_cast<CUdeviceptr*>(data) = reinterpret_cast<CUdeviceptr>(r.base); break;
    case kAttrRangeSize: *static_cast<size_t*>(data) = r.bytes; break;
    case kAttrMapped: *static_cast<int*>(data) = 1; break;
    default:
      log_once("cuPointerGetAttribute", "this attribute is not simulated");
      throw DriverError{kInvalidValue};
  }
}

}  // namespace

// ---- initialisation and versions

FAKECU_API int fakegpu_cuda_driver_is_fake(void) { return 1; }

FAKECU_API CUresult cuInit(unsigned int flags) {
  return call([&](const RuntimeCalls& rt) {
    require(flags == 0);
    device_count(rt);  // no device, or a cluster YAML that could not be read, fails here as in CUDA
  });
}

FAKECU_API CUresult cuDriverGetVersion(int* version) {
  return call([&](const RuntimeCalls& rt) {
    require(version != nullptr);
    check(rt.driver_get_version(version));
  });
}

// ---- devices

FAKECU_API CUresult cuDeviceGetCount(int* count) {
  return call([&](const RuntimeCalls& rt) {
    require(count != nullptr);
    int n = 0;
    const int err = rt.get_device_count(&n);
    *count = n;
    if (err != 100) check(err);  // no device: a count of 0 and success, as the driver does
  });
}

FAKECU_API CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return call([&](const RuntimeCalls& rt) {
    require(device != nullptr);
    check_device(rt, ordinal);
    *device = ordinal;
  });
}

namespace {
// The driver's own attributes of its virtual memory family, which the runtime's enumeration
// lacks: virtual memory itself is simulated (driver_vmm.cpp); shareable handles, GPUDirect RDMA
// with them, dma-buf and multicast are not (driver_unsupported.cpp), and read 0 so that
// programs take their other paths.
std::optional<int> virtual_memory_attribute(int attribute) {
  switch (attribute) {
    case 102: return 1;
    case 103: case 104: case 105: case 110: case 124: case 128: case 132: return 0;
    default: return std::nullopt;
  }
}
}  // namespace

FAKECU_API CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
  return call([&](const RuntimeCalls& rt) {
    require(value != nullptr);
    check_device(rt, dev);
    if (auto known = virtual_memory_attribute(attribute)) {
      *value = *known;
      return;
    }
    check(rt.device_get_attribute(value, attribute, dev));  // CUdevice_attribute numbers are cudaDeviceAttr's
  });
}

namespace {
// What the runtime reports of a device, which the driver hands out piece by piece.
DeviceIdentity identity(const RuntimeCalls& rt, CUdevice dev) { return device_identity(rt, dev, check); }
}  // namespace

FAKECU_API CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  return call([&](const RuntimeCalls& rt) {
    require(name != nullptr && len > 0);
    std::snprintf(name, static_cast<size_t>(len), "%s", identity(rt, dev).name);
  });
}

FAKECU_API CUresult cuDeviceGetUuid_v2(unsigned char* uuid, CUdevice dev) {
  return call([&](const RuntimeCalls& rt) {
    require(uuid != nullptr);
    std::memcpy(uuid, identity(rt, dev).uuid, 16);
  });
}
FAKECU_API CUresult cuDeviceGetUuid(unsigned char* uuid, CUdevice dev) { return cuDeviceGetUuid_v2(uuid, dev); }

FAKECU_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  return call([&](const RuntimeCalls& rt) {
    require(bytes != nullptr);
    *bytes = identity(rt, dev).memory_bytes;
  });
}

FAKECU_API CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  return call([&](const RuntimeCalls& rt) { check(rt.device_get_pci_bus_id(bus_id, len, dev)); });
}

FAKECU_API CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
  return call([&](const RuntimeCalls& rt) {
    require(major != nullptr && minor != nullptr);
    check(rt.device_get_attribute(major, 75 /* ComputeCapabilityMajor */, dev));
    check(rt.device_get_attribute(minor, 76 /* ComputeCapabilityMinor */, dev));
  });
}

// ---- primary contexts

FAKECU_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  return call([&](const RuntimeCalls& rt) {
    require(flags != nullptr && active != nullptr);
    check_device(rt, dev);
    *flags = 0;
    *active = rt.bridge->primary_context_active(dev);
  });
}

FAKECU_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  return call([&](const RuntimeCalls& rt) {
    require(ctx != nullptr);
    check_device(rt, dev);
    int previous = 0;
    check(rt.get_device(&previous));
    check(rt.set_device(dev));  // activates the primary context, as retaining it does
    check(rt.set_device(previous));
    *ctx = primary_context(dev);
  });
}

FAKECU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return call([&](const RuntimeCalls& rt) { check_device(rt, dev); });
}

FAKECU_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int /*flags*/) {
  return call([&](const RuntimeCalls& rt) { check_device(rt, dev); });
}

FAKECU_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  return call([&](const RuntimeCalls& rt) {
    check_device(rt, dev);
    log_once("cuDevicePrimaryCtxReset", "the context's memory is kept: fakegpu does not reset devices");
  });
}

FAKECU_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
  return call([&](const RuntimeCalls& rt) {
    require(ctx != nullptr);
    *ctx = current_context(rt);
  });
}

FAKECU_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  return call([&](const RuntimeCalls& rt) { make_current(rt, ctx ? checked_context(rt, ctx) : nullptr); });
}

// fakegpu keeps one context per thread rather than a stack: a push makes the context current,
// a pop hands back the current one and leaves none.
FAKECU_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  return call([&](const RuntimeCalls& rt) { make_current(rt, checked_context(rt, ctx)); });
}

FAKECU_API CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
  return call([&](const RuntimeCalls& rt) {
    Context* current = current_context(rt);
    require(current != nullptr, kInvalidContext);
    if (ctx) *ctx = current;
    t_current = nullptr;
    t_current_set = true;
  });
}

FAKECU_API CUresult cuCtxGetDevice(CUdevice* dev) {
  return call([&](const RuntimeCalls& rt) {
    require(dev != nullptr);
    Context* current = current_context(rt);
    require(current != nullptr, kInvalidContext);
    *dev = current->device;
  });
}

FAKECU_API CUresult cuCtxSynchronize(void) {
  return call([&](const RuntimeCalls& rt) { check(rt.device_synchronize()); });
}

// ---- pointers and memory

FAKECU_API CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  return call([&](const RuntimeCalls& rt) { pointer_attribute(rt, data, attribute, ptr); });
}

FAKECU_API CUresult cuPointerGetAttributes(unsigned int count, int* attributes, void** data, CUdeviceptr ptr) {
  return call([&](const RuntimeCalls& rt) {
    require(attributes != nullptr && data != nullptr);
    for (unsigned i = 0; i < count; ++i) pointer_attribute(rt, data[i], attributes[i], ptr);
  });
}

FAKECU_API CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* bytes, CUdeviceptr ptr) {
  return call([&](const RuntimeCalls& rt) {
    const Range r = allocation_of(rt, ptr);
    if (base) *base = reinterpret_cast<CUdeviceptr>(r.base);
    if (bytes) *bytes = r.bytes;
  });
}

FAKECU_API CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  return call([&](const RuntimeCalls& rt) { check(rt.mem_get_info(free_bytes, total_bytes)); });
}

FAKECU_API CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  return call([&](const RuntimeCalls& rt) {
    require(ptr != nullptr);
    void* p = nullptr;
    check(rt.malloc(&p, bytes));
    *ptr = reinterpret_cast<CUdeviceptr>(p);
  });
}

FAKECU_API CUresult cuMemFree_v2(CUdeviceptr ptr) {
  return call([&](const RuntimeCalls& rt) { check(rt.free(reinterpret_cast<void*>(ptr))); });
}

FAKECU_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  return call([&](const RuntimeCalls& rt) {
    check(rt.memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), bytes, 4 /* cudaMemcpyDefault */));
  });
}

FAKECU_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  return call([&](const RuntimeCalls& rt) {
    check(rt.memcpy_async(reinterpret_cast<void*>(dst), reinterpret_cast<void*>(src), bytes, 4, stream));
  });
}

FAKECU_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream stream) {
  return call([&](const RuntimeCalls& rt) { check(rt.memset_async(reinterpret_cast<void*>(dst), value, n, stream)); });
}

namespace {
// Work the runtime has no call for (32-bit fills, stream writes) runs as a host function on the
// stream, which keeps its place in the stream's order.
struct Fill32 {
  uint32_t* dst;
  uint32_t value;
  size_t n;
};
void run_fill32(void* arg) {
  auto* f = static_cast<Fill32*>(arg);
  for (size_t i = 0; i < f->n; ++i) f->dst[i] = f->value;
  delete f;
}
void fill32(const RuntimeCalls& rt, CUdeviceptr dst, uint32_t value, size_t n, CUstream stream) {
  require(dst % 4 == 0);
  if (n) allocation_of(rt, dst + (n - 1) * 4);  // the whole range must be fake memory
  auto* f = new Fill32{reinterpret_cast<uint32_t*>(dst), value, n};
  const int err = rt.launch_host_func(stream, run_fill32, f);
  if (err != 0) delete f;
  check(err);
}
}  // namespace

FAKECU_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t n, CUstream stream) {
  return call([&](const RuntimeCalls& rt) { fill32(rt, dst, value, n, stream); });
}

FAKECU_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t n) {
  return call([&](const RuntimeCalls& rt) {
    fill32(rt, dst, value, n, nullptr);
    check(rt.stream_synchronize(nullptr));
  });
}

FAKECU_API CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, uint32_t value, unsigned int /*flags*/) {
  return call([&](const RuntimeCalls& rt) { fill32(rt, addr, value, 1, stream); });
}

FAKECU_API CUresult cuStreamSynchronize(CUstream stream) {
  return call([&](const RuntimeCalls& rt) { check(rt.stream_synchronize(stream)); });
}

// fakegpu's driver writes no logs of its own, so a callback is accepted and never called.
FAKECU_API CUresult cuLogsRegisterCallback(void (*)(void*, int, char*, size_t), void*, void** handle) {
  if (handle) *handle = reinterpret_cast<void*>(&cuLogsRegisterCallback);
  return kSuccess;
}
FAKECU_API CUresult cuLogsUnregisterCallback(void*) { return kSuccess; }
