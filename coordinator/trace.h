// The modeled timeline as a Chrome / Perfetto trace (JSON, opens in ui.perfetto.dev and
// chrome://tracing): one process per node; per rank, one track per stream, holding its NCCL
// operations at their modeled times and, from the rank's activity log, its kernels, copies and
// step marks (a slice that would overlap another partly goes to an extra lane of the track);
// flow arrows from each Send to its Recv; per node counters of how busy its NVLink and network
// links are, and per link counters for the busiest links. Keeps the first max_ops operations
// (FAKEGPU_TRACE_MAX_OPS); later ones are counted.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm_model.h"
#include "wire.h"

namespace fakegpu::coord {

class Trace {
 public:
  static constexpr size_t kDefaultMaxOps = 100000;
  explicit Trace(size_t max_ops = kDefaultMaxOps) : max_ops_(max_ops) {}
  static constexpr size_t kMaxSlices = 200000;  // activity slices drawn, over all ranks

  struct Op {
    uint64_t comm = 0;
    wire::CollType coll{};
    uint64_t bytes = 0;
    double start_us = 0, end_us = 0;
    int algo = -1, proto = 0, channels = 0;
    const std::vector<planner::LinkLoad>* per_byte_links = nullptr;
  };
  // A rank taking part in an operation, and the stream it is on (wire::Collective::track).
  struct RankTrack {
    int rank = -1;  // global
    uint64_t track = 0;
    bool operator<(const RankTrack& o) const { return rank != o.rank ? rank < o.rank : track < o.track; }
  };
  // A rank's activity log, as the job keeps it.
  struct RankActivity {
    int rank = -1;
    const std::vector<wire::ActivitySlice>* slices = nullptr;
    const std::vector<wire::MemorySample>* memory = nullptr;  // its GPU's memory in use; may be null
  };

  // ranks: every rank of a collective, or a Send's sender then its receiver.
  void record(const Op& op, std::vector<RankTrack> ranks);
  uint64_t dropped() const { return dropped_; }
  nlohmann::json to_json(const planner::Topology& topo, const std::vector<RankActivity>& activity) const;

 private:
  struct Recorded {
    Op op;
    int ranks;  // index into rank_sets_
  };
  nlohmann::json utilization_counters(const planner::Topology& topo) const;
  nlohmann::json link_counters(const planner::Topology& topo) const;
  static constexpr size_t kMaxLinkCounters = 32;

  std::vector<Recorded> ops_;
  // Operations of a communicator mostly repeat the same ranks and streams: each set is kept once.
  std::vector<std::vector<RankTrack>> rank_sets_;
  std::map<std::vector<RankTrack>, int> rank_set_index_;
  uint64_t dropped_ = 0;
  size_t max_ops_;
};

}  // namespace fakegpu::coord
