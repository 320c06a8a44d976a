// What the report counts about a job: its operations by kind and as the model priced them, how
// their data moved, the errors ranks were sent, and the diagnoses made. Counters only; the Job
// decides what to count.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "comm_model.h"
#include "wire.h"

namespace fakegpu::coord {

class JobStats {
 public:
  // One kind of operation as the model priced it: a communicator's calls of one collective
  // and size share a plan.
  struct OpKey {
    uint64_t comm;
    wire::CollType coll;
    uint64_t bytes;
    const char* path;  // a Send's: "NVLink", "PCIe" or "network"; "" for collectives
    bool operator<(const OpKey& o) const {
      return std::tie(comm, coll, bytes) < std::tie(o.comm, o.coll, o.bytes) ||
             (std::tie(comm, coll, bytes) == std::tie(o.comm, o.coll, o.bytes) && std::strcmp(path, o.path) < 0);
    }
  };
  // How the data moved: read and written in place in shared segments, or carried in frames.
  struct DataPlane {
    uint64_t shared_bytes = 0;
    uint64_t socket_bytes = 0;
    uint64_t skipped_bytes = 0;  // of payload-free operations (FAKEGPU_PAYLOAD=none)
    uint64_t segments_mapped = 0;
    uint64_t control_ring_clients = 0;
    uint64_t peer_mailboxes = 0;       // communicators given one
    uint64_t peer_exchange_ops = 0;    // collectives whose ranks moved the data themselves
    uint64_t peer_exchange_bytes = 0;  // their sizes
    uint64_t payload_chunks_in = 0, payload_chunks_out = 0;
  };
  DataPlane data;

  // A completed call of `coll` over `bytes`; then either priced by the model, or not, and why.
  void count_call(wire::CollType coll, uint64_t bytes);
  void count_priced(const OpKey& kind, const planner::Estimate& estimate);
  void count_unpriced(wire::CollType coll, const std::string& why);
  // An error sent to a rank (global_rank -1 when unknown).
  void count_error(const std::string& message, int global_rank);
  void count_mismatch(const char* kind) { ++mismatches_[kind]; }
  void count_timeout() { ++rendezvous_timeouts_; }
  void record_deadlock(const std::string& why);
  const std::vector<std::string>& deadlocks() const { return deadlocks_; }

  // Writes the report's "collectives", "totals", "operations", "data_plane", "errors" and
  // "diagnoses"; the Job adds what it alone knows to the last two.
  void write(nlohmann::json& report) const;

 private:
  struct CollStats {
    uint64_t calls = 0;
    uint64_t bytes = 0;
    double modeled_us = 0;
    // Calls per (algorithm + 1, protocol); index 0 holds point-to-point patterns.
    uint64_t algorithms[planner::kNumAlgos + 1][planner::kNumProtos] = {};
    uint64_t unmodeled = 0;      // calls the model could not price...
    std::string unmodeled_why;   // ...and why, the first time
  };
  struct OpStats {
    uint64_t calls = 0;
    planner::Estimate estimate;  // of one call
  };
  static constexpr size_t kMaxOpKinds = 256;  // the report lists at most this many kinds
  static constexpr size_t kMaxReportedErrors = 100;
  static constexpr size_t kMaxReportedDeadlocks = 100;

  CollStats coll_stats_[wire::kNumCollTypes];  // by CollType
  std::map<OpKey, OpStats> op_kinds_;
  uint64_t unlisted_op_calls_ = 0;  // calls of kinds beyond kMaxOpKinds
  // The first few distinct errors, each with the ranks it was sent to.
  std::vector<std::pair<std::string, std::vector<int>>> errors_;
  std::map<std::string, size_t> error_index_;
  uint64_t rendezvous_timeouts_ = 0;  // operations failed by the rendezvous timeout
  std::map<std::string, uint64_t> mismatches_;  // by flight recorder class
  std::vector<std::string> deadlocks_;          // each one's diagnosis
};

}  // namespace fakegpu::coord
