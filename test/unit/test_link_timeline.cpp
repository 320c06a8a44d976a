// The job's modeled timeline: communicators overlap, shared links serialise, accounting adds up.
#include <gtest/gtest.h>

#include "cluster_config.h"
#include "comm_model.h"
#include "link_timeline.h"

namespace fakegpu::coord {
namespace {

using planner::CommModel;
using planner::Topology;
using planner::TuningEnv;
using wire::CollType;

// Two nodes of 4 H100, one 400G NIC per GPU.
ClusterConfig two_nodes() {
  return parse_cluster_config(R"(version: 1
cluster: {name: t}
nodes:
  - {id: a, ranks: [0, 1, 2, 3], gpus: [{profile: h100}, {profile: h100}, {profile: h100}, {profile: h100}]}
  - {id: b, ranks: [4, 5, 6, 7], gpus: [{profile: h100}, {profile: h100}, {profile: h100}, {profile: h100}]}
fabric:
  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}
  inter_node: {type: infiniband, bandwidth_gbps: 1600, latency_us: 5}
)",
                              "t.yaml");
}

double link_bytes(const nlohmann::json& links, const std::string& name) {
  for (const auto& l : links)
    if (l["link"] == name) return l["bytes"].get<double>();
  return 0;
}

TEST(LinkTimeline, CommunicatorsOnDisjointLinksOverlap) {
  Topology topo = Topology::from_config(two_nodes());
  CommModel tp_a(topo, {0, 1, 2, 3}, TuningEnv{}), tp_b(topo, {4, 5, 6, 7}, TuningEnv{});
  LinkTimeline timeline(topo);
  double clock_a = 0, clock_b = 0;
  auto ea = tp_a.estimate(CollType::kAllReduce, 64 << 20);
  auto eb = tp_b.estimate(CollType::kAllReduce, 64 << 20);
  auto sa = timeline.place(&clock_a, ea);
  auto sb = timeline.place(&clock_b, eb);
  EXPECT_DOUBLE_EQ(sa.start_us, 0);
  EXPECT_DOUBLE_EQ(sb.start_us, 0);
  EXPECT_DOUBLE_EQ(sb.end_us, eb.time_us) << "node b's TP allreduce shares no link with node a's";
  EXPECT_DOUBLE_EQ(timeline.makespan_us(), std::max(ea.time_us, eb.time_us));
}

// A latency-bound operation threads its packets through another's traffic: it takes its own
// time, yet its data still counts, and a later operation on the links waits for its data phase.
TEST(LinkTimeline, AnUnhinderedOperationTakesItsOwnTimeAndStillCounts) {
  Topology topo = Topology::from_config(two_nodes());
  CommModel world(topo, {0, 1, 2, 3, 4, 5, 6, 7}, TuningEnv{});
  CommModel dp(topo, {0, 4}, TuningEnv{});
  LinkTimeline timeline(topo);
  double world_clock = 0, dp_clock = 0;
  const auto big = world.estimate(CollType::kAllReduce, 256 << 20);
  const auto small = dp.estimate(CollType::kAllReduce, 8);
  ASSERT_LE(small.data_us, small.latency_us) << "8 bytes should be latency-bound";
  timeline.place(&world_clock, big);
  const auto s = timeline.place_unhindered(10, small);
  EXPECT_DOUBLE_EQ(s.start_us, 10);
  EXPECT_DOUBLE_EQ(s.end_us, 10 + small.time_us) << "it does not wait for the big operation's data phase";
  const auto later = timeline.place(&dp_clock, dp.estimate(CollType::kAllReduce, 64 << 20));
  EXPECT_GT(later.end_us, big.time_us) << "a bandwidth-bound operation on the same links still waits";
  LinkTimeline alone(topo);
  alone.place_unhindered(0, small);
  double bytes = 0;
  for (const auto& l : alone.report()) bytes += l["bytes"].get<double>();
  EXPECT_GE(bytes, 8) << "its data is on the links' accounts";
}

