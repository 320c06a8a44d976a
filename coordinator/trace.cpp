#include "trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

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
  return planner::is_nic(link.kind) ? topo.nics[link.owner].node : topo.gpus[link.owner].node;
}

}  // namespace

void Trace::record(const Op& op, std::vector<RankTrack> ranks) {
  if (ops_.size() >= max_ops_) {
    ++dropped_;
    return;
  }
  auto [it, fresh] = rank_set_index_.emplace(std::move(ranks), static_cast<int>(rank_sets_.size()));
  if (fresh) rank_sets_.push_back(it->first);
  ops_.push_back({op, it->second});
}

namespace {

// Each rank's tracks get thread ids rank * kTracksPerRank + n, numbered by when each stream
// first did something, so a rank's streams sit together in order.
constexpr int kTracksPerRank = 1000;
constexpr int kStreamsPerRank = 99;  // more streams than this share the last track

class TrackIds {
 public:
  void saw(int rank, uint64_t track, double at) {
    auto [it, fresh] = first_.emplace(std::make_pair(rank, track), at);
    if (!fresh) it->second = std::min(it->second, at);
  }
  void number() {
    std::map<int, std::vector<std::pair<double, uint64_t>>> by_rank;
    for (const auto& [key, at] : first_) by_rank[key.first].emplace_back(at, key.second);
    for (auto& [rank, tracks] : by_rank) {
      std::sort(tracks.begin(), tracks.end());
      for (size_t n = 0; n < tracks.size(); ++n)
        tid_[{rank, tracks[n].second}] = rank * kTracksPerRank + static_cast<int>(std::min<size_t>(n, kStreamsPerRank - 1));
    }
  }
  int tid(int rank, uint64_t track) const { return tid_.at({rank, track}); }
  // (rank, track, tid) of every track.
  std::vector<std::tuple<int, uint64_t, int>> all() const {
    std::vector<std::tuple<int, uint64_t, int>> out;
    for (const auto& [key, tid] : tid_) out.emplace_back(key.first, key.second, tid);
    return out;
  }

 private:
  std::map<std::pair<int, uint64_t>, double> first_;
  std::map<std::pair<int, uint64_t>, int> tid_;
};

bool is_mark(wire::ActivityKind kind) {
  return kind == wire::ActivityKind::kStepBegin || kind == wire::ActivityKind::kStepEnd;
}

// Slices on one track must nest (the trace format's rule): ones that overlap another partly, as
// a rank's grouped sends to and receives from different peers can, move to an extra lane of
// their track, thread id + n * kLaneStride. Returns, per (pid, tid), how many lanes it needed.
constexpr int kLaneStride = 100;  // tracks per rank stay below it (TrackIds caps them)
constexpr size_t kMaxLanes = 10;  // within the rank's kTracksPerRank thread ids; the last takes the rest
constexpr double kClockResolutionUs = 1e-3;  // ranks keep modeled time in whole nanoseconds

std::map<std::pair<int, int>, int> assign_lanes(std::vector<json>& slices) {
  std::map<std::pair<int, int>, std::vector<size_t>> by_track;
  for (size_t i = 0; i < slices.size(); ++i) by_track[{slices[i]["pid"], slices[i]["tid"]}].push_back(i);
  std::map<std::pair<int, int>, int> lanes_used;
  for (auto& [track, members] : by_track) {
    auto start = [&](size_t i) { return slices[i]["ts"].get<double>(); };
    auto end = [&](size_t i) { return start(i) + slices[i]["dur"].get<double>(); };
    std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
      return start(a) != start(b) ? start(a) < start(b) : end(a) > end(b);
    });
    std::vector<std::vector<double>> open;  // per lane: the ends of the slices still open, innermost last
    for (size_t i : members) {
      size_t lane = 0;
      for (;; ++lane) {
        if (lane == open.size()) open.emplace_back();
        std::vector<double>& stack = open[lane];
        while (!stack.empty() && stack.back() <= start(i) + kClockResolutionUs) stack.pop_back();
        if (stack.empty() || end(i) <= stack.back() + kClockResolutionUs || lane + 1 == kMaxLanes) break;
      }
      open[lane].push_back(end(i));
      slices[i]["tid"] = track.second + static_cast<int>(lane) * kLaneStride;
    }
    lanes_used[track] = static_cast<int>(open.size());
  }
  return lanes_used;
}

}  // namespace

