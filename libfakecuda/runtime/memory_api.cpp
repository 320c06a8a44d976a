// Memory: device, pinned host, managed and stream-ordered allocations, copies and sets, pointer
// attributes, symbols and IPC. All allocations live in shared segments (device_memory.h).
// Copies advance the stream's modeled clock by their time over PCIe or HBM.
#include <sys/mman.h>

#include <cstring>
#include <map>
#include <mutex>

#include "bridge.h"
#include "device_facts.h"
#include "device_memory.h"
#include "devices.h"
#include "kernel_registry.h"
#include "runtime_state.h"
#include "stream_ops.h"

using namespace fakegpu::cuda;

namespace {

DeviceMemory& memory() { return DeviceMemory::instance(); }

void* allocate(size_t bytes, MemoryKind kind) {
  const VirtualDevice& d = current();
  mark_context_active(current_device());  // the context exists first, and takes its share
  void* p = memory().allocate(bytes, kind, current_device(), d.memory_bytes);
  if (!p) throw cudaErrorMemoryAllocation;
  return p;
}

// Host ranges registered with cudaHostRegister: start -> length.
std::mutex registered_mu;
std::map<const char*, size_t> registered;

bool is_registered(const void* ptr) {
  std::lock_guard<std::mutex> lock(registered_mu);
  auto* p = static_cast<const char*>(ptr);
  auto it = registered.upper_bound(p);
  return it != registered.begin() && p < std::prev(it)->first + std::prev(it)->second;
}

bool on_device(const void* ptr) {
  Allocation a;
  return memory().lookup(ptr, &a) && a.kind != MemoryKind::kHost;
}

// Modeled copy time: over PCIe between host and device; within a device at HBM speed, where
// every byte is read and written.
int64_t copy_cost_ns(size_t bytes, const void* dst, const void* src) {
  const VirtualDevice* d = device_at(current_device());
  if (!d || bytes == 0) return 0;
  const bool from_device = on_device(src), to_device = on_device(dst);
  if (!from_device && !to_device) return 0;
  const double gbytes_per_s = from_device && to_device ? memory_gbytes_per_s(*d->profile) / 2
                                                       : pcie_copy_gbytes(*d->profile);
  return static_cast<int64_t>(bytes / gbytes_per_s);  // bytes / (GB/s) = ns
}

// Modeled memset time: every byte written once at HBM speed.
int64_t set_cost_ns(size_t bytes, const void* ptr) {
  const VirtualDevice* d = device_at(current_device());
  if (!d || bytes == 0 || !on_device(ptr)) return 0;
  return static_cast<int64_t>(bytes / memory_gbytes_per_s(*d->profile));
}

void check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) throw cudaErrorInvalidMemcpyDirection;
  if (count && (!dst || !src)) throw cudaErrorInvalidValue;
}

void copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind, cudaStream_t stream) {
  check_copy(dst, src, count, kind);
  submit(stream, [=] { std::memmove(dst, src, count); }, copy_cost_ns(count, dst, src), kCopyWork);
}

void copy_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height, cudaMemcpyKind kind,
             cudaStream_t stream) {
  if (width > dpitch || width > spitch) throw cudaErrorInvalidPitchValue;
  check_copy(dst, src, width * height, kind);
  submit(stream, [=] {
    for (size_t row = 0; row < height; ++row)
      std::memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch, width);
  }, copy_cost_ns(width * height, dst, src), kCopyWork);
}

void set(void* ptr, int value, size_t count, cudaStream_t stream) {
  if (count && !ptr) throw cudaErrorInvalidValue;
  submit(stream, [=] { std::memset(ptr, value, count); }, set_cost_ns(count, ptr), kKernelWork);
}

void set_2d(void* ptr, size_t pitch, int value, size_t width, size_t height, cudaStream_t stream) {
  if (width > pitch) throw cudaErrorInvalidPitchValue;
  if (width && height && !ptr) throw cudaErrorInvalidValue;
  submit(stream, [=] {
    for (size_t row = 0; row < height; ++row) std::memset(static_cast<char*>(ptr) + row * pitch, value, width);
  }, set_cost_ns(width * height, ptr), kKernelWork);
}

// A __device__ variable's storage is its host shadow, registered by __cudaRegisterVar.
char* symbol_storage(const void* symbol, size_t offset, size_t count) {
  size_t size = 0;
  if (!symbol || !registered_variable(symbol, &size)) throw cudaErrorInvalidSymbol;
  if (offset > size || count > size - offset) throw cudaErrorInvalidValue;
  return const_cast<char*>(static_cast<const char*>(symbol)) + offset;
}

}  // namespace

