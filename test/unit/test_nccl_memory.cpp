// NCCL's device memory per communicator (planner/nccl_memory.h), against NCCL's rules worked by
// hand: allocations in 2 MiB units; at init 2 + 3 per channel (+ NVLS's one per channel and a
// credit buffer); a ring channel's connections inside a node 10 MiB received (4 KiB of state, LL
// 512 KiB, LL128 4.6875 MiB, Simple 4 MiB) and 2 MiB sent; across nodes 10 MiB each way.
#include <gtest/gtest.h>

#include <numeric>

#include "comm_model.h"
#include "nccl_memory.h"
#include "preset_model.h"

namespace fakegpu::planner {
namespace {

constexpr uint64_t kMiB = 1 << 20;

uint64_t init_bytes(const CommModel& m) {
  const uint64_t channels = std::max(m.channels(), m.p2p_channels());
  return 2 * kMiB * (2 + 3 * channels + (m.nvls_channels() ? m.nvls_channels() + 1 : 0));
}

// One node of 8 H100: NVLS on; every rank's rings receive 10 MiB and send 2 MiB per channel.
TEST(NcclMemory, OneNodeOfH100FollowsNcclsRules) {
  Preset h100("dgx-h100-1node.yaml");
  const CommModel& m = h100.model;
  ASSERT_EQ(m.nnodes(), 1);
  ASSERT_GT(m.nvls_channels(), 0);
  for (int rank : {0, 5}) {
    const NcclMemoryPlan plan = nccl_memory_plan(m, rank);
    EXPECT_EQ(plan.init, init_bytes(m));
    EXPECT_EQ(plan.ring, m.channels() * (10 + 2) * kMiB);
    // NVLS: 8 heads x channels x 16 chunks of 128 KiB.
    EXPECT_EQ(plan.nvls, 8 * m.nvls_channels() * 16 * (128 << 10));
  }
  // The chain's tree inside a node follows the ring: its neighbours are the ring's, so only the
  // other direction of each pair is new.
  EXPECT_LE(nccl_memory_plan(m, 0).tree, m.channels() * (10 + 2) * kMiB);
  EXPECT_EQ(nccl_pieces(kRing), kRingConnections);
  EXPECT_EQ(nccl_pieces(kNvlsTree), kNvlsBuffers | kTreeConnections);
}

// Two nodes: where a ring enters a node the rank receives over the network (10 MiB), where it
// leaves it sends (10 MiB); every other connection is inside the node.
TEST(NcclMemory, TwoNodesUseNetworkBuffersWhereRingsCrossNodes) {
  Preset h100("dgx-h100-2node.yaml");
  const CommModel& m = h100.model;
  ASSERT_EQ(m.nnodes(), 2);
  uint64_t expected_total = 0, total = 0;
  for (int rank = 0; rank < m.nranks(); ++rank) {
    for (const std::vector<int>& ring : m.rings()) {
      const int n = static_cast<int>(ring.size());
      const int at = static_cast<int>(std::find(ring.begin(), ring.end(), rank) - ring.begin());
      const bool to_other = m.node_of(ring[(at + 1) % n]) != m.node_of(rank);
      expected_total += (10 + (to_other ? 10 : 2)) * kMiB;  // received: 10 MiB either way
    }
    total += nccl_memory_plan(m, rank).ring;
  }
  EXPECT_EQ(total, expected_total);
  // Two ranks' sends: inside a node, per channel 2 MiB sent and 10 received; across nodes only
  // the proxy's shared pool, 16 chunks of 128 KiB per p2p channel.
  const NcclP2pMemory local = nccl_p2p_memory(m, 0, 1);
  EXPECT_EQ(local.send, m.p2p_channels_per_peer() * 2 * kMiB);
  EXPECT_EQ(local.recv, m.p2p_channels_per_peer() * 10 * kMiB);
  EXPECT_EQ(local.pool, 0u);
  const NcclP2pMemory remote = nccl_p2p_memory(m, 0, 8);
  EXPECT_EQ(remote.send + remote.recv, 0u);
  EXPECT_EQ(remote.pool, static_cast<uint64_t>(m.p2p_channels()) * 16 * (128 << 10));
}

// NCCL_BUFFSIZE grows the Simple buffer: 8 MiB makes a received connection 14 MiB.
TEST(NcclMemory, BuffsizeSizesTheSimpleBuffer) {
  TuningEnv env;
  env.buffsize = 8 << 20;
  Preset h100("dgx-h100-1node.yaml", env);
  EXPECT_EQ(nccl_memory_plan(h100.model, 0).ring, h100.model.channels() * (14 + 2) * kMiB);
}

// A100s over NVLink read the Simple buffer from the sender: 6 MiB each side.
TEST(NcclMemory, A100sReadSimpleFromTheSender) {
  Preset a100("dgx-a100-1node.yaml");
  EXPECT_EQ(nccl_memory_plan(a100.model, 0).ring, a100.model.channels() * (6 + 6) * kMiB);
}

// NCCL_RUNTIME_CONNECT=0: every algorithm's connections at init, the same bytes in all.
TEST(NcclMemory, WithoutRuntimeConnectEverythingConnectsAtInit) {
  Preset lazy("dgx-h100-1node.yaml");
  TuningEnv env;
  env.runtime_connect = false;
  Preset eager("dgx-h100-1node.yaml", env);
  const NcclMemoryPlan a = nccl_memory_plan(lazy.model, 3), b = nccl_memory_plan(eager.model, 3);
  EXPECT_EQ(b.ring + b.tree + b.nvls, 0u);
  EXPECT_EQ(b.init, a.init + a.ring + a.tree + a.nvls);
}

// One rank has nobody to connect to.
TEST(NcclMemory, ASingleRankCommunicatorTakesNothing) {
  Topology topo = Topology::from_config(load_cluster_config(std::string(FAKEGPU_SOURCE_DIR) + "/configs/presets/dgx-h100-1node.yaml"));
  CommModel one(topo, {0}, TuningEnv{});
  const NcclMemoryPlan plan = nccl_memory_plan(one, 0);
  EXPECT_EQ(plan.init + plan.ring + plan.tree + plan.nvls, 0u);
}

}  // namespace
}  // namespace fakegpu::planner
