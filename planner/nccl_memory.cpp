#include "nccl_memory.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace fakegpu::planner {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kAllocation = 2 * kMiB;  // cuMem's granularity: every allocation rounds up to it
constexpr uint64_t kConnectionState = 4096;  // ncclSendMem / ncclRecvMem
constexpr uint64_t kDefaultLl = 512 << 10;       // 8 lines x 512 threads x 8 steps x 16 B
constexpr uint64_t kDefaultLl128 = 4915200;      // 120 x 640 threads x 8 steps x 8 B
constexpr uint64_t kDefaultSimple = 4 * kMiB;
constexpr uint64_t kNvlsChunksPerRound = 8 * 2;  // NCCL_STEPS chunks, for reduce and broadcast

uint64_t allocation(uint64_t bytes) { return (bytes + kAllocation - 1) / kAllocation * kAllocation; }

struct Buffers {
  uint64_t ll, ll128, simple;
};

Buffers buffers(const TuningEnv& env) {
  return {env.ll_buffsize > 0 ? static_cast<uint64_t>(env.ll_buffsize) : kDefaultLl,
          env.ll128_buffsize > 0 ? static_cast<uint64_t>(env.ll128_buffsize) : kDefaultLl128,
          env.buffsize > 0 ? static_cast<uint64_t>(env.buffsize) : kDefaultSimple};
}

const Gpu& gpu(const CommModel& m, int rank) { return m.topology().gpus[m.gpu_of(rank)]; }

// P2P read: the sender holds the Simple buffer, between A100-class GPUs over NVLink.
bool p2p_read(const CommModel& m, int a, int b) {
  return m.nvlink_inside_nodes() && gpu(m, a).cc / 10 == 8 && gpu(m, b).cc / 10 == 8;
}

// One side of a connection from `from` to `to`.
uint64_t send_side(const CommModel& m, const Buffers& b, int from, int to) {
  if (m.node_of(from) != m.node_of(to)) return allocation(b.ll128 + b.simple);  // LL stays in host memory
  if (m.host_memory_inside_nodes()) return 0;  // shared-memory transport: host memory
  return allocation(kConnectionState + (p2p_read(m, from, to) ? b.simple : 0));
}

uint64_t recv_side(const CommModel& m, const Buffers& b, int from, int to) {
  if (m.node_of(from) != m.node_of(to)) return allocation(b.ll + b.ll128 + b.simple);
  if (m.host_memory_inside_nodes()) return 0;
  return allocation(kConnectionState + b.ll + b.ll128 + (p2p_read(m, from, to) ? 0 : b.simple));
}

// A rank's connections as (channel, peer, sending): a pair made once serves every algorithm.
using Connection = std::tuple<int, int, bool>;

uint64_t bytes_of(const CommModel& m, const Buffers& b, int rank, const std::set<Connection>& connections) {
  uint64_t total = 0;
  for (const auto& [channel, peer, sending] : connections)
    total += sending ? send_side(m, b, rank, peer) : recv_side(m, b, peer, rank);
  return total;
}

}  // namespace

uint8_t nccl_pieces(int algo) {
  switch (algo) {
    case kRing:
    case kPat: return kRingConnections;
    case kTree: return kTreeConnections;
    case kNvls: return kNvlsBuffers;
    case kNvlsTree: return kNvlsBuffers | kTreeConnections;
    default: return 0;  // CollNet: its buffers live with the network plugin
  }
}

NcclMemoryPlan nccl_memory_plan(const CommModel& m, int rank) {
  NcclMemoryPlan plan;
  if (m.nranks() < 2) return plan;
  const Buffers b = buffers(m.tuning());
  const int channels = std::max(m.channels(), m.p2p_channels());
  // The device communicator and its rank table, then per channel its peers (shared and own) and
  // its ring's user ranks; NVLS adds a structure per channel and a credit buffer.
  plan.init = 2 * kAllocation + 3 * kAllocation * channels;
  if (m.nvls_channels() > 0) plan.init += kAllocation * (m.nvls_channels() + 1);

  std::set<Connection> ring, tree;
  for (const std::vector<int>& order : m.rings()) {
    const int channel = static_cast<int>(&order - m.rings().data());
    const auto at = std::find(order.begin(), order.end(), rank) - order.begin();
    const int n = static_cast<int>(order.size());
    ring.emplace(channel, order[(at + n - 1) % n], false);
    ring.emplace(channel, order[(at + 1) % n], true);
  }
  for (size_t c = 0; c < m.trees().size(); ++c) {
    const TreeNode& node = m.trees()[c][rank];
    std::vector<int> neighbours = node.children;
    if (node.parent >= 0) neighbours.push_back(node.parent);
    for (int peer : neighbours)
      for (bool sending : {false, true})
        if (!ring.count({static_cast<int>(c), peer, sending})) tree.emplace(static_cast<int>(c), peer, sending);
  }
  plan.ring = bytes_of(m, b, rank, ring);
  plan.tree = bytes_of(m, b, rank, tree);

  if (m.nvls_channels() > 0) {
    const int node = m.node_of(rank);
    const uint64_t heads = m.nnodes() == 1 ? m.node_ranks(node).size() : std::max<size_t>(1, m.nic_heads(node).size());
    const auto chunk = static_cast<uint64_t>(m.nvls_chunk_size());  // NCCL_NVLS_CHUNKSIZE, or its tuning
    plan.nvls = allocation(heads * m.nvls_channels() * kNvlsChunksPerRound * chunk);
  }
  if (!m.tuning().runtime_connect) {  // every algorithm connects at init
    plan.init += plan.ring + plan.tree + plan.nvls;
    plan.ring = plan.tree = plan.nvls = 0;
  }
  return plan;
}

NcclP2pMemory nccl_p2p_memory(const CommModel& m, int from, int to) {
  NcclP2pMemory p;
  if (from == to) return p;
  const Buffers b = buffers(m.tuning());
  const uint64_t channels = std::max(1, m.p2p_channels_per_peer());
  if (m.node_of(from) != m.node_of(to)) {
    // Across nodes sends and receives share the proxy's pool (NCCL_NET_SHARED_BUFFERS): 16 chunks
    // per p2p channel; the connections' state stays in host memory.
    const uint64_t chunk = m.tuning().p2p_net_chunksize > 0 ? m.tuning().p2p_net_chunksize : 128 << 10;
    p.pool = allocation(static_cast<uint64_t>(m.p2p_channels()) * 16 * chunk);
    return p;
  }
  p.send = channels * send_side(m, b, from, to);
  p.recv = channels * recv_side(m, b, from, to);
  return p;
}

}  // namespace fakegpu::planner
