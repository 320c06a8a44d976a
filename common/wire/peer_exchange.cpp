#include "peer_exchange.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "control_ring.h"
#include "reduce.h"
#include "wire.h"

namespace fakegpu {
namespace {

constexpr uint32_t kMagic = 0x52454550;  // "PEER"
constexpr uint32_t kVersion = 1;
constexpr size_t kRoundsAt = 64;     // after the header
constexpr size_t kSetsAt = 4096;     // each round's result and slots, one set per round

struct Header {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint32_t nranks = 0;
  uint32_t slot_bytes = PeerExchange::kSlotBytes;
};

std::string errno_text() { return std::strerror(errno); }

// Round seq's use of its slots: distinct for every use of one round while seq fits 33 bits.
uint32_t generation(uint64_t seq) { return static_cast<uint32_t>(seq / 2 + 1); }

}  // namespace

struct PeerExchange::Round {
  alignas(64) std::atomic<uint32_t> arrived{0};
  alignas(64) std::atomic<uint32_t> decided{0};  // generation of the use decided last
  std::atomic<uint32_t> sleepers{0};
  std::atomic<uint32_t> given_up{0};  // generation of the last use a rank gave up on
  uint32_t failed = 0;
  double start_us = 0;
  // The decided call's shape, for take().
  uint8_t coll = 0;
  int32_t root = -1;
  uint64_t rank_bytes = 0;  // one rank's data
};

struct PeerExchange::Slot {
  PeerCall call;
  alignas(64) uint8_t data[kSlotBytes];
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);

uint64_t PeerExchange::set_bytes(int nranks) {
  static_assert(kRoundsAt + 2 * sizeof(Round) <= kSetsAt, "the rounds must fit before the slots");
  return kSlotBytes + uint64_t(nranks) * sizeof(Slot);
}

bool PeerExchange::handles(wire::CollType coll) {
  return coll == wire::CollType::kAllReduce || coll == wire::CollType::kBroadcast || coll == wire::CollType::kAllGather;
}

bool PeerExchange::fits(wire::CollType coll, uint64_t rank_bytes) {
  return handles(coll) && rank_bytes > 0 && rank_bytes <= kSlotBytes;
}

uint64_t PeerExchange::bytes_for(int nranks) { return kSetsAt + 2 * set_bytes(nranks); }

int PeerExchange::create(int nranks) {
  if (nranks < 2 || nranks > kMaxRanks)
    throw PeerExchangeError("a peer mailbox is for 2 to " + std::to_string(kMaxRanks) + " ranks, not " +
                            std::to_string(nranks));
  const uint64_t bytes = bytes_for(nranks);
  const int fd = memfd_create("fakegpu-peer-exchange", MFD_CLOEXEC);
  if (fd < 0) throw PeerExchangeError("memfd_create: " + errno_text());
  void* base = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    std::string why = errno_text();
    ::close(fd);
    throw PeerExchangeError("cannot make a peer mailbox of " + std::to_string(bytes) + " bytes: " + why);
  }
  auto* header = new (base) Header;
  header->nranks = static_cast<uint32_t>(nranks);
  new (static_cast<uint8_t*>(base) + kRoundsAt) Round[2];
  munmap(base, bytes);
  return fd;
}

std::unique_ptr<PeerExchange> PeerExchange::map(int fd, int nranks, uint64_t bytes) {
  struct stat st {};
  const bool sized = fstat(fd, &st) == 0 && nranks >= 2 && nranks <= kMaxRanks &&
                     bytes == bytes_for(nranks) && static_cast<uint64_t>(st.st_size) == bytes;
  void* base = sized ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  ::close(fd);
  if (!sized)
    throw PeerExchangeError("a peer mailbox for " + std::to_string(nranks) + " ranks of " + std::to_string(bytes) +
                            " bytes was announced; its memory does not match");
  if (base == MAP_FAILED) throw PeerExchangeError("cannot map the peer mailbox: " + errno_text());
  const auto* header = static_cast<const Header*>(base);
  if (header->magic != kMagic || header->version != kVersion || header->nranks != uint32_t(nranks) ||
      header->slot_bytes != kSlotBytes) {
    munmap(base, bytes);
    throw PeerExchangeError("the peer mailbox's header is not one this library reads");
  }
  return std::unique_ptr<PeerExchange>(new PeerExchange(static_cast<uint8_t*>(base), bytes, nranks));
}

PeerExchange::~PeerExchange() { munmap(base_, bytes_); }

PeerExchange::Round& PeerExchange::round(uint64_t seq) const {
  return reinterpret_cast<Round*>(base_ + kRoundsAt)[seq % 2];
}

uint8_t* PeerExchange::result(uint64_t seq) const { return base_ + kSetsAt + (seq % 2) * set_bytes(nranks_); }