TEST(LinkTimeline, OperationsOfOneCommunicatorRunInOrder) {
  Topology topo = Topology::from_config(two_nodes());
  CommModel tp(topo, {0, 1, 2, 3}, TuningEnv{});
  LinkTimeline timeline(topo);
  double clock = 0;
  auto e = tp.estimate(CollType::kAllReduce, 1 << 20);
  timeline.place(&clock, e);
  auto second = timeline.place(&clock, e);
  EXPECT_DOUBLE_EQ(second.start_us, e.time_us);
  EXPECT_DOUBLE_EQ(clock, 2 * e.time_us);
}

TEST(LinkTimeline, OverlappingOperationsShareTheLinksTheyBothUse) {
  Topology topo = Topology::from_config(two_nodes());
  // Two DP pairs on the same rail NIC would contend; here GPU 0 -> GPU 4 twice from two
  // communicators, so both use node a's NIC 0 and GPU 0's PCIe at the same modeled time.
  CommModel dp1(topo, {0, 4}, TuningEnv{}), dp2(topo, {0, 4}, TuningEnv{});
  LinkTimeline timeline(topo);
  double c1 = 0, c2 = 0;
  auto e = dp1.estimate(CollType::kAllReduce, 256 << 20);
  auto first = timeline.place(&c1, e);
  auto second = timeline.place(&c2, dp2.estimate(CollType::kAllReduce, 256 << 20));
  EXPECT_DOUBLE_EQ(first.end_us, e.time_us);
  // The second waits for the first's data phase: it ends about one data phase later.
  EXPECT_NEAR(second.end_us, e.time_us + e.data_us, 1e-6 * e.time_us);
  nlohmann::json links = timeline.report();
  EXPECT_DOUBLE_EQ(link_bytes(links, "a/nic0 tx"), 2 * 256.0 * (1 << 20)) << links.dump();
  for (const auto& l : links) EXPECT_LE(l["utilization"].get<double>(), 1.0 + 1e-9) << l.dump();
}

TEST(LinkTimeline, LinkBytesAreWhatThePlanMoves) {
  Topology topo = Topology::from_config(two_nodes());
  TuningEnv ring;
  ring.set_algo("ring");
  CommModel tp(topo, {0, 1, 2, 3}, ring);
  LinkTimeline timeline(topo);
  double clock = 0;
  const double S = 32 << 20;
  timeline.place(&clock, tp.estimate(CollType::kAllReduce, static_cast<uint64_t>(S)));
  nlohmann::json links = timeline.report();
  for (int g = 0; g < 4; ++g)
    EXPECT_NEAR(link_bytes(links, "a/gpu" + std::to_string(g) + " nvlink tx"), 2.0 * 3 / 4 * S, 1.0);
  EXPECT_EQ(link_bytes(links, "b/gpu0 nvlink tx"), 0);
}

TEST(LinkTimeline, PointToPointUsesThePairsPath) {
  Topology topo = Topology::from_config(two_nodes());
  CommModel world(topo, {0, 1, 2, 3, 4, 5, 6, 7}, TuningEnv{});
  LinkTimeline timeline(topo);
  double clock = 0;
  auto e = world.estimate_p2p(1, 5, 8 << 20);
  timeline.place(&clock, e);
  nlohmann::json links = timeline.report();
  EXPECT_EQ(link_bytes(links, "a/nic1 tx"), 8 << 20) << links.dump();
  EXPECT_EQ(link_bytes(links, "b/nic1 rx"), 8 << 20);
  EXPECT_EQ(links.size(), 4u) << "PCIe out, NIC tx, NIC rx, PCIe in: " << links.dump();
  nlohmann::json pairs = timeline.node_pairs();
  ASSERT_EQ(pairs.size(), 1u) << pairs.dump();
  EXPECT_EQ(pairs[0]["from"], "a");
  EXPECT_EQ(pairs[0]["to"], "b");
  EXPECT_EQ(pairs[0]["bytes"], 8 << 20);
}

}  // namespace
}  // namespace fakegpu::coord
