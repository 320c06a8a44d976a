#include "control_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <string>

namespace fakegpu {
namespace {

std::string errno_text() { return std::strerror(errno); }

constexpr int kSizeSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

}  // namespace

uint64_t ByteRing::in_use(uint64_t head, uint64_t tail) const {
  if (head - tail > capacity_) throw RingError("control ring positions are corrupt");
  return head - tail;
}

size_t ByteRing::write(const void* src, size_t n) {
  if (n == 0) return 0;
  const uint64_t head = indices_->head.load(std::memory_order_relaxed);
  const uint64_t tail = indices_->tail.load(std::memory_order_acquire);
  n = std::min<uint64_t>(n, capacity_ - in_use(head, tail));
  if (n == 0) return 0;  // full: leave the shared line alone
  const uint64_t at = head & (capacity_ - 1);
  const size_t first = std::min<uint64_t>(n, capacity_ - at);
  std::memcpy(data_ + at, src, first);
  std::memcpy(data_, static_cast<const uint8_t*>(src) + first, n - first);
  // seq_cst, so that the sleeper flag read after it cannot be read before it (see wake_rank).
  indices_->head.store(head + n, std::memory_order_seq_cst);
  return n;
}

size_t ByteRing::read(void* dst, size_t n) {
  if (n == 0) return 0;
  const uint64_t tail = indices_->tail.load(std::memory_order_relaxed);
  const uint64_t head = indices_->head.load(std::memory_order_acquire);
  n = std::min<uint64_t>(n, in_use(head, tail));
  if (n == 0) return 0;  // empty: leave the shared line alone
  const uint64_t at = tail & (capacity_ - 1);
  const size_t first = std::min<uint64_t>(n, capacity_ - at);
  std::memcpy(dst, data_ + at, first);
  std::memcpy(static_cast<uint8_t*>(dst) + first, data_, n - first);
  indices_->tail.store(tail + n, std::memory_order_seq_cst);
  return n;
}

uint64_t ByteRing::readable() const {
  return in_use(indices_->head.load(std::memory_order_acquire), indices_->tail.load(std::memory_order_relaxed));
}

uint64_t ByteRing::writable() const {
  return capacity_ - in_use(indices_->head.load(std::memory_order_relaxed), indices_->tail.load(std::memory_order_acquire));
}

ControlMapping ControlMapping::create(uint64_t capacity) {
  if (capacity == 0 || (capacity & (capacity - 1)) != 0) throw RingError("control ring capacity must be a power of two");
  ControlMapping m;
  m.fd_ = memfd_create("fakegpu-control-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m.fd_ < 0) throw RingError("memfd_create: " + errno_text());
  m.bytes_ = ControlArea::kBytes + 2 * capacity;
  if (ftruncate(m.fd_, static_cast<off_t>(m.bytes_)) != 0) throw RingError("ftruncate: " + errno_text());
  // Sealed at its size, so the coordinator can trust its mapping never to shrink under it.
  if (fcntl(m.fd_, F_ADD_SEALS, kSizeSeals) != 0) throw RingError("sealing the control area: " + errno_text());
  void* p = mmap(nullptr, m.bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd_, 0);
  if (p == MAP_FAILED) throw RingError("mmap: " + errno_text());
  m.area_ = new (p) ControlArea;
  m.area_->capacity = capacity;
  m.capacity_ = capacity;
  return m;
}

ControlMapping ControlMapping::map(int fd) {
  ControlMapping m;
  m.fd_ = fd;
  if (fcntl(fd, F_GET_SEALS) != kSizeSeals) throw RingError("control area is not sealed at its size");
  struct stat st{};
  if (fstat(fd, &st) != 0) throw RingError("fstat: " + errno_text());
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size <= ControlArea::kBytes) throw RingError("control area of " + std::to_string(size) + " bytes is too small");
  const uint64_t capacity = (size - ControlArea::kBytes) / 2;
  if ((capacity & (capacity - 1)) != 0 || ControlArea::kBytes + 2 * capacity != size)
    throw RingError("control area of " + std::to_string(size) + " bytes does not hold two rings");
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw RingError("mmap: " + errno_text());
  m.area_ = static_cast<ControlArea*>(p);
  m.bytes_ = size;
  m.capacity_ = capacity;
  if (m.area_->magic != ControlArea::kMagic || m.area_->version != ControlArea::kVersion ||
      m.area_->capacity != capacity)
    throw RingError("control area header does not match (wrong magic, version or capacity)");
  return m;
}

ControlMapping& ControlMapping::operator=(ControlMapping&& o) noexcept {
  std::swap(area_, o.area_);
  std::swap(bytes_, o.bytes_);
  std::swap(capacity_, o.capacity_);
  std::swap(fd_, o.fd_);
  return *this;
}

ControlMapping::~ControlMapping() {
  if (area_) munmap(area_, bytes_);
  if (fd_ >= 0) close(fd_);
}

ByteRing ControlMapping::to_coord() const {
  return ByteRing(&area_->to_coord, reinterpret_cast<uint8_t*>(area_) + ControlArea::kBytes, capacity_);
}

ByteRing ControlMapping::to_rank() const {
  return ByteRing(&area_->to_rank, reinterpret_cast<uint8_t*>(area_) + ControlArea::kBytes + capacity_, capacity_);
}

bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::microseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000), static_cast<long>(timeout.count() % 1000000) * 1000};
  // Not FUTEX_PRIVATE: the word is shared between processes.
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
  return !(rc != 0 && errno == ETIMEDOUT);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void wake_rank(ControlArea* area) {
  // The rank stores rank_asleep, then re-checks the ring; we published, then load rank_asleep.
  // Both seq_cst: at least one of the two sees the other, so no wakeup is lost.
  if (area->rank_asleep.load(std::memory_order_seq_cst) == 0) return;
  if (area->rank_asleep.exchange(0) == 0) return;
  area->rank_bell.fetch_add(1);
  futex_wake_all(&area->rank_bell);
}

}  // namespace fakegpu