PeerExchange::Slot& PeerExchange::slot(uint64_t seq, int rank) const {
  return reinterpret_cast<Slot*>(result(seq) + kSlotBytes)[rank];
}

void PeerExchange::arrive(int rank, const PeerCall& call, const void* data, size_t bytes,
                          const std::function<bool()>& go_ahead) {
  if (rank < 0 || rank >= nranks_ || bytes > kSlotBytes)
    throw PeerExchangeError("rank " + std::to_string(rank) + " cannot leave " + std::to_string(bytes) +
                            " bytes in a peer mailbox of " + std::to_string(nranks_) + " ranks");
  Slot& mine = slot(call.seq, rank);
  mine.call = call;
  if (bytes) std::memcpy(mine.data, data, bytes);
  // acq_rel: the last rank's increment sees every slot written before the others' increments.
  if (round(call.seq).arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == uint32_t(nranks_))
    decide(call.seq, call, go_ahead);
}

void PeerExchange::decide(uint64_t seq, const PeerCall& mine, const std::function<bool()>& go_ahead) {
  Round& r = round(seq);
  using wire::CollType;
  const bool reduces = mine.coll == static_cast<uint8_t>(CollType::kAllReduce);
  const bool broadcast = mine.coll == static_cast<uint8_t>(CollType::kBroadcast);
  const uint64_t rank_bytes = mine.count * dtype_size(mine.dtype);
  bool same = fits(static_cast<CollType>(mine.coll), rank_bytes) &&
              (!reduces || mine.op < kNumRedOps) && (!broadcast || (mine.root >= 0 && mine.root < nranks_));
  double start = -1;
  thread_local std::vector<const uint8_t*> ins;
  thread_local std::vector<uint64_t> scalars;
  ins.resize(nranks_);
  scalars.resize(nranks_);
  for (int k = 0; k < nranks_; ++k) {
    const Slot& s = slot(seq, k);
    const PeerCall& c = s.call;
    same &= c.seq == mine.seq && c.coll == mine.coll && c.dtype == mine.dtype && c.op == mine.op &&
            c.root == mine.root && c.count == mine.count;
    start = std::max({start, c.ready_us, c.clock_us});
    ins[k] = s.data;
    scalars[k] = c.scalar;
  }
  if (same && reduces) {  // reduced before asking go_ahead, which may take a system call
    thread_local std::vector<uint8_t> scratch(kSlotBytes);
    reduce_contributions(static_cast<DataType>(mine.dtype), static_cast<RedOp>(mine.op), ins.data(), scalars.data(),
                         nranks_, mine.count, result(seq), scratch.data());
  }
  const bool failed = !same || r.given_up.load() == generation(seq) || (go_ahead && !go_ahead());
  r.failed = failed ? 1 : 0;
  r.start_us = start;
  r.coll = mine.coll;
  r.root = mine.root;
  r.rank_bytes = rank_bytes;
  r.arrived.store(0, std::memory_order_relaxed);  // published by the store below
  r.decided.store(generation(seq));
  if (r.sleepers.load()) futex_wake_all(&r.decided);
}

PeerExchange::State PeerExchange::state(uint64_t seq) const {
  const Round& r = round(seq);
  if (r.decided.load(std::memory_order_acquire) != generation(seq)) return State::kPending;
  return r.failed ? State::kFailed : State::kDone;
}

double PeerExchange::take(uint64_t seq, void* dst, size_t bytes) const {
  const Round& r = round(seq);
  const double start = r.start_us;
  const uint64_t each = std::min<uint64_t>(r.rank_bytes, kSlotBytes);
  auto* out = static_cast<uint8_t*>(dst);
  if (r.coll == static_cast<uint8_t>(wire::CollType::kAllGather)) {
    for (int k = 0; k < nranks_ && (k + 1) * each <= bytes; ++k) std::memcpy(out + k * each, slot(seq, k).data, each);
  } else {
    const bool broadcast = r.coll == static_cast<uint8_t>(wire::CollType::kBroadcast);
    const int root = std::clamp(r.root, 0, nranks_ - 1);
    std::memcpy(out, broadcast ? slot(seq, root).data : result(seq), std::min<uint64_t>(bytes, each));
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  if (r.decided.load(std::memory_order_relaxed) != generation(seq))
    throw PeerExchangeError("collective " + std::to_string(seq) +
                            ": its peer mailbox round was reused before this rank read it (is the communicator "
                            "driven from two streams at once?)");
  return start;
}

void PeerExchange::give_up(uint64_t seq) { round(seq).given_up.store(generation(seq)); }

void PeerExchange::sleep(uint64_t seq, std::chrono::microseconds timeout) {
  Round& r = round(seq);
  r.sleepers.fetch_add(1);
  const uint32_t seen = r.decided.load();
  if (seen != generation(seq)) futex_wait(&r.decided, seen, timeout);
  r.sleepers.fetch_sub(1);
}

}  // namespace fakegpu
