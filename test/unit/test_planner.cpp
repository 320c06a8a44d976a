// The cost model as a library: channel search, rings, trees, algorithm choice, link plans.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <set>

#include "cluster_config.h"
#include "comm_model.h"
#include "topo_xml.h"
#include "topo_xml_dump.h"

namespace fakegpu::planner {
namespace {

using wire::CollType;

// `nodes` nodes of `gpus` GPUs of one profile, NVSwitch inside, 8 x 400G IB when multi-node.
ClusterConfig cluster(const std::string& profile, int nodes, int gpus, const std::string& extra_inter = "") {
  std::string y = "version: 1\ncluster: {name: t}\nnodes:\n";
  int rank = 0;
  for (int n = 0; n < nodes; ++n) {
    y += "  - id: node" + std::to_string(n) + "\n    ranks: [";
    for (int g = 0; g < gpus; ++g) y += (g ? ", " : "") + std::to_string(rank++);
    y += "]\n    gpus: [";
    for (int g = 0; g < gpus; ++g) y += (g ? ", " : "") + std::string("{profile: ") + profile + "}";
    y += "]\n";
  }
  y += "fabric:\n  intra_node: {type: nvswitch, bandwidth_gbps: 7200, latency_us: 1}\n";
  if (nodes > 1) y += "  inter_node: {type: infiniband, bandwidth_gbps: 3200, latency_us: 5" + extra_inter + "}\n";
  return parse_cluster_config(y, "test.yaml");
}

std::vector<int> all_ranks(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

struct Fixture {
  Topology topo;
  CommModel model;
  Fixture(const ClusterConfig& c, std::vector<int> gpus = {}, TuningEnv env = {})
      : topo(Topology::from_config(c)), model(topo, gpus.empty() ? all_ranks(c.world_size()) : gpus, env) {}
};

TEST(Planner, DgxH100RingsAndChannels) {
  Fixture f(cluster("h100-sxm", 1, 8));
  // 18 NVLinks x 20.6 GB/s: 6 channels at 60 GB/s, split in two, then doubled for the comm.
  EXPECT_EQ(f.model.graph(kRing).channels, 12);
  EXPECT_DOUBLE_EQ(f.model.graph(kRing).bw_intra, 30.0);
  EXPECT_EQ(f.model.channels(), 24);
  ASSERT_EQ(f.model.rings().size(), 24u);
  EXPECT_EQ(f.model.rings()[0], all_ranks(8));
}

TEST(Planner, DgxA100RingsAndChannels) {
  Fixture f(cluster("a100-80gb", 1, 8));
  // 12 NVLinks x 20 GB/s = 240: 6 channels at 40 reach it, then split to 12 x 20.
  EXPECT_EQ(f.model.graph(kRing).channels, 12);
  EXPECT_DOUBLE_EQ(f.model.graph(kRing).bw_intra, 20.0);
  EXPECT_EQ(f.model.channels(), 24);
}

TEST(Planner, RingsEnterEachNodeOnTheChannelsRail) {
  Fixture f(cluster("h100-sxm", 2, 8));
  for (size_t c = 0; c < f.model.rings().size(); ++c) {
    const auto& ring = f.model.rings()[c];
    ASSERT_EQ(ring.size(), 16u);
    std::set<int> seen(ring.begin(), ring.end());
    EXPECT_EQ(seen.size(), 16u) << "ring " << c << " visits a rank twice";
    // One NIC per GPU: channel c enters node 0 at local GPU c % 8 and node 1 likewise.
    EXPECT_EQ(ring[0], static_cast<int>(c % 8));
    EXPECT_EQ(ring[8], 8 + static_cast<int>(c % 8));
  }
}

// NCCL runs each searched channel twice, once on each half of the double binary tree, so every
// NIC carries both halves: a node with two children in one half is a leaf in the other. (Halves
// by channel parity put one half on the even rails alone, and on three nodes of eight GPUs held
// a tree to three quarters of its rate.)
TEST(Planner, EveryRailCarriesBothHalvesOfTheTree) {
  Fixture f(cluster("h100-sxm", 3, 8));
  const int searched = f.model.graph(kRing).channels;
  ASSERT_EQ(f.model.channels(), 2 * searched);
  std::map<int, std::set<int>> halves;  // rail (the node head's local GPU) -> halves it carries
  for (int c = 0; c < f.model.channels(); ++c) {
    EXPECT_EQ(f.model.tree_half(c), c / searched) << "channel " << c;
    EXPECT_EQ(f.model.rings()[c], f.model.rings()[c % searched]) << "channel " << c << " copies its searched channel";
    halves[f.model.rings()[c][0]].insert(f.model.tree_half(c));
  }
  EXPECT_EQ(halves.size(), 8u);
  for (const auto& [rail, used] : halves) EXPECT_EQ(used.size(), 2u) << "rail " << rail;
}

// NCCL's per-channel cap on trees steers its choice; the modeled time does not keep it. GB200s,
// 8 GPUs in each of 3 racks with NVLS off: NCCL picks the ring (the cap makes the tree look
// slower), while a tree forced on runs at about 1.2 times the NICs' rate in bus bandwidth
// (NVIDIA/nccl issue 1801: 486 GB/s against 394 for the ring).
TEST(Planner, TreesAreNotHeldToNcclsChannelCapInTime) {
  const ClusterConfig c = cluster("gb200", 3, 8);
  TuningEnv nvls_off;
  nvls_off.nvls_enable = 0;
  Fixture chosen(c, {}, nvls_off);
  const uint64_t bytes = 16ull << 30;
  const Estimate ring = chosen.model.estimate(CollType::kAllReduce, bytes);
  EXPECT_EQ(ring.algo, kRing);
  TuningEnv tree_only = nvls_off;
  tree_only.set_algo("tree");
  Fixture forced(c, {}, tree_only);
  const Estimate tree = forced.model.estimate(CollType::kAllReduce, bytes);
  ASSERT_EQ(tree.algo, kTree);
  const int nc = forced.model.channels();
  const double cap_algbw = nc * kPerChMaxTreeBw[kBlackwell][2] / 2;  // NCCL's bus-to-algorithm ratio for trees
  EXPECT_GT(tree.algbw_gbs, 1.15 * cap_algbw);
  EXPECT_GT(tree.busbw_gbs, ring.busbw_gbs);
}

// The bundled presets give what the inline clusters above give.
ClusterConfig preset(const std::string& file) {
  return load_cluster_config(std::string(FAKEGPU_SOURCE_DIR) + "/configs/presets/" + file);
}

void expect_dgx_channels(const std::string& file, double bw_intra) {
  SCOPED_TRACE(file);
  Fixture f(preset(file));
  EXPECT_EQ(f.model.graph(kRing).channels, 12);
  EXPECT_DOUBLE_EQ(f.model.graph(kRing).bw_intra, bw_intra);
  EXPECT_EQ(f.model.channels(), 24);
  ASSERT_EQ(f.model.rings().size(), 24u);
  for (const auto& ring : f.model.rings()) EXPECT_EQ(ring, all_ranks(8));
}

TEST(Planner, DgxPresetsRingsAndChannels) {
  expect_dgx_channels("dgx-h100-1node.yaml", 30.0);
  expect_dgx_channels("dgx-a100-1node.yaml", 20.0);
}

TEST(Planner, DgxH100TwoNodePresetRingsCrossOnNicRails) {
  Fixture f(preset("dgx-h100-2node.yaml"));
  ASSERT_EQ(f.model.nranks(), 16);
  EXPECT_EQ(f.model.nnodes(), 2);
  ASSERT_EQ(f.topo.nics.size(), 16u);
  const auto node = [&](int r) { return f.topo.gpus[r].node; };
  const auto rail = [&](int r) { return f.topo.nics[f.topo.gpus[r].nic].local; };
  for (size_t c = 0; c < f.model.rings().size(); ++c) {
    const auto& ring = f.model.rings()[c];
    ASSERT_EQ(ring.size(), 16u);
    EXPECT_EQ(std::set<int>(ring.begin(), ring.end()).size(), 16u) << "ring " << c;
    int crossings = 0;
    for (size_t i = 0; i < ring.size(); ++i) crossings += node(ring[i]) != node(ring[(i + 1) % ring.size()]);
    EXPECT_EQ(crossings, 2) << "ring " << c << " should leave each node once";
    // It enters both nodes on the channel's rail, the same NIC index on each side.
    EXPECT_EQ(node(ring[0]), 0);
    EXPECT_EQ(node(ring[8]), 1);
    EXPECT_EQ(rail(ring[0]), static_cast<int>(c % 8)) << "ring " << c;
    EXPECT_EQ(rail(ring[8]), static_cast<int>(c % 8)) << "ring " << c;
  }
}

// Across nodes the node heads form NCCL's double binary tree: every head reaches the root,
// the two halves have different roots, and depth grows with log2 of the node count.
TEST(Planner, TreeShapeAcrossNodes) {
  for (int nodes : {2, 3, 4}) {
    Fixture f(cluster("a100-80gb", nodes, 8));
    std::set<int> roots;
    for (int half = 0; half < 2; ++half) {
      int c = 0;
      while (f.model.tree_half(c) != half) ASSERT_LT(++c, static_cast<int>(f.model.trees().size()));
      const auto& tree = f.model.trees()[c];
      int root = -1;
      for (int r = 0; r < f.model.nranks(); ++r) {
        if (tree[r].parent < 0) {
          EXPECT_EQ(root, -1) << nodes << " nodes: two roots";
          root = r;
        }
        int hops = 0;
        for (int at = r; tree[at].parent >= 0; at = tree[at].parent) ASSERT_LT(++hops, 64) << "cycle";
        for (int child : tree[r].children) EXPECT_EQ(tree[child].parent, r);
      }
      ASSERT_GE(root, 0);
      roots.insert(root);
      // Inside a node: a chain of 8, so at most 7 + ceil(log2(nodes)) + 1 levels.
      for (int r = 0; r < f.model.nranks(); ++r) {
        int depth = 0;
        for (int at = r; tree[at].parent >= 0; at = tree[at].parent) ++depth;
        EXPECT_LE(depth, 7 + 3) << nodes << " nodes";
      }
    }
    EXPECT_EQ(roots.size(), 2u) << nodes << " nodes: both halves share a root";
  }
}

TEST(Planner, NvlsForLargeAllReduceOnHopperNotAmpere) {
  Fixture h100(cluster("h100-sxm", 1, 8));
  Fixture a100(cluster("a100-80gb", 1, 8));
  EXPECT_EQ(h100.model.estimate(CollType::kAllReduce, 1ull << 30).algo, kNvls);
  EXPECT_EQ(a100.model.estimate(CollType::kAllReduce, 1ull << 30).algo, kRing);
  EXPECT_FALSE(a100.model.algo_available(kAllReduce, kNvls, kSimple));
  TuningEnv off;
  off.nvls_enable = 0;
  Fixture no_nvls(cluster("h100-sxm", 1, 8), {}, off);
  EXPECT_NE(no_nvls.model.estimate(CollType::kAllReduce, 1ull << 30).algo, kNvls);
}

// CollNet, and NVLS across nodes, need switches that reduce (SHARP) and NCCL_COLLNET_ENABLE.
TEST(Planner, CollNetNeedsASharpNetworkAndTheSwitch) {
  TuningEnv on;
  on.collnet_enable = true;
  Fixture sharp(cluster("a100-80gb", 4, 8, ", sharp: true"), {}, on);
  EXPECT_TRUE(sharp.model.algo_available(kAllReduce, kCollNetDirect, kSimple));
  EXPECT_TRUE(sharp.model.algo_available(kAllReduce, kCollNetChain, kSimple));
  EXPECT_FALSE(sharp.model.algo_available(kAllReduce, kCollNetDirect, kLL));
  EXPECT_FALSE(sharp.model.algo_available(kAllGather, kCollNetDirect, kSimple));
  Fixture plain(cluster("a100-80gb", 4, 8), {}, on);
  EXPECT_FALSE(plain.model.algo_available(kAllReduce, kCollNetDirect, kSimple));
  Fixture not_enabled(cluster("a100-80gb", 4, 8, ", sharp: true"));
  EXPECT_FALSE(not_enabled.model.algo_available(kAllReduce, kCollNetDirect, kSimple));

  TuningEnv forced = on;
  forced.set_algo("collnetdirect");
  Fixture no_sharp(cluster("a100-80gb", 4, 8), {}, forced);
  EXPECT_THROW(no_sharp.model.estimate(CollType::kAllReduce, 1 << 20), TuningError);
}

// With SHARP the network reduces: each NIC carries its head's share of the buffer once each
// way, whatever the node count, where a ring carries 2(n-1)/n of it through every node.
TEST(Planner, CollNetSendsEachShareThroughTheNetworkOnce) {
  const double S = 256.0 * (1 << 20);
  for (const char* algo : {"collnetdirect", "collnetchain"}) {
    TuningEnv env;
    env.collnet_enable = true;
    env.set_algo(algo);
    Fixture f(cluster("a100-80gb", 4, 8, ", sharp: true"), {}, env);
    auto e = f.model.estimate(CollType::kAllReduce, static_cast<uint64_t>(S));
    ASSERT_EQ(e.algo, std::string(algo) == "collnetdirect" ? kCollNetDirect : kCollNetChain);
    EXPECT_EQ(e.channels, 8) << "one channel per NIC head";
    int nics = 0;
    for (const auto& l : e.link_bytes()) {
      if (f.topo.links[l.link].kind != LinkKind::kNicTx) continue;
      ++nics;
      EXPECT_NEAR(l.bytes, S / 8, 1.0) << algo << " " << f.topo.links[l.link].name;
    }
    EXPECT_EQ(nics, 32) << algo;
    TuningEnv ring = env;
    ring.set_algo("ring");
    Fixture r(cluster("a100-80gb", 4, 8, ", sharp: true"), {}, ring);
    EXPECT_LT(e.time_us, r.model.estimate(CollType::kAllReduce, static_cast<uint64_t>(S)).time_us) << algo;
  }
}

TEST(Planner, NvlsAcrossNodesWithSharp) {
  TuningEnv on;
  on.collnet_enable = true;
  Fixture f(cluster("h100-sxm", 2, 8, ", sharp: true"), {}, on);
  ASSERT_TRUE(f.model.algo_available(kAllReduce, kNvls, kSimple));
  Fixture without(cluster("h100-sxm", 2, 8));
  EXPECT_FALSE(without.model.algo_available(kAllReduce, kNvls, kSimple));
  TuningEnv nvls = on;
  nvls.set_algo("nvls");
  Fixture forced(cluster("h100-sxm", 2, 8, ", sharp: true"), {}, nvls);
  const double S = 1 << 30;
  auto e = forced.model.estimate(CollType::kAllReduce, static_cast<uint64_t>(S));
  for (const auto& l : e.link_bytes()) {
    if (forced.topo.links[l.link].kind == LinkKind::kNicTx) {
      EXPECT_NEAR(l.bytes, S / 8, 1.0);
    }
  }
}

// NCCL's path types: NVL over NVLink, NET across nodes, PHB for PCIe without a topology XML.
TEST(Planner, PathTypes) {
  Topology two = Topology::from_config(cluster("h100-sxm", 2, 8));
  EXPECT_EQ(two.path_type(0, 0), PathType::kLoc);
  EXPECT_EQ(two.path_type(0, 7), PathType::kNvl);
  EXPECT_EQ(two.path_type(0, 8), PathType::kNet);
  std::string y = "version: 1\ncluster: {name: t}\nnodes:\n  - {id: n, ranks: [0, 1], gpus: [{profile: l40s}, "
                  "{profile: l40s}]}\nfabric:\n  intra_node: {type: pcie, bandwidth_gbps: 256, latency_us: 1}\n";
  Topology pcie = Topology::from_config(parse_cluster_config(y, "t.yaml"));
  EXPECT_EQ(pcie.path_type(0, 1), PathType::kPhb);
  Topology xml = Topology::from_config(load_cluster_config(std::string(FAKEGPU_SOURCE_DIR) + "/configs/topo/dgx-h100-2node-xml.yaml"));
  EXPECT_EQ(xml.path_type(1, 6), PathType::kNvl);
  EXPECT_EQ(xml.path_type(1, 9), PathType::kNet);
}

// NVLink bridges join GPU pairs; the pairs talk over PCIe.
TEST(Planner, NvlinkBridgePairs) {
  std::string y = "version: 1\ncluster: {name: t}\nnodes:\n  - {id: n, ranks: [0, 1, 2, 3], gpus: [{profile: h100-pcie}, "
                  "{profile: h100-pcie}, {profile: h100-pcie}, {profile: h100-pcie}]}\n"
                  "fabric:\n  intra_node: {type: nvlink_bridge, bandwidth_gbps: 4800, latency_us: 1}\n";
  Topology topo = Topology::from_config(parse_cluster_config(y, "t.yaml"));
  EXPECT_TRUE(topo.nvlink_between(0, 1));
  EXPECT_FALSE(topo.nvlink_between(1, 2));
  // The bridge's rating counts 25 GB/s links; NCCL credits a Hopper link 20.6.
  EXPECT_DOUBLE_EQ(topo.gpus[0].nvlink_gbs, 600 * 20.6 / 25);
  CommModel pair(topo, {0, 1}, TuningEnv{}), quad(topo, {0, 1, 2, 3}, TuningEnv{});
  EXPECT_TRUE(pair.nvlink_inside_nodes());
  EXPECT_FALSE(quad.nvlink_inside_nodes());
  const uint64_t S = 1 << 30;
  // A bridged pair at 494 GB/s beats four GPUs whose ring crosses PCIe (48 GB/s).
  EXPECT_GT(pair.estimate(CollType::kAllReduce, S).busbw_gbs, 4 * quad.estimate(CollType::kAllReduce, S).busbw_gbs);
  bool crosses_pcie = false, crosses_bridge = false;
  for (const auto& l : quad.estimate(CollType::kAllReduce, S).link_bytes()) {
    crosses_pcie |= topo.links[l.link].kind == LinkKind::kPcieTx;
    crosses_bridge |= topo.links[l.link].kind == LinkKind::kNvlTx;
  }
  EXPECT_TRUE(crosses_pcie && crosses_bridge);
  // Written as NCCL topology XML and read back, the node is still bridged pairs.
  NodeXml xml = parse_topology_xml(topology_xml(topo, 0), "dump.xml");
  EXPECT_EQ(xml.fabric(), "nvlink_bridge");
  EXPECT_EQ(xml.gpus[0].peer_links.size(), 1u);
}

// NVLS in the modeled time: on one node its channels are held to their NVLink side only (8 x
// B200: NCCL's tuner formula says 8 channels x 90 GB/s, runs reach about 840 GB/s of bus
// bandwidth), and across nodes an NVLS tree's NICs move data at their own rate, not at the
// switch reduction's share of NVLink.
TEST(Planner, NvlsHeldToNvlinkOnOneNodeAndNicsAcross) {
  const uint64_t S = uint64_t{16} << 30;
  Topology one = Topology::from_config(cluster("b200", 1, 8));
  const Estimate node = CommModel(one, all_ranks(8), TuningEnv{}).estimate(CollType::kAllReduce, S);
  ASSERT_EQ(node.algo, kNvls);
  EXPECT_GT(node.busbw_gbs, 8 * 90.0 * 1.05);
  EXPECT_LT(node.busbw_gbs, 900);
  Topology two = Topology::from_config(cluster("b200", 2, 8));
  const Estimate across = CommModel(two, all_ranks(16), TuningEnv{}).estimate(CollType::kAllReduce, S);
  ASSERT_EQ(across.algo, kNvlsTree);
  const double nics = 8 * two.nics[0].gbytes;  // one node's NICs, after the network's efficiency
  EXPECT_NEAR(across.algbw_gbs / nics, 1.0, 0.05);
}

// A small ring LL AllReduce runs on the few channels NCCL's nc rule gives it (8 ranks x 32 KiB:
// one), and one channel moves LL lines no faster than LL128's per-channel cap scaled by the
// data in a line: on Hopper 36.7 GB/s x (8/16) / (120/128).
TEST(Planner, SmallLowLatencyOperationsRunAtTheirChannelsRate) {
  Topology topo = Topology::from_config(cluster("h100-sxm", 1, 8));
  CommModel model(topo, all_ranks(8), TuningEnv{});
  const Estimate e = model.estimate(CollType::kAllReduce, 32 * 1024);
  ASSERT_EQ(e.algo, kRing);
  ASSERT_EQ(e.proto, kLL);
  ASSERT_EQ(e.channels, 1);
  const double per_channel = 36.7 * 0.5 / (120.0 / 128);
  EXPECT_NEAR(e.data_us, 32 * 1024 / (per_channel * 8.0 / 14 * 1e3), 1e-6);
  // On 8 channels NCCL's cap for the whole ring (llMaxBw, 141 GB/s on one Hopper node) binds.
  const Estimate wide = model.estimate(CollType::kAllReduce, 256 * 1024);
  ASSERT_EQ(wide.channels, 8);
  EXPECT_NEAR(wide.data_us, 256 * 1024 / (141.0 * 8.0 / 14 * 1e3), 1e-6);
}

// An LL step over NVLink is the GPUs' own loop: a GPU clocked lower (A100, 1410 MHz) takes each
// step that much longer than Hopper (1980 MHz); Simple steps and other links keep their figures.
TEST(Planner, LowLatencyStepsOverNvlinkCountTheGpusClock) {
  const StepLatencies hopper = step_latencies(1980, false), ampere = step_latencies(1410, false);
  const double slower = 1980.0 / 1410;
  EXPECT_DOUBLE_EQ(hopper.at[kHwNvlink][kRing][kLL], kStepLat[kHwNvlink][kRing][kLL]);
  EXPECT_DOUBLE_EQ(ampere.at[kHwNvlink][kRing][kLL], kStepLat[kHwNvlink][kRing][kLL] * slower);
  EXPECT_DOUBLE_EQ(ampere.at[kHwNvlink][kTree][kLL128], kStepLat[kHwNvlink][kTree][kLL128] * slower);
  EXPECT_DOUBLE_EQ(ampere.at[kHwNvlink][kRing][kSimple], kStepLat[kHwNvlink][kRing][kSimple]);
  EXPECT_DOUBLE_EQ(ampere.at[kHwPci][kRing][kLL], kStepLat[kHwPci][kRing][kLL]);
  EXPECT_DOUBLE_EQ(ampere.at[kHwNet][kTree][kLL], kStepLat[kHwNet][kTree][kLL]);

  // 8 GPUs, 8 bytes: a ring LL AllReduce of 14 steps on either generation.
  const Estimate h100 = Fixture(cluster("h100-sxm", 1, 8)).model.estimate(CollType::kAllReduce, 8);
  const Estimate a100 = Fixture(cluster("a100-80gb", 1, 8)).model.estimate(CollType::kAllReduce, 8);
  ASSERT_EQ(h100.algo, kRing);
  ASSERT_EQ(a100.algo, kRing);
  ASSERT_EQ(a100.proto, kLL);
  EXPECT_NEAR(a100.latency_us - h100.latency_us, 14 * kStepLat[kHwNvlink][kRing][kLL] * (slower - 1), 1e-9);
}

// B200 beside x86 hosts takes 0.7 us more than Hopper for each LL and LL128 step over NVLink at
// the same clock (NVIDIA/nccl issue 1940); its Simple steps, network steps and NCCL's own tuner
// table do not change, nor do GB200's steps (Grace hosts).
TEST(Planner, B200LowLatencyStepsOverNvlinkTakeLonger) {
  const StepLatencies hopper = step_latencies(1980, false), b200 = step_latencies(1980, true);
  for (int p : {kLL, kLL128}) {
    EXPECT_DOUBLE_EQ(b200.at[kHwNvlink][kRing][p], hopper.at[kHwNvlink][kRing][p] + 0.7);
    EXPECT_DOUBLE_EQ(b200.at[kHwNvlink][kTree][p], hopper.at[kHwNvlink][kTree][p] + 0.7);
  }
  EXPECT_DOUBLE_EQ(b200.at[kHwNvlink][kRing][kSimple], hopper.at[kHwNvlink][kRing][kSimple]);
  EXPECT_DOUBLE_EQ(b200.at[kHwNet][kTree][kLL], hopper.at[kHwNet][kTree][kLL]);
  EXPECT_DOUBLE_EQ(b200.at[kHwNvlink][kNvls][kLL], 0.0);  // NVLS has no LL steps to slow

  // 8 GPUs, 8 bytes: a ring LL AllReduce of 14 steps, each 0.7 us longer on B200 (and a little for
  // its 1965 MHz clock); GB200 at the same clock pays the clock only.
  const Estimate h100 = Fixture(cluster("h100-sxm", 1, 8)).model.estimate(CollType::kAllReduce, 8);
  const Estimate b200_ring = Fixture(cluster("b200", 1, 8)).model.estimate(CollType::kAllReduce, 8);
  const Estimate gb200_ring = Fixture(cluster("gb200", 1, 8)).model.estimate(CollType::kAllReduce, 8);
  ASSERT_EQ(b200_ring.algo, kRing);
  ASSERT_EQ(b200_ring.proto, kLL);
  ASSERT_EQ(gb200_ring.algo, kRing);
  ASSERT_EQ(gb200_ring.proto, kLL);
  const double step = kStepLat[kHwNvlink][kRing][kLL], clock = step * (1980.0 / 1965 - 1);
  EXPECT_NEAR(b200_ring.latency_us - h100.latency_us, 14 * (clock + 0.7), 1e-9);
  EXPECT_NEAR(gb200_ring.latency_us - h100.latency_us, 14 * clock, 1e-9);
}

// A ring's last GPU waits on its last block, which has come around every link of the ring but one
// (AllReduce: two laps but two adjacent links). Across nodes that chain crosses every network
// link, one more than NCCL's tuner counts for AllGather and two more for AllReduce; with two GPUs
// a node one of AllReduce's two missing links is the network, and with one every link is.
TEST(Planner, RingTimeCountsTheNetworkLinksOfItsLastChain) {
  TuningEnv ring_ll;
  ring_ll.set_algo("ring");
  ring_ll.set_proto("ll");
  const StepLatencies s = step_latencies(1980, false);
  const double base = kBaseLat[kRing][kLL];
  const double intra = std::max(s.at[kHwNvlink][kRing][kLL], 1.0);  // at least NCCL's network overhead
  const double inter = std::max(s.at[kHwNet][kRing][kLL], 5.0);     // at least the network's latency
  auto latency = [&](int gpus, CollType coll) {
    const Estimate e = Fixture(cluster("h100-sxm", 2, gpus), {}, ring_ll).model.estimate(coll, 1024);
    EXPECT_EQ(e.algo, kRing);
    EXPECT_EQ(e.proto, kLL);
    return e.latency_us;
  };
  // 2 x 8: AllGather's 15 steps cross the network twice, AllReduce's 30 four times.
  EXPECT_NEAR(latency(8, CollType::kAllGather), base + 13 * intra + 2 * inter, 1e-9);
  EXPECT_NEAR(latency(8, CollType::kAllReduce), base + 26 * intra + 4 * inter, 1e-9);
  // 2 x 2: AllReduce's 6 steps cross it three times.
  EXPECT_NEAR(latency(2, CollType::kAllReduce), base + 3 * intra + 3 * inter, 1e-9);
  // 2 x 1: both of AllReduce's steps cross it, at NCCL's tree figure for a GPU alone on its node.
  EXPECT_NEAR(latency(1, CollType::kAllReduce), base + 2 * std::max(s.at[kHwNet][kTree][kLL], 5.0), 1e-9);
}

// NCCL's latency formula counts floor(log2(nodes)) levels of its tree across nodes; its binary
// tree is one level deeper between powers of two (10 nodes: 0-8-4-2-1), and the modeled time
// counts the levels its deepest node crosses, up and down.
TEST(Planner, TreeTimeCountsTheLevelsOfItsDeepestNode) {
  const std::map<int, int> depth = {{2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {10, 4}, {16, 4}, {20, 5}};
  for (auto [nodes, levels] : depth) {
    Fixture f(cluster("h100-sxm", nodes, 1));
    EXPECT_EQ(f.model.tree_depth(), levels) << nodes << " nodes";
    int deepest = 0;  // the model's own trees agree
    for (const auto& tree : f.model.trees())
      for (int r = 0; r < nodes; ++r) {
        int up = 0;
        for (int at = r; tree[at].parent >= 0; at = tree[at].parent) ++up;
        deepest = std::max(deepest, up);
      }
    EXPECT_EQ(deepest, levels) << nodes << " nodes";
  }
  TuningEnv tree_ll;
  tree_ll.set_algo("tree");
  tree_ll.set_proto("ll");
  const StepLatencies s = step_latencies(1980, false);
  const Estimate e = Fixture(cluster("h100-sxm", 10, 8), {}, tree_ll).model.estimate(CollType::kAllReduce, 1024);
  ASSERT_EQ(e.algo, kTree);
  ASSERT_EQ(e.proto, kLL);
  const double inter = std::max(s.at[kHwNet][kTree][kLL], 5.0);  // at least the network's latency
  EXPECT_NEAR(e.latency_us, kBaseLat[kTree][kLL] + 2 * (7 * s.at[kHwNvlink][kTree][kLL] + 4 * inter), 1e-9);
}

// NCCL_BUFFSIZE sets a Simple step (an eighth of the buffer): a tree's first chunk crosses its
// levels in steps twice as long with twice the buffer. NCCL_NVLS_CHUNKSIZE and
// NCCL_NVLSTREE_MAX_CHUNKSIZE set the NVLS chunks, which NCCL shrinks for smaller buffers.
TEST(Planner, BufferAndChunkSettingsSetTheFill) {
  TuningEnv tree_simple;
  tree_simple.set_algo("tree");
  tree_simple.set_proto("simple");
  TuningEnv big = tree_simple;
  big.buffsize = 8 << 20;
  const uint64_t bytes = 64ull << 20;
  const Estimate base = Fixture(cluster("h100-sxm", 2, 8), {}, tree_simple).model.estimate(CollType::kAllReduce, bytes);
  const Estimate doubled = Fixture(cluster("h100-sxm", 2, 8), {}, big).model.estimate(CollType::kAllReduce, bytes);
  ASSERT_GT(base.fill_us, 0);
  EXPECT_NEAR(doubled.fill_us, 2 * base.fill_us, 1e-9);
  EXPECT_DOUBLE_EQ(doubled.data_us, base.data_us);

  // 2 nodes of 8 H100: 16 NVLS channels x 8 heads. The default 128 KiB chunk holds at 1 GiB and
  // shrinks to 64 KiB below 4 x 128 x 128 KiB = 64 MiB; a 512 KiB chunk halves below 2 GiB, then
  // below 512 MiB.
  TuningEnv nvls_tree;
  nvls_tree.set_algo("nvlstree");
  Fixture plain(cluster("h100-sxm", 2, 8), {}, nvls_tree);
  EXPECT_DOUBLE_EQ(plain.model.nvls_chunk(kNvlsTree, 1ull << 30), 128 * 1024);
  EXPECT_DOUBLE_EQ(plain.model.nvls_chunk(kNvlsTree, 32ull << 20), 64 * 1024);
  EXPECT_DOUBLE_EQ(plain.model.nvls_chunk(kNvlsTree, 4ull << 20), 32 * 1024);
  nvls_tree.nvls_chunksize = nvls_tree.nvls_tree_max_chunksize = 512 * 1024;
  Fixture large(cluster("h100-sxm", 2, 8), {}, nvls_tree);
  EXPECT_DOUBLE_EQ(large.model.nvls_chunk(kNvlsTree, 4ull << 30), 512 * 1024);  // 32 x 128 x 512 KiB = 2 GiB
  EXPECT_DOUBLE_EQ(large.model.nvls_chunk(kNvlsTree, 1ull << 30), 256 * 1024);
  EXPECT_DOUBLE_EQ(large.model.nvls_chunk(kNvlsTree, 256ull << 20), 128 * 1024);
  // From four nodes on NCCL holds an NVLS tree's chunk to 64 KiB unless told otherwise.
  nvls_tree.nvls_tree_max_chunksize = 0;
  EXPECT_DOUBLE_EQ(Fixture(cluster("h100-sxm", 4, 8), {}, nvls_tree).model.nvls_chunk(kNvlsTree, 64ull << 30), 65536);
}

// NVLS's efficiency is the switch's reduction over NVLink. An NVLS tree's heads move their share
// between the NIC and their memory over PCIe as plain data: on 2 H100 of each of 4 nodes the
// NICs set its rate, where PCIe at NVLS's 0.85 would have held it lower.
TEST(Planner, NvlsTreeHeadsMoveNetworkDataOverPcieAtItsRate) {
  TuningEnv nvls_tree;
  nvls_tree.set_algo("nvlstree");
  Fixture f(cluster("h100-sxm", 4, 8), {0, 1, 8, 9, 16, 17, 24, 25}, nvls_tree);
  const uint64_t bytes = 1ull << 30;
  const Estimate e = f.model.estimate(CollType::kAllReduce, bytes);
  ASSERT_EQ(e.algo, kNvlsTree);
  double nic_us = 0, pcie_us = 0;
  for (const LinkLoad& l : e.link_bytes()) {
    const Link& link = f.topo.links[l.link];
    const double us = l.bytes / link.gbytes / 1e3;
    if (is_nic(link.kind)) nic_us = std::max(nic_us, us);
    if (is_pcie(link.kind)) pcie_us = std::max(pcie_us, us);
  }
  ASSERT_GT(pcie_us, 0);
  ASSERT_GT(pcie_us / 0.85, nic_us);
  EXPECT_NEAR(e.data_us, std::max(nic_us, pcie_us), 1e-6 * e.data_us);
}

// A ring's Simple channel is one thread block that receives and sends at once, 20 GB/s each way on
// H100: NCCL's 16 channels hold eight 400 Gbit/s NICs to 320 GB/s of bus bandwidth, and
// NCCL_MIN_CTAS=24 lets the NICs set the rate (NVIDIA/nccl-tests issue 309: 391 GB/s on 8 nodes).
// An LL128 channel is held the same way, less its flags. On one node the NVLinks, not 24 channels,
// set the rate.
TEST(Planner, RingChannelsCarryWhatTheirBlocksCopy) {
  const uint64_t bytes = 16ull << 30;
  Fixture sixteen(cluster("h100-sxm", 8, 8));
  ASSERT_EQ(sixteen.model.channels(), 16);
  const Estimate held = sixteen.model.estimate(CollType::kAllGather, bytes);
  ASSERT_EQ(held.algo, kRing);
  EXPECT_NEAR(held.busbw_gbs, 16 * 20.0, 0.01 * 320);
  const uint64_t mid = 128ull << 20;
  const Estimate ll128 = sixteen.model.estimate(CollType::kAllGather, mid);
  ASSERT_EQ(ll128.proto, kLL128);
  EXPECT_NEAR(ll128.data_us, mid * 63.0 / 64 / (16 * 20.0 * 120 / 128) / 1e3, 1e-6 * ll128.data_us);
  TuningEnv more;
  more.min_ctas = 24;
  Fixture twenty_four(cluster("h100-sxm", 8, 8), {}, more);
  ASSERT_EQ(twenty_four.model.channels(), 24);
  const Estimate freed = twenty_four.model.estimate(CollType::kAllGather, bytes);
  EXPECT_GT(freed.busbw_gbs, 1.12 * held.busbw_gbs);
  EXPECT_LT(freed.busbw_gbs, 8 * 50.0);  // the NICs' line rate
  Fixture one_node(cluster("h100-sxm", 1, 8));
  const Estimate links = one_node.model.estimate(CollType::kAllGather, bytes);
  EXPECT_GT(links.busbw_gbs, 360);
  EXPECT_LT(links.busbw_gbs, 24 * 20.0 * 0.8);
  // Blackwell's rings across nodes outrun their p2p channels' copy: their NICs set the rate.
  Fixture b200(cluster("b200", 2, 8));
  ASSERT_EQ(b200.model.channels(), 16);
  EXPECT_GT(b200.model.estimate(CollType::kAllGather, bytes).busbw_gbs, 1.1 * 16 * 20.0);
}

// An NVLS tree's network data goes through its channels' blocks on the heads: on 8 x 8 H100 two of
// NCCL's 16 NVLS channels feed each NIC, 40 GB/s each way where the NIC carries 47.5. With 24
// channels (three a NIC) the blocks no longer set the rate.
TEST(Planner, NvlsTreeNicsCarryWhatTheirChannelsCopy) {
  const uint64_t bytes = 16ull << 30;
  TuningEnv nvls_tree;
  nvls_tree.set_algo("nvlstree");
  Fixture sixteen(cluster("h100-sxm", 8, 8), {}, nvls_tree);
  ASSERT_EQ(sixteen.model.nvls_channels(), 16);
  const Estimate held = sixteen.model.estimate(CollType::kAllReduce, bytes);
  ASSERT_EQ(held.algo, kNvlsTree);
  double nic_bytes = 0;
  for (const LinkLoad& l : held.link_bytes())
    if (is_nic(sixteen.topo.links[l.link].kind)) nic_bytes = std::max(nic_bytes, l.bytes);
  EXPECT_NEAR(held.data_us, nic_bytes / (2 * 20.0) / 1e3, 1e-6 * held.data_us);
  TuningEnv more = nvls_tree;
  more.min_ctas = 24;
  Fixture twenty_four(cluster("h100-sxm", 8, 8), {}, more);
  ASSERT_EQ(twenty_four.model.nvls_channels(), 24);
  const Estimate freed = twenty_four.model.estimate(CollType::kAllReduce, bytes);
  double link_us = 0;
  for (const LinkLoad& l : freed.link_bytes()) {
    const Link& link = twenty_four.topo.links[l.link];
    if (is_nic(link.kind) || is_pcie(link.kind)) link_us = std::max(link_us, l.bytes / link.gbytes / 1e3);
  }
  EXPECT_GE(freed.data_us, link_us);
  EXPECT_LT(freed.data_us, 0.9 * held.data_us);
}

// NCCL_MIN_CTAS and NCCL_MAX_CTAS bound the communicator's channels as NCCL_MIN_NCHANNELS and
// NCCL_MAX_NCHANNELS do, and NVLS's channels as well, which the NCHANNELS settings leave alone.
TEST(Planner, CtaBoundsMoveRingAndNvlsChannels) {
  TuningEnv few, many, nchannels;
  few.max_ctas = 8;
  many.min_ctas = 32;
  nchannels.min_channels = 32;
  Fixture at_most(cluster("h100-sxm", 1, 8), {}, few), at_least(cluster("h100-sxm", 1, 8), {}, many),
      rings_only(cluster("h100-sxm", 1, 8), {}, nchannels);
  EXPECT_EQ(at_most.model.channels(), 8);
  EXPECT_EQ(at_most.model.nvls_channels(), 8);
  EXPECT_EQ(at_least.model.channels(), 32);
  EXPECT_EQ(at_least.model.nvls_channels(), 32);
  EXPECT_EQ(rings_only.model.channels(), 32);
  EXPECT_EQ(rings_only.model.nvls_channels(), 16);
  TuningEnv crossed;  // a least above the most: NCCL lowers the least to the most
  crossed.min_ctas = 32;
  crossed.max_ctas = 8;
  Fixture both(cluster("h100-sxm", 1, 8), {}, crossed);
  EXPECT_EQ(both.model.channels(), 8);
  EXPECT_EQ(both.model.nvls_channels(), 8);
}

// NCCL counts the NVLS rounds in flight as channels x heads, and an NVL72 rack has 32 heads (the
// NVLS graph's channels), not 72: its 24 channels x 32 heads keep the 64 KiB chunk down to 8 x 768
// x 64 KiB = 384 MiB, where counting every GPU as a head would halve it below 864 MiB.
TEST(Planner, NvlsRoundsCountTheHeadsNotTheGpus) {
  Fixture rack(preset("gb200-nvl72-1node.yaml"));
  ASSERT_EQ(rack.model.graph(kNvls).channels, 32);
  ASSERT_EQ(rack.model.nvls_channels(), 24);
  EXPECT_DOUBLE_EQ(rack.model.nvls_chunk(kNvls, 512ull << 20), 64 * 1024);
  EXPECT_DOUBLE_EQ(rack.model.nvls_chunk(kNvls, 256ull << 20), 32 * 1024);
}

// NCCL 2.30 scales a tree AllReduce's bandwidth at medium sizes, and an NVLS tree's too where
// Blackwell GPUs sit beside x86 CPUs (B200 boards), not beside Grace (GB200).
TEST(Planner, TreeCorrectionFactors) {
  const uint64_t mid = 1 << 20;  // log2(mid / 64) = 14: the tree's dip
  EXPECT_DOUBLE_EQ(tree_correction(kAllReduce, kTree, kSimple, mid, false), 0.5);
  EXPECT_DOUBLE_EQ(tree_correction(kAllReduce, kNvlsTree, kSimple, mid, true), 0.5);
  EXPECT_DOUBLE_EQ(tree_correction(kAllReduce, kNvlsTree, kSimple, mid, false), 1.0);
  EXPECT_DOUBLE_EQ(tree_correction(kAllReduce, kRing, kSimple, mid, true), 1.0);
  EXPECT_DOUBLE_EQ(tree_correction(kAllGather, kTree, kSimple, mid, true), 1.0);
  EXPECT_DOUBLE_EQ(tree_correction(kAllReduce, kNvlsTree, kSimple, uint64_t{1} << 29, true), 0.9);  // index 23
  EXPECT_DOUBLE_EQ(tree_correction(kAllReduce, kTree, kSimple, uint64_t{1} << 29, false), 1.0);
  EXPECT_TRUE(find_gpu_profile("gb200")->arm_host);
  EXPECT_FALSE(find_gpu_profile("b200")->arm_host);
}

TEST(Planner, LowLatencyProtocolForSmallMessages) {
  Fixture f(cluster("h100-sxm", 2, 8));
  for (uint64_t bytes : {8ull, 1024ull, 8192ull}) {
    auto e = f.model.estimate(CollType::kAllReduce, bytes);
    EXPECT_EQ(e.proto, kLL) << bytes;
    EXPECT_GT(e.time_us, 0);
  }
  EXPECT_EQ(f.model.estimate(CollType::kAllReduce, 1ull << 30).proto, kSimple);
}

TEST(Planner, ForcedAlgorithmAndProtocolAreRespected) {
  TuningEnv env;
  env.set_algo("tree");
  env.set_proto("simple");
  Fixture f(cluster("h100-sxm", 2, 8), {}, env);
  auto e = f.model.estimate(CollType::kAllReduce, 1ull << 30);
  EXPECT_EQ(e.algo, kTree);
  EXPECT_EQ(e.proto, kSimple);
  // Broadcast has only Ring: forcing Tree leaves nothing, which NCCL reports as an error.
  EXPECT_THROW(f.model.estimate(CollType::kBroadcast, 1 << 20), TuningError);

  TuningEnv per_func;
  per_func.set_algo("ring;allreduce:tree");
  Fixture g(cluster("h100-sxm", 2, 8), {}, per_func);
  EXPECT_EQ(g.model.estimate(CollType::kAllReduce, 1ull << 30).algo, kTree);
  EXPECT_EQ(g.model.estimate(CollType::kAllGather, 1ull << 30).algo, kRing);
}

TEST(Planner, BadOverridesNameTheVariableAndToken) {
  TuningEnv env;
  try {
    env.set_algo("ring,hypercube");
    FAIL() << "accepted an unknown algorithm";
  } catch (const TuningError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL_ALGO"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("hypercube"), std::string::npos) << e.what();
  }
  EXPECT_THROW(env.set_proto("allreduce:LL;bogus:Simple"), TuningError);
}

// Split communicators keep the GPUs (and so the NICs) of their ranks: a DP pair across nodes
// uses the rail of its GPUs, a TP group inside a node touches no NIC.
TEST(Planner, SplitCommunicatorsSitOnTheirGpusAndNics) {
  ClusterConfig c = cluster("h100-sxm", 2, 8);
  Topology topo = Topology::from_config(c);
  CommModel dp(topo, {3, 11}, TuningEnv{});
  EXPECT_EQ(dp.nnodes(), 2);
  auto e = dp.estimate(CollType::kAllReduce, 1 << 20);
  std::set<std::string> links;
  for (const auto& l : e.link_bytes()) links.insert(topo.links[l.link].name);
  EXPECT_TRUE(links.count("node0/nic3 tx")) << "DP rank on node0/gpu3 should use its rail NIC";
  EXPECT_TRUE(links.count("node1/nic3 rx"));
  for (const auto& name : links) EXPECT_EQ(name.find("nic0"), std::string::npos) << name;

  CommModel tp(topo, {8, 9, 10, 11, 12, 13, 14, 15}, TuningEnv{});
  EXPECT_EQ(tp.nnodes(), 1);
  auto t = tp.estimate(CollType::kAllReduce, 1 << 20);
  for (const auto& l : t.link_bytes()) {
    EXPECT_EQ(topo.links[l.link].name.rfind("node1/gpu", 0), 0u) << topo.links[l.link].name;
    EXPECT_TRUE(is_nvlink(topo.links[l.link].kind));
  }
}

// More NICs than GPUs (AWS p5: 32 x 100 Gbit/s for 8 GPUs): a GPU's NICs work as one rail at
// their summed rate, so the node's bandwidth is all usable, not one 100G NIC per GPU.
TEST(Planner, NicsThatOutnumberGpusFuseIntoEachGpusRail) {
  Topology eight = Topology::from_config(cluster("h100-sxm", 2, 8));
  Topology thirty_two = Topology::from_config(cluster("h100-sxm", 2, 8, ", nics_per_node: 32"));
  ASSERT_EQ(thirty_two.nics.size(), eight.nics.size());
  for (size_t i = 0; i < eight.nics.size(); ++i) {
    EXPECT_DOUBLE_EQ(thirty_two.nics[i].line_gbytes, 50.0);
    EXPECT_EQ(thirty_two.nics[i].gpus, eight.nics[i].gpus);
  }
  CommModel a(eight, all_ranks(16), TuningEnv{}), b(thirty_two, all_ranks(16), TuningEnv{});
  EXPECT_DOUBLE_EQ(b.estimate(CollType::kAllReduce, 1ull << 30).time_us, a.estimate(CollType::kAllReduce, 1ull << 30).time_us);

  // Listed NICs on the same rail fuse too; a NIC on no rail stays apart.
  ClusterConfig listed = cluster("h100-sxm", 2, 2);
  for (auto& node : listed.nodes) node.nics = {{100, {0}}, {100, {0}}, {200, {1}}, {100, {}}};
  Topology fused = Topology::from_config(listed);
  ASSERT_EQ(fused.nics.size(), 6u);
  EXPECT_DOUBLE_EQ(fused.nics[0].line_gbytes, 25.0);
  EXPECT_DOUBLE_EQ(fused.nics[1].line_gbytes, 25.0);
  EXPECT_TRUE(fused.nics[2].gpus.empty());
}

// A GPU described in the file with half the PCIe lanes moves a PCIe node's large AllReduce at
// half the rate; one without peer access reaches the others through host memory.
TEST(Planner, DescribedGpusPcieWidthAndPeerAccess) {
  auto node = [](const std::string& type) {
    return parse_cluster_config("version: 1\ncluster: {name: t}\ngpu_types:\n  card: " + type +
                                    "\nnodes:\n  - {id: n0, ranks: [0, 1, 2, 3], gpus: [{profile: card}, {profile: card}, "
                                    "{profile: card}, {profile: card}]}\nfabric:\n  intra_node: {type: pcie, "
                                    "bandwidth_gbps: 512, latency_us: 2}\n",
                                "t.yaml");
  };
  Fixture x16(node("{memory_gib: 24, sm_count: 128, compute_capability: 8.9}"));
  Fixture x8(node("{memory_gib: 24, sm_count: 128, compute_capability: 8.9, pcie_width: 8}"));
  Fixture host(node("{memory_gib: 24, sm_count: 128, compute_capability: 8.9, p2p: false}"));
  const double wide = x16.model.estimate(CollType::kAllReduce, 1ull << 30).data_us;
  EXPECT_NEAR(x8.model.estimate(CollType::kAllReduce, 1ull << 30).data_us / wide, 2.0, 0.05);
  EXPECT_EQ(x16.topo.path_type(0, 1), PathType::kPhb);
  EXPECT_EQ(host.topo.path_type(0, 1), PathType::kSys);
  // Without peer access the data goes through host memory: slower to move, and each of a
  // ring AllReduce's 2(n-1) LL steps waits one more read across PCIe.
  EXPECT_FALSE(x16.model.host_memory_inside_nodes());
  EXPECT_TRUE(host.model.host_memory_inside_nodes());
  EXPECT_NEAR(host.model.estimate(CollType::kAllReduce, 1ull << 30).data_us / wide, 1 / kShmRateShare, 0.05);
  const Estimate p2p_small = x16.model.estimate(CollType::kAllReduce, 8), shm_small = host.model.estimate(CollType::kAllReduce, 8);
  ASSERT_EQ(p2p_small.proto, kLL);
  ASSERT_EQ(shm_small.proto, kLL);
  EXPECT_NEAR(shm_small.latency_us - p2p_small.latency_us,
              6 * (kStepLat[kHwShm][kRing][kLL] - kStepLat[kHwPci][kRing][kLL]), 1e-9);
}

// Networks beyond InfiniBand: each type's share of the line rate and the latency its NCCL
// plugin reports (AWS's EFA: 75 us, which NCCL's tuner adds to every network step), both
// overridable; a plugin that allows only Simple (EFA on p4d) takes LL and LL128 away.
TEST(Planner, NetworkTypesEfficiencyPluginLatencyAndProtocols) {
  auto net = [](const std::string& inter) {
    return Topology::from_config(cluster("h100-sxm", 2, 8, ", " + inter));
  };
  Topology ib = Topology::from_config(cluster("h100-sxm", 2, 8));
  EXPECT_DOUBLE_EQ(ib.nics[0].gbytes, 50 * 0.95);
  EXPECT_DOUBLE_EQ(ib.plugin_latency_us, 0);
  ClusterConfig efa_config = cluster("h100-sxm", 2, 8);
  efa_config.inter_node.type = "efa";
  Topology efa = Topology::from_config(efa_config);
  EXPECT_DOUBLE_EQ(efa.nics[0].gbytes, 50 * 0.90);
  EXPECT_DOUBLE_EQ(efa.plugin_latency_us, 75);
  Topology tuned = net("efficiency: 0.8, plugin_latency_us: 35");
  EXPECT_DOUBLE_EQ(tuned.nics[0].gbytes, 50 * 0.8);
  EXPECT_DOUBLE_EQ(tuned.plugin_latency_us, 35);

  CommModel plain(ib, all_ranks(16), TuningEnv{});
  EXPECT_NE(plain.estimate(CollType::kAllReduce, 1024).proto, kSimple);
  Topology simple = net("simple_only: true");
  CommModel restricted(simple, all_ranks(16), TuningEnv{});
  EXPECT_EQ(restricted.estimate(CollType::kAllReduce, 1024).proto, kSimple);
  CommModel one_node(simple, all_ranks(8), TuningEnv{});  // an environment variable: every communicator
  EXPECT_EQ(one_node.estimate(CollType::kAllReduce, 1024).proto, kSimple);
}

// Textbook volumes: ring AllReduce sends 2(n-1)/n x S from every rank; ring AllGather (n-1)/n;
// tree AllReduce sends S up and S down over every tree edge.
TEST(Planner, LinkBytesMatchWhatTheAlgorithmMoves) {
  const double S = 64.0 * (1 << 20);
  TuningEnv ring;
  ring.set_algo("ring");
  Fixture f(cluster("h100-sxm", 1, 8), {}, ring);
  auto e = f.model.estimate(CollType::kAllReduce, static_cast<uint64_t>(S));
  ASSERT_EQ(e.algo, kRing);
  std::map<int, double> tx;
  for (const auto& l : e.link_bytes())
    if (f.topo.links[l.link].kind == LinkKind::kNvlTx) tx[f.topo.links[l.link].owner] += l.bytes;
  ASSERT_EQ(tx.size(), 8u);
  for (auto& [gpu, bytes] : tx) EXPECT_NEAR(bytes, 2.0 * 7 / 8 * S, 1.0) << "gpu " << gpu;

  auto ag = f.model.estimate(CollType::kAllGather, static_cast<uint64_t>(S));
  double total = 0;
  for (const auto& l : ag.link_bytes())
    if (f.topo.links[l.link].kind == LinkKind::kNvlTx) total += l.bytes;
  EXPECT_NEAR(total, 8 * 7.0 / 8 * S, 8.0);

  TuningEnv tree;
  tree.set_algo("tree");
  Fixture t(cluster("a100-80gb", 2, 8), {}, tree);
  auto te = t.model.estimate(CollType::kAllReduce, static_cast<uint64_t>(S));
  ASSERT_EQ(te.algo, kTree);
  double nic_tx = 0;
  for (const auto& l : te.link_bytes())
    if (t.topo.links[l.link].kind == LinkKind::kNicTx) nic_tx += l.bytes;
  // Two nodes: each channel's tree has one inter-node edge, crossed by S/nc up and S/nc down.
  EXPECT_NEAR(nic_tx, 2 * S, 1.0);
}

// The flow plan per channel and step: the one description of an algorithm's traffic.
TEST(Planner, FlowPlanPerChannelAndStep) {
  Fixture f(cluster("h100-sxm", 1, 8));
  const int n = 8;
  // Ring AllReduce: on every channel each rank passes one chunk to its ring successor at each
  // of the 2(n-1) steps; over all channels a rank sends 2(n-1)/n of the buffer.
  std::map<int, double> sent;
  std::set<std::pair<int, int>> senders;  // (channel, rank)
  for (const Flow& fl : f.model.flow_plan(CollType::kAllReduce, kRing)) {
    EXPECT_EQ(fl.steps, 2 * (n - 1));
    EXPECT_TRUE(senders.insert({fl.channel, fl.src}).second) << "one successor per rank and channel";
    sent[fl.src] += fl.bytes * fl.steps;
  }
  EXPECT_EQ(senders.size(), static_cast<size_t>(f.model.channels() * n));
  for (auto [rank, share] : sent) EXPECT_NEAR(share, 2.0 * (n - 1) / n, 1e-9) << rank;

  // NVLS AllReduce: reduce into the switch first, multicast from it last.
  int first_to_switch = 1 << 30, last_from_switch = -1;
  for (const Flow& fl : f.model.flow_plan(CollType::kAllReduce, kNvls)) {
    EXPECT_TRUE(fl.src == Flow::kSwitch || fl.dst == Flow::kSwitch) << "NVLS moves data through the switch only";
    if (fl.dst == Flow::kSwitch) first_to_switch = std::min(first_to_switch, fl.step);
    if (fl.src == Flow::kSwitch) last_from_switch = std::max(last_from_switch, fl.step);
  }
  EXPECT_LT(first_to_switch, last_from_switch);

  // Tree AllReduce across nodes: every reduction step comes before every broadcast step.
  Fixture t(cluster("a100-80gb", 4, 8));
  for (int c = 0; c < t.model.channels(); ++c) {
    int last_up = -1, first_down = 1 << 30;
    for (const Flow& fl : t.model.flow_plan(CollType::kAllReduce, kTree)) {
      if (fl.channel != c) continue;
      bool up = t.model.trees()[c][fl.src].parent == fl.dst;
      if (up) last_up = std::max(last_up, fl.step);
      else first_down = std::min(first_down, fl.step);
    }
    EXPECT_LT(last_up, first_down) << "channel " << c;
  }
}

// An NVLS tree crosses nodes through its heads only (NCCL's connectNvls): one GPU beside each
// NIC, as many as the NVLS graph has channels (32 on racks of 72 GB200 and 72 NICs, not 72),
// head h of a node talking to head h of the other.
TEST(Planner, NvlsTreeCrossesNodesThroughItsHeads) {
  Fixture f(cluster("gb200", 2, 72));
  ASSERT_EQ(f.model.graph(kNvlsTree).channels, 32);
  std::set<int> senders;
  double sent = 0;
  for (const Flow& fl : f.model.flow_plan(CollType::kAllReduce, kNvlsTree)) {
    if (fl.src < 0 || fl.dst < 0 || f.model.node_of(fl.src) == f.model.node_of(fl.dst)) continue;
    senders.insert(fl.src);
    EXPECT_EQ(fl.src % 72, fl.dst % 72) << "head " << fl.src << " to " << fl.dst;
    sent += fl.bytes * fl.steps;
  }
  EXPECT_EQ(senders.size(), 64u);
  // Two nodes, one edge per half of the tree, crossed up and down by that half's buffer.
  EXPECT_NEAR(sent, 2.0, 1e-9);
}

TEST(Planner, TimeGrowsWithSizeAndBandwidthSaturates) {
  Fixture f(cluster("a100-80gb", 2, 8));
  double prev = 0;
  for (uint64_t bytes = 8; bytes <= (8ull << 30); bytes *= 4) {
    auto e = f.model.estimate(CollType::kAllReduce, bytes);
    EXPECT_GT(e.time_us, prev) << bytes;
    prev = e.time_us;
  }
  // Two nodes of A100 with eight 400G NICs each: every ring channel leaves a node through a
  // GPU's PCIe Gen4 link to its NIC, so 8 x 24 GB/s bounds the bus bandwidth (NVLink's
  // 240 and the NICs' 8 x 47.5 are higher), and large messages approach it.
  TuningEnv ring;
  ring.set_algo("ring");
  Fixture r(cluster("a100-80gb", 2, 8), {}, ring);
  double busbw = r.model.estimate(CollType::kAllReduce, 8ull << 30).busbw_gbs;
  EXPECT_LE(busbw, 8 * 24.0);
  EXPECT_GT(busbw, 0.9 * 8 * 24.0);
}

// A tree's first chunk crosses every level up and down before the slowest level sets the pace:
// the start-up grows with the levels, dominates when each channel's share is one chunk, and
// fades for large messages.
TEST(Planner, TreeFillCrossesEveryLevelOnce) {
  TuningEnv tree_ll128;
  tree_ll128.set_algo("tree");
  tree_ll128.set_proto("ll128");
  Fixture two(cluster("h100-sxm", 2, 8), {}, tree_ll128);
  Fixture eight(cluster("h100-sxm", 8, 8), {}, tree_ll128);
  auto e2 = two.model.estimate(CollType::kAllReduce, 1 << 20);
  auto e8 = eight.model.estimate(CollType::kAllReduce, 1 << 20);
  ASSERT_EQ(e2.algo, kTree);
  EXPECT_GT(e2.fill_us, 0);
  EXPECT_GT(e8.fill_us, e2.fill_us);  // 20 levels against 16

  TuningEnv tree_simple;
  tree_simple.set_algo("tree");
  tree_simple.set_proto("simple");
  Fixture s(cluster("h100-sxm", 2, 8), {}, tree_simple);
  // 256 KiB over 16 channels: each share is one 16 KiB chunk, passed on level by level.
  auto small = s.model.estimate(CollType::kAllReduce, 256 << 10);
  EXPECT_GT(small.fill_us, 8 * small.data_us);
  // 1 GiB: 128 chunks of 512 KiB a channel, the start-up is a few percent.
  auto large = s.model.estimate(CollType::kAllReduce, 1ull << 30);
  EXPECT_GT(large.fill_us, 0);
  EXPECT_LT(large.fill_us, 0.1 * large.data_us);
}

// A broadcast's or reduce's chain fills behind the previous operation: its time is NCCL's
// latency and the busiest link's data, at any size, where a ring still shows its last slice.
// Data moves at the same rate for both: every GPU of a chain sends the whole buffer once.
TEST(Planner, ChainsHideTheirFillBehindTheNextOperation) {
  Fixture f(cluster("b200", 1, 8));
  for (uint64_t bytes : {16ull << 20, 64ull << 20, 1ull << 30}) {
    for (CollType coll : {CollType::kBroadcast, CollType::kReduce}) {
      const Estimate e = f.model.estimate(coll, bytes);
      ASSERT_EQ(e.algo, kRing);
      EXPECT_EQ(e.fill_us, 0) << bytes;
      EXPECT_DOUBLE_EQ(e.time_us, e.latency_us + e.data_us) << bytes;
    }
    EXPECT_GT(f.model.estimate(CollType::kAllGather, bytes).fill_us, 0) << bytes;
  }
  const Estimate bcast = f.model.estimate(CollType::kBroadcast, 1ull << 30);
  const Estimate gather = f.model.estimate(CollType::kAllGather, 1ull << 30);
  EXPECT_NEAR(bcast.data_us, gather.data_us * 8 / 7, 0.01 * bcast.data_us);
}

TEST(Planner, PointToPointUsesThePeersPathOnly) {
  Fixture f(cluster("h100-sxm", 2, 1));
  auto e = f.model.estimate(CollType::kSend, 1ull << 30);
  EXPECT_EQ(e.algo, -1);
  EXPECT_NEAR(e.busbw_gbs, 50 * 0.95, 50 * 0.95 * 0.05);  // one NDR NIC
}

TEST(Planner, VirtualBusIdsAreUniqueAcrossNodes) {
  Topology topo = Topology::from_config(cluster("h100-sxm", 2, 8));
  std::set<std::string> ids;
  for (const auto& g : topo.gpus) ids.insert(g.bus_id);
  EXPECT_EQ(ids.size(), 16u);
  EXPECT_EQ(topo.gpus[0].bus_id, "0000:01:00.0");
  EXPECT_EQ(topo.gpus[8].bus_id, "0001:01:00.0");
}

}  // namespace
}  // namespace fakegpu::planner