FAKECUDA_API cudaError_t cudaMalloc(void** ptr, size_t size) {
  return guarded([&] {
    if (!ptr) throw cudaErrorInvalidValue;
    *ptr = size ? allocate(size, MemoryKind::kDevice) : nullptr;
  });
}

FAKECUDA_API cudaError_t cudaFree(void* ptr) {
  return guarded([&] {
    if (ptr && !memory().release(ptr, MemoryKind::kDevice)) throw cudaErrorInvalidDevicePointer;
  });
}

FAKECUDA_API cudaError_t cudaMallocManaged(void** ptr, size_t size, unsigned int flags) {
  return guarded([&] {
    if (!ptr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost)) throw cudaErrorInvalidValue;
    *ptr = allocate(size, MemoryKind::kManaged);
  });
}

FAKECUDA_API cudaError_t cudaMallocPitch(void** ptr, size_t* pitch, size_t width, size_t height) {
  return guarded([&] {
    if (!ptr || !pitch) throw cudaErrorInvalidValue;
    *pitch = (width + 511) / 512 * 512;
    *ptr = (*pitch * height) != 0 ? allocate(*pitch * height, MemoryKind::kDevice) : nullptr;
  });
}

// Stream-ordered allocation: the memory exists at once (which is always safe); freeing waits
// for the stream to reach the free.
FAKECUDA_API cudaError_t cudaMallocAsync(void** ptr, size_t size, cudaStream_t stream) {
  return guarded([&] {
    if (!ptr) throw cudaErrorInvalidValue;
    if (is_capturing(stream)) {
      // A graph would need a fresh allocation per replay; fakegpu's graphs replay recorded work.
      log_once("cudaMallocAsync", "not supported inside stream capture by fakegpu");
      throw cudaErrorStreamCaptureUnsupported;
    }
    *ptr = size ? allocate(size, MemoryKind::kDevice) : nullptr;
  });
}

FAKECUDA_API cudaError_t cudaFreeAsync(void* ptr, cudaStream_t stream) {
  return guarded([&] {
    if (!ptr) return;
    if (!on_device(ptr)) throw cudaErrorInvalidValue;
    if (is_capturing(stream)) {
      log_once("cudaFreeAsync", "not supported inside stream capture by fakegpu");
      throw cudaErrorStreamCaptureUnsupported;
    }
    submit(stream, [ptr] { memory().release(ptr, MemoryKind::kDevice); });
  });
}

FAKECUDA_API cudaError_t cudaMallocHost(void** ptr, size_t size) {
  return guarded([&] {
    if (!ptr) throw cudaErrorInvalidValue;
    *ptr = allocate(size, MemoryKind::kHost);
  });
}

FAKECUDA_API cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  return guarded([&] {
    if (!ptr || (flags & ~0x7u)) throw cudaErrorInvalidValue;
    *ptr = allocate(size, MemoryKind::kHost);
  });
}

FAKECUDA_API cudaError_t cudaFreeHost(void* ptr) {
  return guarded([&] {
    if (ptr && !memory().release(ptr, MemoryKind::kHost)) throw cudaErrorInvalidValue;
  });
}

// Unified addressing: a mapped host pointer is its own device pointer.
FAKECUDA_API cudaError_t cudaHostGetDevicePointer(void** device_ptr, void* host_ptr, unsigned int flags) {
  return guarded([&] {
    if (!device_ptr || flags != 0) throw cudaErrorInvalidValue;
    Allocation a;
    bool pinned = memory().lookup(host_ptr, &a) && a.kind == MemoryKind::kHost;
    if (!pinned && !is_registered(host_ptr)) throw cudaErrorInvalidValue;
    *device_ptr = host_ptr;
  });
}

FAKECUDA_API cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  return guarded([&] {
    if (!ptr || size == 0 || (flags & ~0xfu)) throw cudaErrorInvalidValue;
    auto* p = static_cast<const char*>(ptr);
    std::lock_guard<std::mutex> lock(registered_mu);
    auto next = registered.lower_bound(p);
    bool overlaps_next = next != registered.end() && next->first < p + size;
    bool overlaps_prev = next != registered.begin() && std::prev(next)->first + std::prev(next)->second > p;
    if (overlaps_next || overlaps_prev) throw cudaErrorHostMemoryAlreadyRegistered;
    registered[p] = size;
  });
}

