// A communicator as the coordinator keeps it: its members, and the collectives and
// point-to-point messages some of its ranks have posted and others not yet.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm_model.h"
#include "wire.h"

namespace fakegpu::coord {

using ClientId = uint64_t;

// A rank's device-memory segment, mapped into the coordinator once.
class SegmentMapping {
 public:
  SegmentMapping(uint8_t* base, size_t size) : base_(base), size_(size) {}
  ~SegmentMapping();
  SegmentMapping(const SegmentMapping&) = delete;
  SegmentMapping& operator=(const SegmentMapping&) = delete;
  uint8_t* base() const { return base_; }
  size_t size() const { return size_; }

 private:
  uint8_t* base_;
  size_t size_;
};

// A rank of a communicator: the client that owns it, and who it is in the world.
struct Member {
  ClientId client = 0;
  int global_rank = -1;
  int cuda_device = 0;
  bool destroyed = false;
  // Under FAKEGPU_REPRESENTATIVE, a rank no process runs: the process whose calls it repeats here.
  ClientId follows = 0;
};

// One rank's side of an operation: where its data comes from and where its result goes.
struct RankData {
  const uint8_t* in = nullptr;  // in its shared segment, or in `body`
  uint8_t* out = nullptr;       // in its shared segment; null when the reply carries the result
  std::shared_ptr<std::vector<uint8_t>> body;  // the frame holding socket-path data
  uint64_t scalar = 0;          // PreMulSum
  // The segments `in` and `out` point into, kept mapped while the data plane works on them,
  // even when the rank disconnects meanwhile.
  std::shared_ptr<const SegmentMapping> in_segment, out_segment;
};

// A collective some ranks of a communicator have posted: what each called, when, and where
// its data is, until the last rank comes (op_match.cpp).
struct PendingOp {
  // Sizes it for nranks ranks; `call`, the first rank's, is what every other rank must match.
  void open(const wire::Collective& call, int nranks, std::chrono::steady_clock::time_point now);
  bool opened() const { return !request_ids.empty(); }
  bool joined(int rank) const { return request_ids[rank] != 0; }
  // Records a rank's call (call.rank); true when every rank has now arrived.
  bool join(const wire::Collective& call, uint64_t request_id, std::chrono::steady_clock::time_point now);

  wire::Collective first;  // the call every other rank must match
  std::vector<uint64_t> request_ids;  // per rank; 0 until that rank arrived
  std::vector<wire::Collective> calls;  // per rank, described only in a mismatch's message
  std::vector<std::chrono::steady_clock::time_point> arrived_at;  // per rank
  std::chrono::steady_clock::time_point first_at;                 // first rank's arrival
  std::vector<RankData> ranks;
  int arrived = 0;
  std::string failure;
  wire::Status failure_code = wire::Status::kSuccess;
  double ready_us = -1;  // when the last rank's stream reached it on the modeled clock
  std::vector<double> readies;   // per rank: when its stream reached it (-1: unknown)
  std::vector<uint64_t> tracks;  // per rank: the stream it is on (wire::Collective::track)
};

// A Send and its Recv, once either side has posted.
struct PendingP2P {
  wire::Collective send, recv;  // what each side called
  uint64_t send_request = 0, recv_request = 0;
  std::chrono::steady_clock::time_point first_at;  // when the first side arrived
  RankData sender, receiver;
};

// A communicator and the operations in flight on it.
struct Comm {
  uint64_t id = 0;
  uint64_t parent = 0;
  std::string name;
  std::vector<Member> members;  // indexed by comm rank
  std::map<uint64_t, PendingOp> ops;  // by sequence number
  std::map<std::tuple<int, int, uint64_t>, PendingP2P> p2p;  // by (sender, receiver, pair sequence)
  std::string failure;  // set once the comm can no longer make progress
  std::string first_failure;  // the first operation that failed, when before `failure`: the root cause
  uint64_t refused = 0;  // requests failed because of it
  uint64_t collectives = 0;
  std::shared_ptr<const planner::CommModel> model;  // found or built at its first collective
  bool unmodeled = false;                     // some rank's GPU is unknown
  // Modeled time at which its last operation ends. Each rank knows the ends of the operations it
  // took part in, so the latest of what its ranks know is this (see peer_exchange.h).
  double clock_us = 0;
  bool peer_mailbox = false;  // its members were given a peer mailbox
  // Under FAKEGPU_REPRESENTATIVE (job_stand_ins.cpp): the communicators of the same kind whose
  // ranks no process runs (the other tensor-parallel groups, say), which go through this one's
  // operations as it does; and, on such a one, the communicator it follows.
  std::vector<uint64_t> mirrors;
  uint64_t mirror_of = 0;
  // What a process last sent each stood-in rank, kept for that rank's message back (a small one:
  // Job::stand_in_message): by (stood-in rank, process's rank), the message's number and bytes.
  std::map<std::pair<int, int>, std::pair<uint64_t, std::shared_ptr<std::vector<uint8_t>>>> sent_to_stand_ins;
};

}  // namespace fakegpu::coord
