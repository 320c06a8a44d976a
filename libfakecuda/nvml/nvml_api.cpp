// fakegpu's NVML (libnvidia-ml.so.1): the device queries PyTorch and monitoring code make, answered
// from the fake runtime loaded in the process, so that NVML, the driver and the runtime name the
// same devices. PyTorch resolves NVML's functions when it finds the library and calls them without
// checking (symmetric memory asks NVML for the GPU's fabric): without one, such a call jumps to
// a null pointer. What fakegpu does not model (NVLink state, sensors) returns
// NVML_ERROR_NOT_SUPPORTED and logs one line naming the call. The types are NVML's, spelled with
// their ABI: nvmlReturn_t and enums are int, handles are pointers.
#include <strings.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "../driver/runtime_calls.h"
#include "log_once.h"

#define NVML_API extern "C" __attribute__((visibility("default")))

using fakegpu::log_once;
using fakegpu::driver::RuntimeCalls;

const char* const fakegpu::driver::kRuntimeCaller = "libnvidia-ml.so.1";

namespace {

using nvmlReturn_t = int;
enum : nvmlReturn_t {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kNotFound = 6,
  kInsufficientSize = 7,
  kDriverNotLoaded = 9,
  kUnknown = 999,
};

// A device handle points at its index; one per device the runtime can have.
struct Device {
  int index;
};
constexpr int kMaxDevices = 64;
Device g_devices[kMaxDevices];
using nvmlDevice_t = Device*;

struct nvmlPciInfo_t {  // nvmlPciInfo_st, as NVML's versions 2 and 3 lay it out
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct nvmlGpuFabricInfoV_t {  // version 2
  unsigned int version;
  unsigned char clusterUuid[16];
  nvmlReturn_t status;
  unsigned int cliqueId;
  unsigned char state;
  unsigned int healthMask;
};
constexpr unsigned char kFabricNotSupported = 0;
constexpr unsigned int kNvidiaVendor = 0x10de;

struct NvmlError {
  nvmlReturn_t code;
};

void check(int cuda_error) {
  if (cuda_error == 101) throw NvmlError{kInvalidArgument};  // cudaErrorInvalidDevice
  if (cuda_error != 0) throw NvmlError{kUnknown};
}

void require(bool ok, nvmlReturn_t code = kInvalidArgument) {
  if (!ok) throw NvmlError{code};
}

// Every call goes through here: the one place where a failure becomes an nvmlReturn_t.
template <typename Body>
nvmlReturn_t call(Body&& body) noexcept {
  if (!fakegpu::driver::runtime_loaded()) {
    log_once("libnvidia-ml.so.1", "fakegpu's NVML needs fakegpu's CUDA runtime in the process; none is loaded");
    return kDriverNotLoaded;
  }
  try {
    body(fakegpu::driver::runtime());
    return kSuccess;
  } catch (const NvmlError& e) {
    return e.code;
  } catch (...) {
    return kUnknown;
  }
}

int device_count(const RuntimeCalls& rt) {
  int n = 0;
  check(rt.get_device_count(&n));
  return n < kMaxDevices ? n : kMaxDevices;
}

int index_of(const RuntimeCalls& rt, nvmlDevice_t device) {
  require(device != nullptr && device >= g_devices && device < g_devices + device_count(rt));
  return device->index;
}

nvmlDevice_t handle(int index) {
  g_devices[index].index = index;
  return &g_devices[index];
}

// The handle of the first device that matches; NVML_ERROR_NOT_FOUND when none does.
template <typename Match>
nvmlDevice_t first_device(const RuntimeCalls& rt, Match&& match) {
  for (int i = 0; i < device_count(rt); ++i)
    if (match(i)) return handle(i);
  throw NvmlError{kNotFound};
}

fakegpu::driver::DeviceIdentity identity(const RuntimeCalls& rt, int index) {
  return fakegpu::driver::device_identity(rt, index, check);
}

int attribute(const RuntimeCalls& rt, int index, int attr) {
  int value = 0;
  check(rt.device_get_attribute(&value, attr, index));
  return value;
}
enum { kPciBusId = 33, kPciDeviceId = 34, kComputeMajor = 75, kComputeMinor = 76, kPciDomainId = 50 };

// NVML spells bus ids with an eight-digit domain ("00000000:18:00.0"); CUDA with four.
void nvml_bus_id(const RuntimeCalls& rt, int index, char* out, size_t len) {
  std::snprintf(out, len, "%08x:%02x:%02x.0", attribute(rt, index, kPciDomainId), attribute(rt, index, kPciBusId),
                attribute(rt, index, kPciDeviceId));
}

bool same_bus_id(const char* a, const char* b) {
  unsigned domain[2], bus[2], dev[2], fn[2];
  const char* ids[2] = {a, b};
  for (int i = 0; i < 2; ++i) {
    fn[i] = 0;
    if (std::sscanf(ids[i], "%x:%x:%x.%x", &domain[i], &bus[i], &dev[i], &fn[i]) < 3) return false;
  }
  return domain[0] == domain[1] && bus[0] == bus[1] && dev[0] == dev[1] && fn[0] == fn[1];
}

void copy_string(char* out, unsigned int len, const char* value) {
  require(out != nullptr);
  require(std::strlen(value) < len, kInsufficientSize);
  std::snprintf(out, len, "%s", value);
}

void format_uuid(const unsigned char u[16], char* out, size_t len) {
  std::snprintf(out, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
                u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

nvmlReturn_t not_simulated(const char* name) {
  log_once(name, "not simulated by fakegpu's NVML");
  return kNotSupported;
}

}  // namespace

// ---- initialisation and the system

NVML_API nvmlReturn_t nvmlInit_v2() {
  return call([](const RuntimeCalls& rt) { device_count(rt); });
}
NVML_API nvmlReturn_t nvmlInit() { return nvmlInit_v2(); }
NVML_API nvmlReturn_t nvmlInitWithFlags(unsigned int) { return nvmlInit_v2(); }
NVML_API nvmlReturn_t nvmlShutdown() { return kSuccess; }

NVML_API const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case kSuccess: return "Success";
    case kUninitialized: return "Uninitialized";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kNotFound: return "Not Found";
    case kInsufficientSize: return "Insufficient Size";
    case kDriverNotLoaded: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return call([&](const RuntimeCalls& rt) {
    require(version != nullptr);
    check(rt.driver_get_version(version));
  });
}
NVML_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) { return nvmlSystemGetCudaDriverVersion_v2(version); }

// The kernel driver's version: the first branch that ships CUDA 13, which the runtime reports.
NVML_API nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return call([&](const RuntimeCalls&) { copy_string(version, length, "580.65.06"); });
}
NVML_API nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  return call([&](const RuntimeCalls&) { copy_string(version, length, "13.580.65.06"); });
}