json Trace::to_json(const planner::Topology& topo, const std::vector<RankActivity>& activity) const {
  const int nranks = static_cast<int>(topo.gpus.size());
  auto known = [&](int rank) { return rank >= 0 && rank < nranks; };
  // NCCL slices come from the operations; a rank's own log adds its kernels, copies and marks.
  auto drawn = [](const wire::ActivitySlice& s) { return s.kind != wire::ActivityKind::kCollective; };
  TrackIds tracks;
  for (const Recorded& r : ops_)
    for (const RankTrack& rt : rank_sets_[r.ranks])
      if (known(rt.rank)) tracks.saw(rt.rank, rt.track, r.op.start_us);
  for (const RankActivity& a : activity)
    if (known(a.rank))
      for (const auto& s : *a.slices)
        if (drawn(s)) tracks.saw(a.rank, s.track, s.start_us);
  tracks.number();

  json events = json::array();
  std::vector<json> slices;
  std::vector<std::pair<size_t, size_t>> flows;  // (Send slice, Recv slice)
  for (const Recorded& r : ops_) {
    const Op& op = r.op;
    const std::vector<RankTrack>& ranks = rank_sets_[r.ranks];
    const bool send = op.coll == wire::CollType::kSend;
    json args = {{"communicator", op.comm},
                 {"bytes", op.bytes},
                 {"algorithm", planner::algo_label(op.algo)},
                 {"protocol", planner::proto_name(op.proto)},
                 {"channels", op.channels}};
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (!known(ranks[i].rank)) continue;
      std::string name = send ? (i == 0 ? "Send " : "Recv ") : std::string(wire::coll_type_name(op.coll)) + " ";
      slices.push_back({{"name", name + bytes_text(static_cast<double>(op.bytes))},
                        {"cat", fmt::format("comm {}", op.comm)},
                        {"ph", "X"},
                        {"ts", op.start_us},
                        {"dur", op.end_us - op.start_us},
                        {"pid", pid_of(topo, ranks[i].rank)},
                        {"tid", tracks.tid(ranks[i].rank, ranks[i].track)},
                        {"args", args}});
    }
    if (send && ranks.size() == 2 && known(ranks[0].rank) && known(ranks[1].rank))
      flows.emplace_back(slices.size() - 2, slices.size() - 1);
  }
  uint64_t slices_drawn = 0, slices_left_out = 0;
  for (const RankActivity& a : activity) {
    if (!known(a.rank)) continue;
    for (const auto& s : *a.slices) {
      if (!drawn(s)) continue;
      if (slices_drawn >= kMaxSlices) {
        ++slices_left_out;
        continue;
      }
      ++slices_drawn;
      json event = {{"pid", pid_of(topo, a.rank)}, {"tid", tracks.tid(a.rank, s.track)}, {"ts", s.start_us}};
      if (is_mark(s.kind)) {
        event.update({{"name", s.kind == wire::ActivityKind::kStepBegin ? "step begins" : "step ends"},
                      {"ph", "i"}, {"s", "t"}, {"cat", "step"}});
        events.push_back(std::move(event));
      } else {
        const bool kernels = s.kind == wire::ActivityKind::kKernel;
        event.update({{"name", fmt::format("{} x{}", wire::activity_kind_name(s.kind), s.count)},
                      {"cat", kernels ? "compute" : "copy"}, {"ph", "X"}, {"dur", s.end_us - s.start_us}});
        slices.push_back(std::move(event));
      }
    }
  }
  // Each rank's GPU memory in use, a counter on its node's process.
  for (const RankActivity& a : activity) {
    if (!known(a.rank) || !a.memory) continue;
    for (const wire::MemorySample& m : *a.memory)
      events.push_back({{"name", fmt::format("rank {} GPU memory", a.rank)},
                        {"ph", "C"},
                        {"ts", m.us},
                        {"pid", pid_of(topo, a.rank)},
                        {"args", {{"GiB", m.bytes / double(uint64_t{1} << 30)}}}});
  }
  const std::map<std::pair<int, int>, int> lanes = assign_lanes(slices);

  for (size_t n = 0; n < topo.nodes.size(); ++n)
    events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", n + 1}, {"args", {{"name", topo.nodes[n].id}}}});
  for (const auto& [rank, track, tid] : tracks.all()) {
    const int n = tid % kTracksPerRank;
    const int pid = pid_of(topo, rank);
    std::string name = track == 0 ? fmt::format("rank {}", rank) : fmt::format("rank {} stream {}", rank, n + 1);
    auto used = lanes.find({pid, tid});
    for (int lane = 0; lane < (used == lanes.end() ? 1 : used->second); ++lane) {
      const int lane_tid = tid + lane * kLaneStride;
      events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", lane_tid},
                        {"args", {{"name", lane ? fmt::format("{} (overlapping {})", name, lane) : name}}}});
      events.push_back({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", lane_tid},
                        {"args", {{"sort_index", tid * 100 + lane}}}});
    }
  }
  uint64_t flow_id = 0;
  for (const auto& [from, to] : flows) {
    ++flow_id;
    const json& a = slices[from];
    const json& b = slices[to];
    events.push_back({{"name", "send"}, {"cat", "p2p"}, {"ph", "s"}, {"id", flow_id}, {"ts", a["ts"]},
                      {"pid", a["pid"]}, {"tid", a["tid"]}});
    events.push_back({{"name", "send"}, {"cat", "p2p"}, {"ph", "f"}, {"bp", "e"}, {"id", flow_id},
                      {"ts", b["ts"].get<double>() + b["dur"].get<double>()}, {"pid", b["pid"]}, {"tid", b["tid"]}});
  }
  for (json& slice : slices) events.push_back(std::move(slice));
  for (auto& counter : utilization_counters(topo)) events.push_back(std::move(counter));
  json trace = {{"traceEvents", events}, {"displayTimeUnit", "ns"}};
  if (dropped_) trace["otherData"]["operations_not_traced"] = dropped_;
  if (slices_left_out) trace["otherData"]["activity_slices_not_traced"] = slices_left_out;
  return trace;
}

