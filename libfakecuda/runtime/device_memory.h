// Fake device memory: carved out of memfd-backed shared-memory segments, so that the
// coordinator can map a rank's buffers once and move collective data without copies through
// the socket, and so that another process can open an allocation by IPC handle. Segments are
// sparse: pages cost memory only once touched. Pinned host and managed allocations come from
// the same segments, so collectives on them take the zero-copy path too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace fakegpu::cuda {

enum class MemoryKind { kDevice, kHost, kManaged };

struct SegmentRef {
  uint64_t id = 0;     // unique within the process
  int fd = -1;         // -1 when the segment could not be made shareable
  uint64_t size = 0;
  uint64_t offset = 0;  // of the looked-up pointer within the segment
};

struct Allocation {
  void* base = nullptr;
  size_t bytes = 0;  // as requested
  MemoryKind kind = MemoryKind::kDevice;
  int device = 0;
  bool imported = false;  // opened from another process's IPC handle
};

// What an IPC handle carries: enough for another process to find and map the allocation.
struct IpcExport {
  uint64_t magic;
  int32_t pid;
  int32_t fd;  // the segment's descriptor in the exporting process
  uint64_t segment_size;
  uint64_t offset;  // of the allocation within the segment
  uint64_t bytes;
  int32_t device;
};

class DeviceMemory {
 public:
  static DeviceMemory& instance();
  // nullptr when the memory cannot be had. Device and managed memory count against the
  // device's capacity (`capacity`, bytes), so over-allocation fails as on a real GPU.
  void* allocate(size_t bytes, MemoryKind kind, int device, uint64_t capacity);
  // False when ptr is not the start of a live allocation of that kind (device covers managed).
  bool release(void* ptr, MemoryKind kind);
  // Whether [ptr, ptr + len) lies inside one segment, and where.
  bool find(const void* ptr, size_t len, SegmentRef* out) const;
  // The live allocation containing ptr, if any.
  bool lookup(const void* ptr, Allocation* out) const;
  // Bytes in use on the device, all parts (memory_ledger.h).
  uint64_t used_on(int device) const;

  // The driver's virtual memory family (cuMemAddressReserve, cuMemCreate, cuMemMap...). A
  // reserved range is a segment of its own, one memfd, so that buffers spanning several mapped
  // handles stay in one segment for the zero-copy data plane. A physical handle is capacity
  // counted against its device; mapping it makes its part of the range an allocation of device
  // memory, and unmapping drops that part's pages. nullptr / 0 / false on failure.
  void* reserve(size_t bytes);
  bool free_reservation(void* base);
  uint64_t create_physical(size_t bytes, int device, uint64_t capacity);
  bool release_physical(uint64_t handle);
  bool map_physical(void* at, size_t bytes, uint64_t handle);
  bool unmap_physical(void* at, size_t bytes);
  static constexpr size_t kGranularity = size_t{2} << 20;

  // IPC: describe an allocation for another process, and map one described so.
  bool export_allocation(const void* base, IpcExport* out) const;
  // nullptr with errno-style reason in *why when the exporter is gone or not reachable.
  void* import_allocation(const IpcExport& handle, const char** why);
  bool close_import(void* ptr);

 private:
  struct Segment {
    uint64_t id;
    int fd;
    uint8_t* base;
    size_t size;
    std::map<size_t, size_t> free;  // offset -> length, coalesced
    int32_t owner_pid = 0;          // for an imported segment: the exporter
    int32_t owner_fd = -1;
    int imports = 0;                // open IPC handles into an imported segment
    bool reserved = false;          // a virtual memory reservation: nothing is carved from it
  };
  struct Carved {
    Segment* segment;
    size_t length;  // rounded
    Allocation info;
    uint64_t physical = 0;  // the handle mapped there, for virtual memory
  };
  struct Physical {
    size_t bytes;
    int device;
    bool mapped;
  };
  Segment* new_segment(size_t min_bytes);
  static void* carve(Segment& s, size_t bytes);
  const Segment* segment_of(const void* ptr) const;
  const Carved* carved_at(const void* ptr) const;  // the allocation containing ptr

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::map<const uint8_t*, Carved> allocations_;  // by start
  std::map<uint64_t, Physical> physical_;          // virtual memory handles
  uint64_t next_id_ = 1;
};

}  // namespace fakegpu::cuda