// ---- devices and handles

NVML_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return call([&](const RuntimeCalls& rt) {
    require(count != nullptr);
    *count = static_cast<unsigned int>(device_count(rt));
  });
}
NVML_API nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return nvmlDeviceGetCount_v2(count); }

NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return call([&](const RuntimeCalls& rt) {
    require(device != nullptr && index < static_cast<unsigned int>(device_count(rt)));
    *device = handle(static_cast<int>(index));
  });
}
NVML_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, nvmlDevice_t* device) {
  return call([&](const RuntimeCalls& rt) {
    require(bus_id != nullptr && device != nullptr);
    *device = first_device(rt, [&](int i) {
      char id[32];
      nvml_bus_id(rt, i, id, sizeof id);
      return same_bus_id(id, bus_id);
    });
  });
}
NVML_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* bus_id, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}

NVML_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return call([&](const RuntimeCalls& rt) {
    require(uuid != nullptr && device != nullptr);
    *device = first_device(rt, [&](int i) {
      char text[64];
      format_uuid(identity(rt, i).uuid, text, sizeof text);
      return strcasecmp(text, uuid) == 0;
    });
  });
}

NVML_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  return call([&](const RuntimeCalls& rt) {
    require(index != nullptr);
    *index = static_cast<unsigned int>(index_of(rt, device));
  });
}

NVML_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return call([&](const RuntimeCalls& rt) { copy_string(name, length, identity(rt, index_of(rt, device)).name); });
}

NVML_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return call([&](const RuntimeCalls& rt) {
    char text[64];
    format_uuid(identity(rt, index_of(rt, device)).uuid, text, sizeof text);
    copy_string(uuid, length, text);
  });
}

NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return call([&](const RuntimeCalls& rt) {
    require(pci != nullptr);
    const int i = index_of(rt, device);
    *pci = nvmlPciInfo_t{};
    pci->domain = static_cast<unsigned int>(attribute(rt, i, kPciDomainId));
    pci->bus = static_cast<unsigned int>(attribute(rt, i, kPciBusId));
    pci->device = static_cast<unsigned int>(attribute(rt, i, kPciDeviceId));
    pci->pciDeviceId = kNvidiaVendor;  // the vendor in the low half; fakegpu has no product id
    nvml_bus_id(rt, i, pci->busId, sizeof pci->busId);
    std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.0", pci->domain, pci->bus, pci->device);
  });
}
NVML_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return nvmlDeviceGetPciInfo_v3(device, pci);
}

NVML_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  return call([&](const RuntimeCalls& rt) {
    require(major != nullptr && minor != nullptr);
    const int i = index_of(rt, device);
    *major = attribute(rt, i, kComputeMajor);
    *minor = attribute(rt, i, kComputeMinor);
  });
}

// Memory in use is what the process's runtime has allocated on the device (NVML counts every
// process; a rank sees its own). Asked of the device directly: NVML makes no device current.
NVML_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return call([&](const RuntimeCalls& rt) {
    require(memory != nullptr);
    const int i = index_of(rt, device);
    const uint64_t total = identity(rt, i).memory_bytes, used = rt.bridge->device_memory_used(i);
    *memory = nvmlMemory_t{total, total - used, used};
  });
}

// This process is the one computing on its fake GPU, with what the runtime counts in use there
// (context included), as NVML reports a process; PyTorch's out-of-memory message quotes it.
// Before it has used the device, none. Versions 2 and 3 add two instance ids (no MIG: ~0u).
template <typename Info>
nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int* count, Info* infos, void (*fill)(Info*)) {
  nvmlReturn_t result = kSuccess;
  const nvmlReturn_t called = call([&](const RuntimeCalls& rt) {
    const int i = index_of(rt, device);
    require(count != nullptr);
    const uint64_t used = rt.bridge->device_memory_used(i);
    if (used == 0) {
      *count = 0;
      return;
    }
    if (*count < 1 || !infos) {
      *count = 1;
      result = kInsufficientSize;
      return;
    }
    *count = 1;
    infos->pid = static_cast<unsigned int>(getpid());
    infos->usedGpuMemory = used;
    fill(infos);
  });
  return called != kSuccess ? called : result;
}

struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
};

NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                          nvmlProcessInfo_v1_t* infos) {
  return running_processes<nvmlProcessInfo_v1_t>(device, count, infos, [](nvmlProcessInfo_v1_t*) {});
}
NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                             nvmlProcessInfo_v2_t* infos) {
  return running_processes<nvmlProcessInfo_v2_t>(device, count, infos, [](nvmlProcessInfo_v2_t* info) {
    info->gpuInstanceId = info->computeInstanceId = ~0u;
  });
}
NVML_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                             nvmlProcessInfo_v2_t* infos) {
  return nvmlDeviceGetComputeRunningProcesses_v3(device, count, infos);
}

// No multi-node NVLink fabric: programs (PyTorch's symmetric memory) share memory by file
// descriptors instead of fabric handles.
NVML_API nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t* info) {
  return call([&](const RuntimeCalls& rt) {
    index_of(rt, device);
    require(info != nullptr);
    info->state = kFabricNotSupported;
    info->status = kNotSupported;
  });
}

// ---- what fakegpu does not model

NVML_API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t, unsigned int, int*) {
  return not_simulated("nvmlDeviceGetNvLinkState");
}
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t, unsigned int, int*) {
  return not_simulated("nvmlDeviceGetNvLinkRemoteDeviceType");
}
NVML_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t, unsigned int, nvmlPciInfo_t*) {
  return not_simulated("nvmlDeviceGetNvLinkRemotePciInfo_v2");
}
NVML_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t, void*) {
  return not_simulated("nvmlDeviceGetUtilizationRates");
}
NVML_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t, int, unsigned int*) {
  return not_simulated("nvmlDeviceGetTemperature");
}
NVML_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t, unsigned int*) {
  return not_simulated("nvmlDeviceGetPowerUsage");
}
NVML_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t, int, unsigned int*) {
  return not_simulated("nvmlDeviceGetClockInfo");
}
