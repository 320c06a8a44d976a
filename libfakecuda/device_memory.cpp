#include "device_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace fakegpu::cuda {
namespace {

constexpr size_t kAlignment = 256;               // cudaMalloc's documented minimum alignment
constexpr size_t kSegmentBytes = size_t{1} << 30;  // virtual size of a segment; sparse
constexpr size_t kSegmentGranule = size_t{2} << 20;

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

DeviceMemory& DeviceMemory::instance() {
  static auto* memory = new DeviceMemory;  // never destroyed: CUDA calls may come from static destructors
  return *memory;
}

DeviceMemory::Segment* DeviceMemory::new_segment(size_t min_bytes) {
  const size_t size = std::max(kSegmentBytes, round_up(min_bytes, kSegmentGranule));
  int fd = memfd_create("fakegpu-device-memory", MFD_CLOEXEC);
  void* base = MAP_FAILED;
  if (fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) == 0)
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (base == MAP_FAILED) {
    // Not shareable (no memfd): plain anonymous memory still works, over the socket path.
    if (fd >= 0) close(fd);
    fd = -1;
    base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) return nullptr;
  }
  auto seg = std::make_unique<Segment>(Segment{next_id_++, fd, static_cast<uint8_t*>(base), size, {{0, size}}});
  segments_.push_back(std::move(seg));
  return segments_.back().get();
}

void* DeviceMemory::carve(Segment& s, size_t bytes) {
  for (auto it = s.free.begin(); it != s.free.end(); ++it) {
    if (it->second < bytes) continue;
    size_t offset = it->first, left = it->second - bytes;
    s.free.erase(it);
    if (left) s.free.emplace(offset + bytes, left);
    return s.base + offset;
  }
  return nullptr;
}

void* DeviceMemory::allocate(size_t bytes) {
  const size_t length = round_up(std::max<size_t>(bytes, 1), kAlignment);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  Segment* owner = nullptr;
  for (auto& s : segments_)
    if ((p = carve(*s, length))) {
      owner = s.get();
      break;
    }
  if (!p) {
    owner = new_segment(length);
    if (!owner) return nullptr;
    p = carve(*owner, length);
  }
  allocations_[p] = {owner, length};
  return p;
}

bool DeviceMemory::release(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(ptr);
  if (it == allocations_.end()) return false;
  auto [seg, length] = it->second;
  allocations_.erase(it);
  size_t offset = static_cast<uint8_t*>(ptr) - seg->base;
  // Give the pages back to the kernel, then merge the range with free neighbours.
  madvise(ptr, length, MADV_REMOVE);
  auto next = seg->free.lower_bound(offset);
  if (next != seg->free.end() && offset + length == next->first) {
    length += next->second;
    next = seg->free.erase(next);
  }
  if (next != seg->free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += length;
      return true;
    }
  }
  seg->free.emplace(offset, length);
  return true;
}

const DeviceMemory::Segment* DeviceMemory::segment_of(const void* ptr) const {
  auto* p = static_cast<const uint8_t*>(ptr);
  for (const auto& s : segments_)
    if (p >= s->base && p < s->base + s->size) return s.get();
  return nullptr;
}

bool DeviceMemory::find(const void* ptr, size_t len, SegmentRef* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Segment* s = segment_of(ptr);
  if (!s) return false;
  size_t offset = static_cast<const uint8_t*>(ptr) - s->base;
  if (len > s->size - offset) return false;
  *out = SegmentRef{s->id, s->fd, s->size, offset};
  return true;
}

}  // namespace fakegpu::cuda
