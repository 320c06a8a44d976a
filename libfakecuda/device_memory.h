// Fake device memory: carved out of memfd-backed shared-memory segments, so that the
// coordinator can map a rank's buffers once and move collective data without copies through
// the socket. Segments are sparse: pages cost memory only once touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fakegpu::cuda {

struct SegmentRef {
  uint64_t id = 0;     // unique within the process
  int fd = -1;         // -1 when the segment could not be made shareable
  uint64_t size = 0;
  uint64_t offset = 0;  // of the looked-up pointer within the segment
};

class DeviceMemory {
 public:
  static DeviceMemory& instance();
  // nullptr when the memory cannot be had.
  void* allocate(size_t bytes);
  // False when ptr is not the start of a live allocation.
  bool release(void* ptr);
  // Whether [ptr, ptr + len) lies inside one segment, and where.
  bool find(const void* ptr, size_t len, SegmentRef* out) const;

 private:
  struct Segment {
    uint64_t id;
    int fd;
    uint8_t* base;
    size_t size;
    std::map<size_t, size_t> free;  // offset -> length, coalesced
  };
  Segment* new_segment(size_t min_bytes);
  static void* carve(Segment& s, size_t bytes);
  const Segment* segment_of(const void* ptr) const;

  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Segment>> segments_;
  std::unordered_map<const void*, std::pair<Segment*, size_t>> allocations_;  // start -> (segment, length)
  uint64_t next_id_ = 1;
};

}  // namespace fakegpu::cuda
