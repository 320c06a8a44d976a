// The modeled timeline as a Chrome / Perfetto trace (JSON, opens in ui.perfetto.dev and
// chrome://tracing): one process per node, one track per rank, one slice per operation at its
// modeled time, flow arrows from each Send to its Recv, and per node counters of how busy its
// NVLink and network links are. Keeps at most kMaxOps operations; later ones are counted.
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
  static constexpr size_t kMaxOps = 100000;

  struct Op {
    uint64_t comm = 0;
    wire::CollType coll{};
    uint64_t bytes = 0;
    double start_us = 0, end_us = 0;
    int algo = -1, proto = 0, channels = 0;
    int from = -1, to = -1;  // Send: the sender's and receiver's global ranks
    const std::vector<planner::LinkLoad>* per_byte_links = nullptr;
  };

  void record(Op op);
  uint64_t dropped() const { return dropped_; }
  // members: each communicator's global ranks, for the tracks of its collectives.
  nlohmann::json to_json(const planner::Topology& topo, const std::map<uint64_t, std::vector<int>>& members) const;

 private:
  nlohmann::json utilization_counters(const planner::Topology& topo) const;

  std::vector<Op> ops_;
  uint64_t dropped_ = 0;
};

}  // namespace fakegpu::coord