FAKECUDA_API cudaError_t cudaHostUnregister(void* ptr) {
  return guarded([&] {
    std::lock_guard<std::mutex> lock(registered_mu);
    if (!registered.erase(static_cast<const char*>(ptr))) throw cudaErrorHostMemoryNotRegistered;
  });
}

FAKECUDA_API cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  return guarded([&] {
    const VirtualDevice& d = current();
    mark_context_active(current_device());  // as any runtime call, it makes the context, which takes its share
    uint64_t used = memory().used_on(current_device());
    if (free_bytes) *free_bytes = d.memory_bytes - std::min(used, d.memory_bytes);
    if (total_bytes) *total_bytes = d.memory_bytes;
  });
}

// CUDA 12's struct is the first four fields of CUDA 13's: write only what the caller has.
FAKECUDA_API cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
  return guarded([&] {
    if (!attr) throw cudaErrorInvalidValue;
    cudaPointerAttributes out{};
    Allocation a;
    if (memory().lookup(ptr, &a)) {
      out.device = a.device;
      switch (a.kind) {
        case MemoryKind::kDevice: out.type = cudaMemoryTypeDevice, out.devicePointer = const_cast<void*>(ptr); break;
        case MemoryKind::kManaged: out.type = cudaMemoryTypeManaged, out.devicePointer = out.hostPointer = const_cast<void*>(ptr); break;
        case MemoryKind::kHost: out.type = cudaMemoryTypeHost, out.devicePointer = out.hostPointer = const_cast<void*>(ptr); break;
      }
    } else if (ptr && is_registered(ptr)) {
      out.type = cudaMemoryTypeHost;
      out.device = current_device();
      out.devicePointer = out.hostPointer = const_cast<void*>(ptr);
    } else {
      out.type = cudaMemoryTypeUnregistered;
      out.device = -2;
    }
    std::memcpy(attr, &out, FAKEGPU_CUDART_MAJOR >= 13 ? sizeof out : offsetof(cudaPointerAttributes, reserved));
  });
}

// The host waits for a synchronous copy, so what it queues next starts after it.
FAKECUDA_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return guarded([&] {
    copy(dst, src, count, kind, nullptr);
    host_clock().raise_to(legacy_stream_clock().now_ns());
  });
}

FAKECUDA_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  return guarded([&] { copy(dst, src, count, kind, stream); });
}

FAKECUDA_API cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                      size_t height, cudaMemcpyKind kind) {
  return guarded([&] { copy_2d(dst, dpitch, src, spitch, width, height, kind, nullptr); });
}

FAKECUDA_API cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                           size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
  return guarded([&] { copy_2d(dst, dpitch, src, spitch, width, height, kind, stream); });
}

FAKECUDA_API cudaError_t cudaMemcpyPeer(void* dst, int /*dst_device*/, const void* src, int /*src_device*/,
                                        size_t count) {
  return guarded([&] { copy(dst, src, count, cudaMemcpyDeviceToDevice, nullptr); });
}

FAKECUDA_API cudaError_t cudaMemcpyPeerAsync(void* dst, int /*dst_device*/, const void* src, int /*src_device*/,
                                             size_t count, cudaStream_t stream) {
  return guarded([&] { copy(dst, src, count, cudaMemcpyDeviceToDevice, stream); });
}

FAKECUDA_API cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  return guarded([&] { set(ptr, value, count, nullptr); });
}

FAKECUDA_API cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  return guarded([&] { set(ptr, value, count, stream); });
}

FAKECUDA_API cudaError_t cudaMemset2D(void* ptr, size_t pitch, int value, size_t width, size_t height) {
  return guarded([&] { set_2d(ptr, pitch, value, width, height, nullptr); });
}

FAKECUDA_API cudaError_t cudaMemset2DAsync(void* ptr, size_t pitch, int value, size_t width, size_t height,
                                           cudaStream_t stream) {
  return guarded([&] { set_2d(ptr, pitch, value, width, height, stream); });
}

FAKECUDA_API cudaError_t cudaMemcpyToSymbol(const void* symbol, const void* src, size_t count, size_t offset,
                                            cudaMemcpyKind kind) {
  return guarded([&] { copy(symbol_storage(symbol, offset, count), src, count, kind, nullptr); });
}

