// The control ring: a rank process and a coordinator on one host exchange their frames through
// two byte rings in shared memory instead of the unix socket. A frame is the same bytes either
// way (wire.h); the ring only removes the socket's per-message kernel work and, above all, the
// wakeups. Each side spins briefly (yielding the core) before it sleeps, and a sleeper is woken
// only when it said it is asleep: the rank sleeps on a futex in the area, the coordinator in its
// event loop, which a one-byte "doorbell" on the unix socket wakes. The socket stays open beside
// the ring: it carries the doorbells and the file descriptors of ShareSegment, and its closing
// still tells each side that the other has gone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace fakegpu {

class RingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Read and write positions of one ring: running byte totals, never wrapped.
struct RingIndices {
  alignas(64) std::atomic<uint64_t> head{0};  // bytes ever written; only the producer stores it
  alignas(64) std::atomic<uint64_t> tail{0};  // bytes ever read; only the consumer stores it
};

// The start of the shared mapping; the two rings' bytes follow it.
struct ControlArea {
  static constexpr uint32_t kMagic = 0x474e4952;  // "RING"
  static constexpr uint32_t kVersion = 1;
  static constexpr size_t kBytes = 4096;  // the data of the rings starts here
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t capacity = 0;  // bytes in each ring, a power of two
  RingIndices to_coord;
  RingIndices to_rank;
  // Set by the coordinator before it sleeps in its event loop; a rank that finds it set clears it
  // and sends one byte on the socket.
  alignas(64) std::atomic<uint32_t> coord_asleep{0};
  // Set by a rank thread before it sleeps on rank_bell; the coordinator clears it, bumps the
  // bell and wakes the futex.
  alignas(64) std::atomic<uint32_t> rank_asleep{0};
  std::atomic<uint32_t> rank_bell{0};
};
static_assert(sizeof(ControlArea) <= ControlArea::kBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// How long either side keeps polling its ring after its last work before it sleeps. Long,
// because a sleep costs far more than the wakeup itself: once every process on a core sleeps,
// the core halts, and on a virtual machine waking a halted core takes the hypervisor tens of
// microseconds to milliseconds. With 100 us, 16 ranks on two virtual cores lost whole
// milliseconds to such wakeups; a few milliseconds rides over them. The spin yields the core at
// each turn, so a rank with work to do still runs.
constexpr std::chrono::microseconds kRingSpin{5000};

// One direction of the exchange, seen from one side. The indices live in shared memory and the
// peer may be buggy: a position that cannot be right throws RingError.
class ByteRing {
 public:
  ByteRing() = default;
  ByteRing(RingIndices* indices, uint8_t* data, uint64_t capacity)
      : indices_(indices), data_(data), capacity_(capacity) {}
  // Copies as much of src as fits and publishes it; returns the bytes taken.
  size_t write(const void* src, size_t n);
  // Copies up to n available bytes to dst and frees their space; returns the bytes read.
  size_t read(void* dst, size_t n);
  uint64_t readable() const;
  uint64_t writable() const;

 private:
  // Bytes between the positions; throws when they cannot be right.
  uint64_t in_use(uint64_t head, uint64_t tail) const;
  RingIndices* indices_ = nullptr;
  uint8_t* data_ = nullptr;
  uint64_t capacity_ = 0;
};

// A mapped control area: created by the rank, mapped by the coordinator from the descriptor.
class ControlMapping {
 public:
  ControlMapping() = default;
  // A new area with rings of capacity bytes each (a power of two); its descriptor is fd().
  static ControlMapping create(uint64_t capacity);
  // Maps a peer's area, checking its header against its size; takes ownership of fd.
  static ControlMapping map(int fd);
  ControlMapping(ControlMapping&& o) noexcept { *this = std::move(o); }
  ControlMapping& operator=(ControlMapping&& o) noexcept;
  ~ControlMapping();

  explicit operator bool() const { return area_ != nullptr; }
  ControlArea* area() const { return area_; }
  int fd() const { return fd_; }
  uint64_t capacity() const { return capacity_; }  // as checked at map time, never re-read
  ByteRing to_coord() const;
  ByteRing to_rank() const;

 private:
  ControlArea* area_ = nullptr;
  size_t bytes_ = 0;
  uint64_t capacity_ = 0;
  int fd_ = -1;
};

// Futex wait on a word of shared memory while it still holds expected; false on timeout.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::microseconds timeout);
void futex_wake_all(std::atomic<uint32_t>* word);

// The coordinator's half of the wakeup protocol: call after publishing bytes to the rank or
// freeing space the rank may be waiting for.
void wake_rank(ControlArea* area);

}  // namespace fakegpu
