// Fake CUDA runtime: the process's devices and their properties. Devices come from the
// cluster YAML or a GPU profile (devices.h); memory is in memory_api.cpp; streams, events and
// graphs in stream_api.cpp, event_api.cpp and graph_api.cpp (over stream_registry.h); kernels in
// kernel_api.cpp.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "bridge.h"
#include "context_memory.h"
#include "device_facts.h"
#include "devices.h"
#include "runtime_state.h"

namespace fakegpu::cuda {

thread_local cudaError_t t_last_error = cudaSuccess;

int device_count() { return static_cast<int>(catalogue().devices.size()); }

int& current_device() {
  thread_local int device = 0;
  return device;
}

const VirtualDevice& device_or_throw(int ordinal) {
  const VirtualDevice* d = device_at(ordinal);
  if (!d) throw device_count() ? cudaErrorInvalidDevice : cudaErrorNoDevice;
  return *d;
}

const VirtualDevice& current() { return device_or_throw(current_device()); }

namespace {
std::mutex active_mu;
std::set<int> active_contexts;
}  // namespace

void mark_context_active(int device) {
  // PyTorch's device guards set the device around most calls: skip the lock when this thread
  // has already marked it.
  thread_local int marked = -1;
  if (marked == device) return;
  bool made = false;
  {
    std::lock_guard<std::mutex> lock(active_mu);
    made = active_contexts.insert(device).second;
  }
  marked = device;
  if (made) charge_context(device);
}

cudaError_t fail(cudaError_t e) {
  t_last_error = e;
  return e;
}

}  // namespace fakegpu::cuda

namespace {

using namespace fakegpu::cuda;

// Peer access enabled from (current device) to (peer), per process as in CUDA.
std::mutex peer_mu;
std::set<std::pair<int, int>> peers_enabled;
// Atomic, like limits below: any thread may set them while others read them.
std::atomic<unsigned int> device_flags{0};

// Peer access needs the two GPUs on one node, joined by NVLink or both able to do it over PCIe
// (consumer parts cannot: gpu_types' p2p: false).
bool peer_reachable(int a, int b) {
  const VirtualDevice &x = device_or_throw(a), &y = device_or_throw(b);
  const bool nvlink = x.profile->nvlink_links > 0 && y.profile->nvlink_links > 0;
  return x.node == y.node && (nvlink || (x.profile->p2p && y.profile->p2p));
}

}  // namespace

namespace fakegpu::cuda {

// For fakegpu's driver API (cuDeviceGetName, cuDeviceGetUuid, cuDeviceTotalMem), through the bridge.
cudaError_t device_identity(int device, char name[256], unsigned char uuid[16], uint64_t* memory_bytes) {
  return guarded([&] {
    cudaDeviceProp prop;
    fill_properties(device_or_throw(device), &prop);
    std::memcpy(name, prop.name, sizeof prop.name);
    std::memcpy(uuid, prop.uuid.bytes, 16);
    *memory_bytes = prop.totalGlobalMem;
  });
}

// For fakegpu's driver API (cuDevicePrimaryCtxGetState), through the bridge.
bool primary_context_active(int device) {
  std::lock_guard<std::mutex> lock(active_mu);
  return active_contexts.count(device) > 0;
}

}  // namespace fakegpu::cuda

FAKECUDA_API cudaError_t cudaGetDeviceCount(int* count) {
  return guarded([&] {
    if (!count) throw cudaErrorInvalidValue;
    *count = device_count();
    if (!catalogue().error.empty()) throw cudaErrorInitializationError;
    if (*count == 0) throw cudaErrorNoDevice;
  });
}

FAKECUDA_API cudaError_t cudaSetDevice(int device) {
  return guarded([&] {
    device_or_throw(device);
    current_device() = device;
    mark_context_active(device);
  });
}

FAKECUDA_API cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail(cudaErrorInvalidValue);
  *device = current_device();
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaInitDevice(int device, unsigned int /*deviceFlags*/, unsigned int /*flags*/) {
  return guarded([&] {
    device_or_throw(device);
    mark_context_active(device);
  });
}

FAKECUDA_API cudaError_t cudaSetDeviceFlags(unsigned int flags) {
  return guarded([&] {
    if (flags & ~0x1fu) throw cudaErrorInvalidValue;
    device_flags = flags;
  });
}

FAKECUDA_API cudaError_t cudaGetDeviceFlags(unsigned int* flags) {
  return guarded([&] {
    if (!flags) throw cudaErrorInvalidValue;
    *flags = device_flags | cudaDeviceMapHost;
  });
}

FAKECUDA_API cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  return guarded([&] {
    if (!value) throw cudaErrorInvalidValue;
    auto v = device_attribute(device_or_throw(device), attr);
    if (!v) throw cudaErrorInvalidValue;
    *value = *v;
  });
}

