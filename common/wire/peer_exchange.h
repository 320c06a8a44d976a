// Peer exchange: ranks of one host run a small AllReduce, Broadcast or AllGather among
// themselves, through a mailbox in shared memory, with no process in between. Each rank leaves
// its call and its data in its slot and counts itself in; the last to arrive checks every call
// against its own, reduces the data of an AllReduce in rank order (reduce_contributions, as the
// coordinator does) and publishes the round, while the others poll. Each rank then copies its
// result: the reduction, the root's slot, or every slot in rank order. The coordinator still
// gets every rank's call, flagged wire::kPeerExchange, and matches, checks and models it as
// usual without moving data: a mismatch or a missing rank is diagnosed by it, as on the other
// path, and answered with an error that releases the ranks waiting here.
//
// A small collective's modeled time is a pure function the ranks can compute too: it starts
// when the last rank's stream reaches it, or when the communicator's previous operation ends,
// whichever is later, and lasts its uncontended time (a latency-bound operation never waits
// for other traffic; see CollectiveDone::latency_bound). So each rank also leaves its stream's
// time and the latest end it knows of the communicator's operations (those it took part in),
// and the last rank publishes the start.
//
// The coordinator creates the area (create()) and hands its descriptor to every member
// (wire::PeerMailbox). Two rounds alternate, by the parity of the collective's sequence
// number, so a round's slots are never rewritten while a rank may still read them: a rank
// reaches round seq + 2 only after every rank has finished seq + 1.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>

#include "wire.h"

namespace fakegpu {

class PeerExchangeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One rank's call, as it leaves it in its slot.
struct PeerCall {
  uint64_t seq = 0;  // the communicator's collective number
  uint64_t count = 0;
  uint64_t scalar = 0;  // PreMulSum: this rank's scalar, raw bytes of the type
  double ready_us = -1;  // when its stream reached the call on the modeled clock
  double clock_us = 0;   // when the communicator's last operation it took part in ends
  int32_t root = -1;
  uint8_t coll = 0;
  uint8_t dtype = 0;
  uint8_t op = 0;
};

class PeerExchange {
 public:
  static constexpr size_t kSlotBytes = 4096;  // the most data one rank contributes
  static constexpr int kMaxRanks = 256;
  // kFailed: the round has no result, because the calls differ or a rank gave up on it.
  enum class State { kPending, kDone, kFailed };

  // The collectives a mailbox runs: AllReduce, Broadcast and AllGather.
  static bool handles(wire::CollType coll);
  // Whether a call of one of those with rank_bytes of data per rank fits a slot (1..kSlotBytes).
  static bool fits(wire::CollType coll, uint64_t rank_bytes);
  // The bytes of an area for nranks ranks.
  static uint64_t bytes_for(int nranks);
  // A new, empty area for nranks ranks (2..kMaxRanks); returns its memfd, which the caller owns.
  static int create(int nranks);
  // Maps an area from its descriptor (taken over and closed), after checking that it is one for
  // nranks ranks of `bytes` bytes.
  static std::unique_ptr<PeerExchange> map(int fd, int nranks, uint64_t bytes);
  ~PeerExchange();
  PeerExchange(const PeerExchange&) = delete;
  PeerExchange& operator=(const PeerExchange&) = delete;

  int nranks() const { return nranks_; }
  // Leaves this rank's call and `bytes` of data (at most kSlotBytes: its AllReduce or
  // AllGather input, the root's Broadcast input, nothing from other Broadcast ranks) in its
  // slot. The last rank to arrive decides the round before returning; go_ahead, when given, is
  // asked then, and false fails the round (the coordinator has gone, say).
  void arrive(int rank, const PeerCall& call, const void* data, size_t bytes,
              const std::function<bool()>& go_ahead = nullptr);
  State state(uint64_t seq) const;
  // Once state(seq) is kDone: copies the result (up to `bytes`; an AllGather's is nranks slots)
  // and returns the modeled start. Throws when the round was reused meanwhile (the
  // communicator was driven from two streams at once).
  double take(uint64_t seq, void* dst, size_t bytes) const;
  // Sleeps until the round of seq is decided, or for at most `timeout`.
  void sleep(uint64_t seq, std::chrono::microseconds timeout);
  // A rank that stops waiting (its call failed) makes a round still undecided fail for the
  // ranks that come after it, so none of them gets a result the others do not.
  void give_up(uint64_t seq);

 private:
  struct Round;
  struct Slot;
  PeerExchange(uint8_t* base, uint64_t bytes, int nranks) : base_(base), bytes_(bytes), nranks_(nranks) {}
  static uint64_t set_bytes(int nranks);  // one round's result and slots
  Round& round(uint64_t seq) const;
  Slot& slot(uint64_t seq, int rank) const;
  uint8_t* result(uint64_t seq) const;
  void decide(uint64_t seq, const PeerCall& mine, const std::function<bool()>& go_ahead);

  uint8_t* base_;
  uint64_t bytes_;
  int nranks_;
};

}  // namespace fakegpu