// Each operation keeps its links busy at an even rate over its modeled time; a node's counter
// is the sum over running operations, as a share of that node's links of the kind.
json Trace::utilization_counters(const planner::Topology& topo) const {
  std::vector<double> capacity(topo.nodes.size() * kKinds, 0.0);  // bytes per us
  for (const planner::Link& link : topo.links)
    if (int k = kind_of(link.kind); k >= 0) capacity[node_of_link(topo, link) * kKinds + k] += link.gbytes * 1e3;
  std::vector<std::tuple<double, int, double>> changes;  // (time, node * kKinds + kind, delta %)
  for (const Recorded& r : ops_) {
    const Op& op = r.op;
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
  for (auto& counter : link_counters(topo)) counters.push_back(std::move(counter));
  return counters;
}

// The same per link (an NVLink port, a PCIe link, a NIC, each way), for the links that carried
// the most bytes: a node's average hides one busy NIC among idle ones.
json Trace::link_counters(const planner::Topology& topo) const {
  std::vector<double> total(topo.links.size(), 0.0);
  for (const Recorded& r : ops_)
    if (r.op.per_byte_links)
      for (const planner::LinkLoad& l : *r.op.per_byte_links) total[l.link] += l.bytes * r.op.bytes;
  std::vector<int> busiest;
  for (size_t i = 0; i < total.size(); ++i)
    if (total[i] > 0) busiest.push_back(static_cast<int>(i));
  std::sort(busiest.begin(), busiest.end(), [&](int a, int b) { return total[a] > total[b]; });
  if (busiest.size() > kMaxLinkCounters) busiest.resize(kMaxLinkCounters);
  std::vector<char> drawn(topo.links.size(), 0);
  for (int link : busiest) drawn[link] = 1;

  std::vector<std::tuple<double, int, double>> changes;  // (time, link, delta %)
  for (const Recorded& r : ops_) {
    const Op& op = r.op;
    const double dur = op.end_us - op.start_us;
    if (!op.per_byte_links || dur <= 0) continue;
    for (const planner::LinkLoad& l : *op.per_byte_links) {
      const planner::Link& link = topo.links[l.link];
      if (!drawn[l.link] || link.gbytes <= 0) continue;
      const double pct = 100.0 * l.bytes * op.bytes / dur / (link.gbytes * 1e3);
      changes.emplace_back(op.start_us, l.link, pct);
      changes.emplace_back(op.end_us, l.link, -pct);
    }
  }
  std::sort(changes.begin(), changes.end());
  std::vector<double> level(topo.links.size(), 0.0);
  json counters = json::array();
  for (const auto& [ts, link, delta] : changes) {
    level[link] = std::max(0.0, level[link] + delta);
    // Operations that share a link are placed one after the other's data phase, so their
    // average rates can add up past the link's: the link is then simply full.
    counters.push_back({{"name", topo.links[link].name + " busy %"},
                        {"ph", "C"},
                        {"ts", ts},
                        {"pid", node_of_link(topo, topo.links[link]) + 1},
                        {"args", {{"busy", std::min(100.0, level[link])}}}});
  }
  return counters;
}

}  // namespace fakegpu::coord
