// The cost model follows the NCCL release it is asked to: each release's algorithms, channel
// counts and tuner, and the same physics for what every release runs alike.
#include <gtest/gtest.h>

#include "nccl_memory.h"
#include "preset_model.h"

namespace fakegpu::planner {
namespace {

TuningEnv release(int version) {
  TuningEnv env;
  env.nccl_version = version;
  return env;
}

std::string preset_path(const std::string& file) { return std::string(FAKEGPU_SOURCE_DIR) + "/configs/presets/" + file; }

// PAT (AllGather and ReduceScatter, one GPU a node) came in 2.23: forced on 2.22 nothing runs.
TEST(NcclReleases, PatArrivesIn223) {
  const Topology topo = Topology::from_config(load_cluster_config(preset_path("dgx-h100-4node.yaml")));
  const std::vector<int> one_gpu_a_node = {0, 8, 16, 24};
  TuningEnv before = release(22203), since = release(22304);
  before.set_algo("pat");
  since.set_algo("pat");
  EXPECT_THROW(CommModel(topo, one_gpu_a_node, before).estimate(wire::CollType::kAllGather, 64 << 20), TuningError);
  const Estimate e = CommModel(topo, one_gpu_a_node, since).estimate(wire::CollType::kAllGather, 64 << 20);
  EXPECT_EQ(e.algo, kPat);
}

// NVLS AllGather and ReduceScatter on one node came in 2.19; NVLS AllReduce was there before.
TEST(NcclReleases, NvlsGathersArriveIn219) {
  const Preset old("dgx-h100-1node.yaml", release(21805)), newer("dgx-h100-1node.yaml", release(21903));
  EXPECT_FALSE(old.model.algo_available(kAllGather, kNvls, kSimple));
  EXPECT_FALSE(old.model.algo_available(kReduceScatter, kNvls, kSimple));
  EXPECT_TRUE(old.model.algo_available(kAllReduce, kNvls, kSimple));
  EXPECT_TRUE(newer.model.algo_available(kAllGather, kNvls, kSimple));
}

// Blackwell's NVLS channels: 16 as every GPU's until 2.25, 32 in 2.25 and 2.26, 24 on one node
// from 2.27 (32 across nodes). Hopper keeps 16 throughout.
TEST(NcclReleases, NvlsChannelsFollowTheRelease) {
  EXPECT_EQ(Preset("dgx-b200-1node.yaml", release(22403)).model.nvls_channels(), 16);
  EXPECT_EQ(Preset("dgx-b200-1node.yaml", release(22501)).model.nvls_channels(), 32);
  EXPECT_EQ(Preset("dgx-b200-1node.yaml", release(22707)).model.nvls_channels(), 24);
  EXPECT_EQ(Preset("dgx-b200-2node.yaml", release(22707)).model.nvls_channels(), 32);
  EXPECT_EQ(Preset("dgx-h100-1node.yaml", release(21805)).model.nvls_channels(), 16);
  EXPECT_EQ(Preset("dgx-h100-1node.yaml").model.nvls_channels(), 16);
}

// 2.30 tunes Blackwell's NVLS across nodes by the nodes, the fewest GPUs a node and the NICs'
// speed (nvls.cc). 400G NICs beside their GPUs: two nodes of 8 keep 32 channels and cap an NVLS
// tree's chunk at 64 KiB (before: the chunk itself, 128 KiB, under four nodes); three and four
// nodes take 24 channels; two nodes of 4 GPUs take 256 KiB chunks, and NCCL's NVLS buffers
// double with them. Each setting still wins where it is set.
TEST(NcclReleases, BlackwellNvlsAcrossNodesFollows230) {
  const Preset two("dgx-b200-2node.yaml"), two_229("dgx-b200-2node.yaml", release(22907));
  EXPECT_EQ(two.model.nvls_channels(), 32);
  EXPECT_DOUBLE_EQ(two.model.nvls_tree_max_chunk(), 64 * 1024);
  EXPECT_DOUBLE_EQ(two_229.model.nvls_tree_max_chunk(), 128 * 1024);
  for (const char* file : {"dgx-b200-3node.yaml", "dgx-b200-4node.yaml"}) {
    EXPECT_EQ(Preset(file).model.nvls_channels(), 24) << file;
    EXPECT_EQ(Preset(file, release(22907)).model.nvls_channels(), 32) << file;
    EXPECT_DOUBLE_EQ(Preset(file).model.nvls_tree_max_chunk(), 64 * 1024) << file;
  }
  EXPECT_DOUBLE_EQ(Preset("dgx-b200-3node.yaml", release(22907)).model.nvls_tree_max_chunk(), 128 * 1024);

  const Topology topo = Topology::from_config(load_cluster_config(preset_path("dgx-b200-2node.yaml")));
  const std::vector<int> four_a_node = {0, 1, 2, 3, 8, 9, 10, 11};
  const CommModel newest(topo, four_a_node, {}), older(topo, four_a_node, release(22907));
  EXPECT_DOUBLE_EQ(newest.nvls_chunk_size(), 256 * 1024);
  EXPECT_DOUBLE_EQ(newest.nvls_tree_max_chunk(), 256 * 1024);
  EXPECT_DOUBLE_EQ(older.nvls_chunk_size(), 128 * 1024);
  EXPECT_EQ(nccl_memory_plan(newest, 0).nvls, 2 * nccl_memory_plan(older, 0).nvls);

  TuningEnv set;
  set.nvls_chunksize = 64 * 1024;
  set.nvls_tree_max_chunksize = 32 * 1024;
  set.max_ctas = 16;
  const CommModel chosen(topo, four_a_node, set);
  EXPECT_DOUBLE_EQ(chosen.nvls_chunk_size(), 64 * 1024);
  EXPECT_DOUBLE_EQ(chosen.nvls_tree_max_chunk(), 32 * 1024);
  EXPECT_EQ(chosen.nvls_channels(), 16);
  // Hopper across nodes keeps its 16 channels and the chunk rule it had.
  EXPECT_EQ(Preset("dgx-h100-2node.yaml").model.nvls_channels(), 16);
  EXPECT_DOUBLE_EQ(Preset("dgx-h100-2node.yaml").model.nvls_tree_max_chunk(), 128 * 1024);
}

// MAXCHANNELS was 32 until 2.25: a communicator asking for more gets that many.
TEST(NcclReleases, ChannelsStopAtTheReleasesMaximum) {
  TuningEnv old = release(22403), newer = release(22501);
  old.min_channels = newer.min_channels = 64;
  EXPECT_EQ(Preset("dgx-h100-1node.yaml", old).model.channels(), 32);
  EXPECT_EQ(Preset("dgx-h100-1node.yaml", newer).model.channels(), 64);
}

// Before 2.21 NCCL's tuner rated ring LL at a quarter of the bus bandwidth (half since) and
// Hopper's LL cap lower: 8 x H100 at 1 MiB ran NVLS, since then ring LL. The tuner steers the
// choice only: the same algorithm and protocol take the same time under either release.
TEST(NcclReleases, TheTunerChoosesTheKernelsRunAlike) {
  const Preset old("dgx-h100-1node.yaml", release(22005)), newer("dgx-h100-1node.yaml", release(22105));
  const uint64_t mib = 1 << 20;
  EXPECT_EQ(old.model.estimate(wire::CollType::kAllReduce, mib).algo, kNvls);
  const Estimate e = newer.model.estimate(wire::CollType::kAllReduce, mib);
  EXPECT_EQ(e.algo, kRing);
  EXPECT_EQ(e.proto, kLL);
  TuningEnv forced = release(22005);
  forced.set_algo("ring");
  forced.set_proto("ll");
  EXPECT_DOUBLE_EQ(Preset("dgx-h100-1node.yaml", forced).model.estimate(wire::CollType::kAllReduce, mib).time_us,
                   e.time_us);
}

// Before 2.20 a Simple tree halved its chunk while a channel's share held few of them, so its
// start-up, one chunk across each level, was shorter; the data it moves takes the same time.
TEST(NcclReleases, SimpleTreesHalvedTheirChunksBefore220) {
  TuningEnv old = release(21904), newer = release(22005);
  for (TuningEnv* env : {&old, &newer}) env->set_algo("tree"), env->set_proto("simple");
  const Preset a("dgx-h100-2node.yaml", old), b("dgx-h100-2node.yaml", newer);
  const uint64_t bytes = 16 << 20;  // 1 MiB a channel of 16: under 8 x depth (8) chunks of 512 KiB
  const Estimate before = a.model.estimate(wire::CollType::kAllReduce, bytes);
  const Estimate since = b.model.estimate(wire::CollType::kAllReduce, bytes);
  EXPECT_LT(before.fill_us, since.fill_us * 0.5);
  EXPECT_DOUBLE_EQ(before.data_us, since.data_us);
  // Large shares keep the whole step under both.
  EXPECT_DOUBLE_EQ(a.model.estimate(wire::CollType::kAllReduce, uint64_t{1} << 32).fill_us,
                   b.model.estimate(wire::CollType::kAllReduce, uint64_t{1} << 32).fill_us);
}

// The tables each release's tuner read, as NCCL's history changed them.
TEST(NcclReleases, TunerTablesByRelease) {
  const NcclRules r218 = nccl_rules(21805), r219 = nccl_rules(21903), r223 = nccl_rules(22304), r230 = nccl_rules(23007);
  // Trees' Simple steps: 4/6/14 us in 2.18, 28 us on every link with no base from 2.19, and back
  // to 4/4/14 over a base of 8.4 from 2.23.
  EXPECT_DOUBLE_EQ(r218.hw_lat[kHwPci][kTree][kSimple], 6.0);
  EXPECT_DOUBLE_EQ(r219.hw_lat[kHwNvlink][kTree][kSimple], 28.0);
  EXPECT_DOUBLE_EQ(r219.base_lat[kTree][kSimple], 0.0);
  EXPECT_DOUBLE_EQ(r223.hw_lat[kHwNet][kTree][kSimple], 14.0);
  EXPECT_DOUBLE_EQ(r223.base_lat[kTree][kSimple], 8.4);
  // NVLS trees' network steps: 14 us until 2.28, 20.9 since.
  EXPECT_DOUBLE_EQ(r223.hw_lat[kHwNet][kNvlsTree][kSimple], 14.0);
  EXPECT_DOUBLE_EQ(r230.hw_lat[kHwNet][kNvlsTree][kSimple], 20.9);
  // Blackwell reads Hopper's tables until 2.25.
  EXPECT_EQ(r223.arch(100), kHopper);
  EXPECT_EQ(r230.arch(100), kBlackwell);
  // LL128 by default: compute capability 7.0, 8.0 and 9.0 exactly until 2.25, then 10.0 and 12.0,
  // and every GPU from 7.0 since 2.27.
  EXPECT_FALSE(r223.ll128_default(89));
  EXPECT_FALSE(r223.ll128_default(100));
  EXPECT_TRUE(nccl_rules(22501).ll128_default(100));
  EXPECT_FALSE(nccl_rules(22501).ll128_default(89));
  EXPECT_TRUE(r230.ll128_default(89));
  EXPECT_FALSE(r230.ll128_default(61));
}

}  // namespace
}  // namespace fakegpu::planner