// CUDA 13 exports cudaGetDeviceProperties, filling the 13 layout. CUDA 12's header maps the
// name to cudaGetDeviceProperties_v2 (the 12 layout); its unversioned export keeps the CUDA 11
// layout for old binaries.
#if FAKEGPU_CUDART_MAJOR >= 13
FAKECUDA_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return guarded([&] {
    if (!prop) throw cudaErrorInvalidValue;
    fill_properties(device_or_throw(device), prop);
  });
}
#else
namespace {
cudaError_t get_properties_cuda12(void* prop, int device, size_t bytes) {
  return guarded([&] {
    if (!prop) throw cudaErrorInvalidValue;
    fill_properties_cuda12(device_or_throw(device), prop, bytes);
  });
}
}  // namespace

FAKECUDA_API cudaError_t cudaGetDeviceProperties_v2(cudaDeviceProp* prop, int device) {
  return get_properties_cuda12(prop, device, kCuda12PropertiesBytes);
}

FAKECUDA_API cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  return get_properties_cuda12(prop, device, kCuda11PropertiesBytes);
}
#endif

FAKECUDA_API cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  return guarded([&] {
    if (!bus_id || len <= 0) throw cudaErrorInvalidValue;
    std::string id = device_or_throw(device).bus_id();
    std::snprintf(bus_id, static_cast<size_t>(len), "%s", id.c_str());
  });
}

FAKECUDA_API cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus_id) {
  return guarded([&] {
    if (!device || !bus_id) throw cudaErrorInvalidValue;
    // Accepts "dddd:bb:dd.f", "bb:dd.f" and any letter case, as CUDA does.
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) {
      domain = 0;
      if (std::sscanf(bus_id, "%x:%x.%x", &bus, &dev, &fn) != 3) throw cudaErrorInvalidValue;
    }
    for (int i = 0; i < device_count(); ++i) {
      const VirtualDevice& d = *device_at(i);
      if (static_cast<unsigned>(d.pci_domain) == domain && static_cast<unsigned>(d.pci_bus) == bus && dev == 0 && fn == 0) {
        *device = i;
        return;
      }
    }
    throw cudaErrorInvalidDevice;
  });
}

// Peers on one node reach each other (see peer_reachable); devices of different virtual nodes
// never share a process on a real cluster, so they cannot.
FAKECUDA_API cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  return guarded([&] {
    if (!can) throw cudaErrorInvalidValue;
    *can = device != peer && peer_reachable(device, peer) ? 1 : 0;
  });
}

FAKECUDA_API cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  return guarded([&] {
    if (flags != 0) throw cudaErrorInvalidValue;
    int self = current_device();
    if (peer == self || !peer_reachable(self, peer)) throw cudaErrorPeerAccessUnsupported;
    std::lock_guard<std::mutex> lock(peer_mu);
    if (!peers_enabled.insert({self, peer}).second) throw cudaErrorPeerAccessAlreadyEnabled;
  });
}

FAKECUDA_API cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  return guarded([&] {
    device_or_throw(peer);
    std::lock_guard<std::mutex> lock(peer_mu);
    if (!peers_enabled.erase({current_device(), peer})) throw cudaErrorPeerAccessNotEnabled;
  });
}

FAKECUDA_API cudaError_t cudaDeviceGetP2PAttribute(int* value, cudaDeviceP2PAttr attr, int src, int dst) {
  return guarded([&] {
    if (!value || src == dst) throw cudaErrorInvalidDevice;
    bool reach = peer_reachable(src, dst);
    switch (attr) {
      case cudaDevP2PAttrPerformanceRank: *value = 0; break;
      case cudaDevP2PAttrAccessSupported:
      case cudaDevP2PAttrNativeAtomicSupported: *value = reach ? 1 : 0; break;
      case cudaDevP2PAttrCudaArrayAccessSupported: *value = 0; break;
      default: throw cudaErrorInvalidValue;
    }
  });
}

namespace {
std::atomic<size_t> limits[7] = {1024, 1 << 20, 8 << 20, 2, 2048, 64, 0};
}

FAKECUDA_API cudaError_t cudaDeviceGetLimit(size_t* value, cudaLimit limit) {
  return guarded([&] {
    if (!value || limit < 0 || limit > cudaLimitPersistingL2CacheSize) throw cudaErrorUnsupportedLimit;
    *value = limits[limit];
  });
}

FAKECUDA_API cudaError_t cudaDeviceSetLimit(cudaLimit limit, size_t value) {
  return guarded([&] {
    if (limit < 0 || limit > cudaLimitPersistingL2CacheSize) throw cudaErrorUnsupportedLimit;
    limits[limit] = value;
  });
}

FAKECUDA_API cudaError_t cudaDeviceGetStreamPriorityRange(int* least, int* greatest) {
  if (least) *least = 0;
  if (greatest) *greatest = -5;
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return fail(cudaErrorInvalidValue);
  *version = FAKEGPU_CUDART_MAJOR * 1000;
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaDriverGetVersion(int* version) { return cudaRuntimeGetVersion(version); }

FAKECUDA_API cudaError_t cudaGetLastError(void) {
  cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}

FAKECUDA_API cudaError_t cudaPeekAtLastError(void) { return t_last_error; }