FAKECUDA_API cudaError_t cudaMemcpyToSymbolAsync(const void* symbol, const void* src, size_t count, size_t offset,
                                                 cudaMemcpyKind kind, cudaStream_t stream) {
  return guarded([&] { copy(symbol_storage(symbol, offset, count), src, count, kind, stream); });
}

FAKECUDA_API cudaError_t cudaMemcpyFromSymbol(void* dst, const void* symbol, size_t count, size_t offset,
                                              cudaMemcpyKind kind) {
  return guarded([&] { copy(dst, symbol_storage(symbol, offset, count), count, kind, nullptr); });
}

FAKECUDA_API cudaError_t cudaMemcpyFromSymbolAsync(void* dst, const void* symbol, size_t count, size_t offset,
                                                   cudaMemcpyKind kind, cudaStream_t stream) {
  return guarded([&] { copy(dst, symbol_storage(symbol, offset, count), count, kind, stream); });
}

FAKECUDA_API cudaError_t cudaGetSymbolAddress(void** ptr, const void* symbol) {
  return guarded([&] {
    if (!ptr) throw cudaErrorInvalidValue;
    *ptr = symbol_storage(symbol, 0, 0);
  });
}

FAKECUDA_API cudaError_t cudaGetSymbolSize(size_t* size, const void* symbol) {
  return guarded([&] {
    if (!size) throw cudaErrorInvalidValue;
    if (!symbol || !registered_variable(symbol, size)) throw cudaErrorInvalidSymbol;
  });
}

// ---- IPC: the handle names the exporter's process and segment; the opener maps it. ----

static_assert(sizeof(IpcExport) <= sizeof(cudaIpcMemHandle_t), "an IPC export fits a CUDA IPC handle");

FAKECUDA_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* ptr) {
  return guarded([&] {
    if (!handle || !ptr) throw cudaErrorInvalidValue;
    IpcExport e;
    if (!memory().export_allocation(ptr, &e)) throw cudaErrorInvalidValue;  // not the start of device memory
    std::memset(handle, 0, sizeof *handle);
    std::memcpy(handle->reserved, &e, sizeof e);
  });
}

FAKECUDA_API cudaError_t cudaIpcOpenMemHandle(void** ptr, cudaIpcMemHandle_t handle, unsigned int flags) {
  return guarded([&] {
    if (!ptr || (flags & ~0x1u)) throw cudaErrorInvalidValue;
    IpcExport e;
    std::memcpy(&e, handle.reserved, sizeof e);
    const char* why = "";
    void* p = memory().import_allocation(e, &why);
    if (!p) {
      log_once("cudaIpcOpenMemHandle", why);
      throw cudaErrorInvalidResourceHandle;
    }
    *ptr = p;
  });
}

FAKECUDA_API cudaError_t cudaIpcCloseMemHandle(void* ptr) {
  return guarded([&] {
    if (!memory().close_import(ptr)) throw cudaErrorInvalidValue;
  });
}

namespace fakegpu::cuda {

// For fakegpu's NCCL, through the bridge: whether [ptr, ptr + len) is fake device memory in a
// shareable segment, and which. Returns 1 and fills the outputs when it is.
int find_segment(const void* ptr, size_t len, uint64_t* segment_id, uint64_t* offset, int* fd, uint64_t* segment_size) {
  SegmentRef ref;
  if (!ptr || !memory().find(ptr, len, &ref) || ref.fd < 0) return 0;
  *segment_id = ref.id;
  *offset = ref.offset;
  *fd = ref.fd;
  *segment_size = ref.size;
  return 1;
}

// For fakegpu's driver API (cuMemGetAddressRange, cuPointerGetAttribute), through the bridge:
// the live allocation holding ptr. Returns 1 and fills its start, size, kind (0 device, 1 host,
// 2 managed) and device when there is one.
int allocation_of(const void* ptr, void** base, size_t* bytes, int* kind, int* device) {
  Allocation a;
  if (!ptr || !memory().lookup(ptr, &a)) return 0;
  *base = a.base;
  *bytes = a.bytes;
  *kind = a.kind == MemoryKind::kDevice ? 0 : a.kind == MemoryKind::kHost ? 1 : 2;
  *device = a.device;
  return 1;
}

}  // namespace fakegpu::cuda

// Texture channel descriptions are plain data, returned by value (not through the
// unsupported table, whose stubs return an int).
struct ChannelFormatDesc {
  int x, y, z, w;
  int f;
};
FAKECUDA_API ChannelFormatDesc cudaCreateChannelDesc(int x, int y, int z, int w, int f) { return {x, y, z, w, f}; }
