#include "device_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "memory_ledger.h"

namespace fakegpu::cuda {
namespace {

constexpr size_t kAlignment = 256;               // cudaMalloc's documented minimum alignment
constexpr size_t kSegmentBytes = size_t{1} << 30;  // virtual size of a segment; sparse
constexpr size_t kSegmentGranule = size_t{2} << 20;
constexpr uint64_t kIpcMagic = 0x6670677569706331;  // "fpguipc1"

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

bool counts_against_device(MemoryKind kind) { return kind != MemoryKind::kHost; }

// The program's allocations, in the ledger's parts (the context and communicators' buffers are
// charged there too, by context_memory.cpp and the NCCL stub, without an allocation here).
MemoryLedger& ledger() { return MemoryLedger::instance(); }
constexpr int kProgram = FAKEGPU_MEMORY_PROGRAM;

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

void* DeviceMemory::allocate(size_t bytes, MemoryKind kind, int device, uint64_t capacity) {
  const size_t length = round_up(std::max<size_t>(bytes, 1), kAlignment);
  std::lock_guard<std::mutex> lock(mu_);
  if (counts_against_device(kind) && !ledger().charge(device, kProgram, length, capacity)) return nullptr;
  void* p = nullptr;
  Segment* owner = nullptr;
  for (auto& s : segments_)
    if (s->owner_pid == 0 && !s->reserved && (p = carve(*s, length))) {
      owner = s.get();
      break;
    }
  if (!p) {
    owner = new_segment(length);
    if (!owner) {
      if (counts_against_device(kind)) ledger().credit(device, kProgram, length);
      return nullptr;
    }
    p = carve(*owner, length);
  }
  allocations_[static_cast<uint8_t*>(p)] = Carved{owner, length, Allocation{p, bytes, kind, device, false}};
  return p;
}

bool DeviceMemory::release(void* ptr, MemoryKind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(static_cast<uint8_t*>(ptr));
  if (it == allocations_.end() || it->second.info.imported || it->second.physical) return false;
  const bool host = it->second.info.kind == MemoryKind::kHost;
  if (host != (kind == MemoryKind::kHost)) return false;
  auto [seg, length, info, physical] = it->second;  // physical: 0, as checked above
  allocations_.erase(it);
  if (counts_against_device(info.kind)) ledger().credit(info.device, kProgram, length);
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

const DeviceMemory::Carved* DeviceMemory::carved_at(const void* ptr) const {
  auto* p = static_cast<const uint8_t*>(ptr);
  auto it = allocations_.upper_bound(p);
  if (it == allocations_.begin()) return nullptr;
  --it;
  return p < it->first + std::max<size_t>(it->second.info.bytes, 1) ? &it->second : nullptr;
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

bool DeviceMemory::lookup(const void* ptr, Allocation* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const Carved* c = carved_at(ptr);
  if (c) *out = c->info;
  return c != nullptr;
}

uint64_t DeviceMemory::used_on(int device) const { return ledger().used(device); }

void* DeviceMemory::reserve(size_t bytes) {
  if (bytes == 0 || bytes % kGranularity) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  Segment* s = new_segment(bytes);
  if (!s) return nullptr;
  s->free.clear();
  s->reserved = true;
  return s->base;
}

bool DeviceMemory::free_reservation(void* base) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(segments_.begin(), segments_.end(),
                         [&](auto& s) { return s->reserved && s->base == static_cast<uint8_t*>(base); });
  if (it == segments_.end()) return false;
  Segment* seg = it->get();
  for (auto& [start, carved] : allocations_)
    if (carved.segment == seg) return false;  // still mapped
  munmap(seg->base, seg->size);
  if (seg->fd >= 0) close(seg->fd);
  segments_.erase(it);
  return true;
}

uint64_t DeviceMemory::create_physical(size_t bytes, int device, uint64_t capacity) {
  if (bytes == 0 || bytes % kGranularity) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (!ledger().charge(device, kProgram, bytes, capacity)) return 0;
  physical_[next_id_] = Physical{bytes, device, false};
  return next_id_++;
}

bool DeviceMemory::release_physical(uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = physical_.find(handle);
  if (it == physical_.end()) return false;
  ledger().credit(it->second.device, kProgram, it->second.bytes);
  physical_.erase(it);  // a mapping still in place keeps its pages until it is unmapped
  return true;
}

bool DeviceMemory::map_physical(void* at, size_t bytes, uint64_t handle) {
  std::lock_guard<std::mutex> lock(mu_);
  auto* p = static_cast<uint8_t*>(at);
  Segment* seg = const_cast<Segment*>(segment_of(at));
  auto it = physical_.find(handle);
  if (!seg || !seg->reserved || it == physical_.end() || it->second.mapped || bytes != it->second.bytes ||
      (p - seg->base) % kGranularity || bytes > seg->size - static_cast<size_t>(p - seg->base))
    return false;
  auto next = allocations_.lower_bound(p);
  if (next != allocations_.end() && next->first < p + bytes) return false;  // overlaps a mapping
  if (next != allocations_.begin() && std::prev(next)->first + std::prev(next)->second.length > p) return false;
  it->second.mapped = true;
  allocations_[p] = Carved{seg, bytes, Allocation{p, bytes, MemoryKind::kDevice, it->second.device, false}, handle};
  return true;
}

bool DeviceMemory::unmap_physical(void* at, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto* p = static_cast<uint8_t*>(at);
  auto first = allocations_.lower_bound(p);
  auto last = allocations_.lower_bound(p + bytes);
  if (first == last || first->first != p) return false;
  for (auto it = first; it != last; ++it)
    if (!it->second.physical) return false;
  for (auto it = first; it != last; ++it) {
    auto phys = physical_.find(it->second.physical);
    if (phys != physical_.end()) phys->second.mapped = false;
  }
  allocations_.erase(first, last);
  madvise(p, bytes, MADV_REMOVE);  // the handle's contents go with its mapping
  return true;
}

bool DeviceMemory::export_allocation(const void* base, IpcExport* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(static_cast<const uint8_t*>(base));
  if (it == allocations_.end() || it->second.info.kind == MemoryKind::kHost || it->second.physical) return false;
  const Segment* s = it->second.segment;
  if (s->fd < 0) return false;
  const bool imported = s->owner_pid != 0;  // re-exporting an opened handle names the first exporter
  *out = IpcExport{kIpcMagic,
                   imported ? s->owner_pid : static_cast<int32_t>(getpid()),
                   imported ? s->owner_fd : s->fd,
                   s->size,
                   static_cast<uint64_t>(static_cast<const uint8_t*>(base) - s->base),
                   it->second.info.bytes,
                   it->second.info.device};
  return true;
}

void* DeviceMemory::import_allocation(const IpcExport& h, const char** why) {
  if (h.magic != kIpcMagic || h.offset >= h.segment_size || h.bytes > h.segment_size - h.offset) {
    *why = "not an IPC memory handle";
    return nullptr;
  }
  if (h.pid == getpid()) {
    *why = "the handle was exported by this process; use the pointer itself";
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  Segment* seg = nullptr;
  for (auto& s : segments_)
    if (s->owner_pid == h.pid && s->owner_fd == h.fd) seg = s.get();
  if (!seg) {
    // The exporter's descriptor, reached through /proc: works for processes of the same user.
    std::string path = "/proc/" + std::to_string(h.pid) + "/fd/" + std::to_string(h.fd);
    int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != h.segment_size) {
      if (fd >= 0) close(fd);
      *why = "the exporting process is gone or its memory cannot be opened";
      return nullptr;
    }
    void* base = mmap(nullptr, h.segment_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (base == MAP_FAILED) {
      close(fd);
      *why = "mapping the exporter's memory failed";
      return nullptr;
    }
    segments_.push_back(std::make_unique<Segment>(
        Segment{next_id_++, fd, static_cast<uint8_t*>(base), h.segment_size, {}, h.pid, h.fd, 0}));
    seg = segments_.back().get();
  }
  uint8_t* p = seg->base + h.offset;
  auto it = allocations_.find(p);
  if (it == allocations_.end()) {
    allocations_[p] = Carved{seg, 0, Allocation{p, h.bytes, MemoryKind::kDevice, h.device, true}};
  }
  ++seg->imports;
  return p;
}

bool DeviceMemory::close_import(void* ptr) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocations_.find(static_cast<uint8_t*>(ptr));
  if (it == allocations_.end() || !it->second.info.imported) return false;
  Segment* seg = it->second.segment;
  if (--seg->imports > 0) return true;
  // The last handle into this exporter's segment: unmap it and forget its allocations.
  for (auto a = allocations_.begin(); a != allocations_.end();)
    a = a->second.segment == seg ? allocations_.erase(a) : std::next(a);
  munmap(seg->base, seg->size);
  close(seg->fd);
  segments_.erase(std::find_if(segments_.begin(), segments_.end(), [&](auto& s) { return s.get() == seg; }));
  return true;
}

}  // namespace fakegpu::cuda
