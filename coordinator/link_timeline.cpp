#include "link_timeline.h"

#include <algorithm>

namespace fakegpu::coord {

LinkTimeline::LinkTimeline(const planner::Topology& topo) : topo_(topo) {}

int LinkTimeline::intern(const planner::Estimate& e) {
  const std::vector<planner::LinkLoad>* per_byte = e.per_byte_links;
  auto [it, fresh] = plan_index_.emplace(per_byte, static_cast<int>(plans_.size()));
  if (!fresh) return it->second;
  Plan plan;
  plan.per_byte = per_byte;
  plan.node_pairs = e.per_byte_node_pairs;
  // The busiest link is busy for the whole data phase; the others for their share of it.
  auto load = [&](const planner::LinkLoad& l) { return l.bytes / std::max(topo_.links[l.link].gbytes, 1e-6); };
  double busiest = 0;
  for (const planner::LinkLoad& l : *per_byte) busiest = std::max(busiest, load(l));
  for (const planner::LinkLoad& l : *per_byte) plan.busy_share.push_back(busiest > 0 ? load(l) / busiest : 0);
  const int me = it->second;
  std::vector<char> mine(topo_.links.size(), 0);
  for (const planner::LinkLoad& l : *per_byte) mine[l.link] = 1;
  plan.sharing.push_back(me);
  for (int other = 0; other < me; ++other) {
    const auto& theirs = *plans_[other].per_byte;
    if (std::any_of(theirs.begin(), theirs.end(), [&](const planner::LinkLoad& l) { return mine[l.link]; })) {
      plan.sharing.push_back(other);
      plans_[other].sharing.push_back(me);
    }
  }
  plans_.push_back(std::move(plan));
  return me;
}

LinkTimeline::Span LinkTimeline::place(double* comm_clock_us, const planner::Estimate& e, double ready_us) {
  return schedule(comm_clock_us, e, ready_us, /*waits=*/true);
}

LinkTimeline::Span LinkTimeline::place_unhindered(double start_us, const planner::Estimate& e) {
  double clock = start_us;  // the caller keeps the communicator's clock
  return schedule(&clock, e, start_us, /*waits=*/false);
}

LinkTimeline::Span LinkTimeline::schedule(double* comm_clock_us, const planner::Estimate& e, double ready_us,
                                          bool waits) {
  Span span;
  span.start_us = std::max(*comm_clock_us, ready_us);
  double wait = 0;
  if (e.per_byte_links && !e.per_byte_links->empty()) {
    Plan& plan = plans_[intern(e)];
    const double data_start = span.start_us + e.latency_us;
    if (waits)
      for (int other : plan.sharing) wait = std::max(wait, plans_[other].data_end_us - data_start);
    // A plan is among those it shares links with, so an operation that waits ends its data
    // phase after the plan's last one anyway; one that does not may end it earlier.
    plan.data_end_us = std::max(plan.data_end_us, data_start + wait + e.data_us);
    plan.bytes += static_cast<double>(e.bytes);
    plan.data_us += e.data_us;
  }
  span.end_us = span.start_us + e.time_us + wait;
  *comm_clock_us = span.end_us;
  makespan_us_ = std::max(makespan_us_, span.end_us);
  return span;
}

nlohmann::json LinkTimeline::report() const {
  std::vector<double> bytes(topo_.links.size(), 0.0), busy(topo_.links.size(), 0.0);
  for (const Plan& plan : plans_)
    for (size_t i = 0; i < plan.per_byte->size(); ++i) {
      const planner::LinkLoad& l = (*plan.per_byte)[i];
      bytes[l.link] += l.bytes * plan.bytes;
      busy[l.link] += plan.busy_share[i] * plan.data_us;
    }
  nlohmann::json links = nlohmann::json::array();
  for (size_t l = 0; l < bytes.size(); ++l) {
    if (bytes[l] <= 0) continue;
    links.push_back({{"link", topo_.links[l].name},
                     {"bytes", static_cast<uint64_t>(bytes[l] + 0.5)},
                     {"busy_us", busy[l]},
                     {"utilization", makespan_us_ > 0 ? busy[l] / makespan_us_ : 0.0}});
  }
  return links;
}

}  // namespace fakegpu::coord

namespace fakegpu::coord {

nlohmann::json LinkTimeline::node_pairs() const {
  std::map<std::pair<int, int>, double> bytes;
  for (const Plan& plan : plans_)
    if (plan.node_pairs)
      for (const planner::NodePairLoad& p : *plan.node_pairs) bytes[{p.from, p.to}] += p.bytes * plan.bytes;
  auto name = [&](int node) { return node == planner::kNetworkNode ? std::string("network") : topo_.nodes[node].id; };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [pair, b] : bytes)
    out.push_back({{"from", name(pair.first)}, {"to", name(pair.second)}, {"bytes", static_cast<uint64_t>(b + 0.5)}});
  return out;
}

}  // namespace fakegpu::coord
