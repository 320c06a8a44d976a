#include "trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "report_markdown.h"  // bytes_text

namespace fakegpu::coord {
namespace {

using nlohmann::json;
using planner::LinkKind;

int pid_of(const planner::Topology& topo, int rank) { return topo.gpus[rank].node + 1; }

// Counted per node: the GPUs' NVLink sends and the NICs' sends.
enum Kind { kNvlink, kNetwork, kKinds };
const char* const kKindNames[kKinds] = {"NVLink busy %", "network busy %"};

int kind_of(LinkKind kind) { return kind == LinkKind::kNvlTx ? kNvlink : kind == LinkKind::kNicTx ? kNetwork : -1; }

int node_of_link(const planner::Topology& topo, const planner::Link& link) {
  return link.kind == LinkKind::kNicTx || link.kind == LinkKind::kNicRx ? topo.nics[link.owner].node
                                                                         : topo.gpus[link.owner].node;
}

}  // namespace

void Trace::record(Op op) {
  if (ops_.size() >= kMaxOps) {
    ++dropped_;
    return;
  }
  ops_.push_back(std::move(op));
}

json Trace::to_json(const planner::Topology& topo, const std::map<uint64_t, std::vector<int>>& members) const {
  json events = json::array();
  for (size_t n = 0; n < topo.nodes.size(); ++n)
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", n + 1}, {"args", {{"name", topo.nodes[n].id}}}});
  for (size_t g = 0; g < topo.gpus.size(); ++g)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid_of(topo, static_cast<int>(g))},
                      {"tid", g},
                      {"args", {{"name", fmt::format("rank {}", g)}}}});
  uint64_t flow_id = 0;
  static const std::vector<int> kNone;
  for (const Op& op : ops_) {
    const bool send = op.coll == wire::CollType::kSend;
    auto it = members.find(op.comm);
    const std::vector<int> pair = {op.from, op.to};
    const std::vector<int>& ranks = send ? pair : it == members.end() ? kNone : it->second;
    json args = {{"communicator", op.comm},
                 {"bytes", op.bytes},
                 {"algorithm", planner::algo_label(op.algo)},
                 {"protocol", planner::proto_name(op.proto)},
                 {"channels", op.channels}};
    for (size_t i = 0; i < ranks.size(); ++i) {
      int rank = ranks[i];
      if (rank < 0 || rank >= static_cast<int>(topo.gpus.size())) continue;
      std::string name = send ? (i == 0 ? "Send " : "Recv ") : std::string(wire::coll_type_name(op.coll)) + " ";
      events.push_back({{"name", name + bytes_text(static_cast<double>(op.bytes))},
                        {"cat", fmt::format("comm {}", op.comm)},
                        {"ph", "X"},
                        {"ts", op.start_us},
                        {"dur", op.end_us - op.start_us},
                        {"pid", pid_of(topo, rank)},
                        {"tid", rank},
                        {"args", args}});
    }
    if (send) {
      ++flow_id;
      events.push_back({{"name", "send"}, {"cat", "p2p"}, {"ph", "s"}, {"id", flow_id}, {"ts", op.start_us},
                        {"pid", pid_of(topo, op.from)}, {"tid", op.from}});
      events.push_back({{"name", "send"}, {"cat", "p2p"}, {"ph", "f"}, {"bp", "e"}, {"id", flow_id},
                        {"ts", op.end_us}, {"pid", pid_of(topo, op.to)}, {"tid", op.to}});
    }
  }
  for (auto& counter : utilization_counters(topo)) events.push_back(std::move(counter));
  json trace = {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
  if (dropped_) trace["otherData"] = {{"operations_not_traced", dropped_}};
  return trace;
}

// Each operation keeps its links busy at an even rate over its modeled time; a node's counter
// is the sum over running operations, as a share of that node's links of the kind.
json Trace::utilization_counters(const planner::Topology& topo) const {
  std::vector<double> capacity(topo.nodes.size() * kKinds, 0.0);  // bytes per us
  for (const planner::Link& link : topo.links)
    if (int k = kind_of(link.kind); k >= 0) capacity[node_of_link(topo, link) * kKinds + k] += link.gbytes * 1e3;
  std::vector<std::tuple<double, int, double>> changes;  // (time, node * kKinds + kind, delta %)
  for (const Op& op : ops_) {
    double dur = op.end_us - op.start_us;
    if (!op.per_byte_links || dur <= 0) continue;
    std::map<int, double> bytes;
    for (const planner::LinkLoad& l : *op.per_byte_links) {
      const planner::Link& link = topo.links[l.link];
      if (int k = kind_of(link.kind); k >= 0) bytes[node_of_link(topo, link) * kKinds + k] += l.bytes * op.bytes;
    }
    for (auto [slot, b] : bytes) {
      if (capacity[slot] <= 0) continue;
      double pct = 100.0 * b / dur / capacity[slot];
      changes.emplace_back(op.start_us, slot, pct);
      changes.emplace_back(op.end_us, slot, -pct);
    }
  }
  std::sort(changes.begin(), changes.end());
  std::vector<double> level(capacity.size(), 0.0);
  json counters = json::array();
  for (const auto& [ts, slot, delta] : changes) {
    level[slot] = std::max(0.0, level[slot] + delta);
    counters.push_back({{"name", kKindNames[slot % kKinds]},
                        {"ph", "C"},
                        {"ts", ts},
                        {"pid", slot / kKinds + 1},
                        {"args", {{"busy", level[slot]}}}});
  }
  return counters;
}

}  // namespace fakegpu::coord
