// Modeled time of the whole job: where each operation falls on a virtual timeline and how
// busy it keeps every link.
//
// An operation starts once the last of its ranks' streams reaches it. Operations of one
// communicator run one after another, as NCCL orders them; different communicators run side
// by side (TP inside a node while DP crosses nodes). An operation whose links overlap those of
// another's data phase waits for it to finish: the pair ends when fair sharing would end it. Each flow plan (a cached pattern of the cost model) is
// interned once with the plans it shares links with, so placing an operation costs the same
// on 16 ranks as on 1024, and memory grows with plans, never with operations.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "comm_model.h"

namespace fakegpu::coord {

class LinkTimeline {
 public:
  explicit LinkTimeline(const planner::Topology& topo);

  struct Span {
    double start_us = 0;
    double end_us = 0;
  };
  // Places an operation of a communicator whose clock is *comm_clock_us (advanced to the
  // operation's end), starting no earlier than ready_us, when the last of its ranks' streams
  // reached it. The estimate's link plan must outlive the timeline (the job keeps every
  // communicator's model).
  Span place(double* comm_clock_us, const planner::Estimate& e, double ready_us = 0);
  // Places an operation that waits for no other traffic, from start_us for e.time_us; its data
  // still counts on its links, and later operations sharing them wait for its data phase.
  Span place_unhindered(double start_us, const planner::Estimate& e);

  double makespan_us() const { return makespan_us_; }
  // Per link that carried data: bytes, busy time, utilisation over the makespan.
  nlohmann::json report() const;
  // Bytes from node to node ("network" for switches that reduce), inside nodes included.
  nlohmann::json node_pairs() const;

 private:
  struct Plan {
    const std::vector<planner::LinkLoad>* per_byte;  // the model's, per byte of an operation
    const std::vector<planner::NodePairLoad>* node_pairs;
    std::vector<double> busy_share;  // per entry of per_byte: share of the data phase it is busy
    std::vector<int> sharing;        // plans with a link in common, this one included
    double data_end_us = 0;          // end of the latest data phase placed with this plan
    double bytes = 0;                // over all its operations
    double data_us = 0;
  };
  int intern(const planner::Estimate& e);
  // place() and place_unhindered(): waits says whether the operation's data phase waits for
  // the operations already on its links.
  Span schedule(double* comm_clock_us, const planner::Estimate& e, double ready_us, bool waits);

  const planner::Topology& topo_;
  std::vector<Plan> plans_;
  std::map<const void*, int> plan_index_;
  double makespan_us_ = 0;
};

}  // namespace fakegpu::coord
