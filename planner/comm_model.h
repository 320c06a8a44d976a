// The cost model of one communicator: where its ranks sit, the channels NCCL's search would
// build (rings, double binary trees, NVLS), NCCL's latency/bandwidth tables for choosing an
// algorithm and protocol, and per operation a flow plan over the physical links and a time.
//
// Built once per communicator; estimate() is cheap because the per-byte link loads of each
// (collective, algorithm, root) are computed once and cached.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "nccl_rules.h"
#include "nccl_tuning.h"
#include "topology.h"
#include "wire.h"

namespace fakegpu::planner {

struct Graph {
  int channels = 0;
  double bw_intra = 0;  // GB/s per channel
  double bw_inter = 0;
};

class Flows;  // per-link loads under construction (estimate.cpp)

// One transfer of an algorithm, repeated over `steps` consecutive steps of its channel from
// `step` on: `bytes` per step, per byte of the operation. kSwitch and kNetwork stand for the
// node's NVSwitch (NVLS) and for switches that reduce in the network (SHARP).
struct Flow {
  static constexpr int kSwitch = -2, kNetwork = -3;
  int channel = 0;
  int step = 0, steps = 1;
  int src = 0, dst = 0;  // comm ranks, or kSwitch / kNetwork
  double bytes = 0;
};

struct TreeNode {
  int parent = -1;            // comm rank, -1 at the root
  std::vector<int> children;  // comm ranks
};

struct LinkLoad {
  int link;      // index into Topology::links
  double bytes;
};

// Traffic between two nodes (the same one for traffic inside a node); kNetworkNode stands
// for the switches of a network that reduces (SHARP).
constexpr int kNetworkNode = -1;
struct NodePairLoad {
  int from, to;  // Topology::nodes indices
  double bytes;
};

struct Estimate {
  int algo = -1;    // Algo; -1 for point-to-point patterns
  int proto = kSimple;
  int channels = 0;
  double time_us = 0;
  double latency_us = 0;  // fixed cost
  double data_us = 0;     // bytes over the busiest link
  double fill_us = 0;     // pipeline start-up
  double algbw_gbs = 0;   // bytes / time, as nccl-tests prints
  double busbw_gbs = 0;
  uint64_t bytes = 0;
  // Bytes per directed link per byte of the operation; owned by the model's cache.
  const std::vector<LinkLoad>* per_byte_links = nullptr;
  const std::vector<NodePairLoad>* per_byte_node_pairs = nullptr;  // the same, between nodes
  const char* algo_label() const { return planner::algo_label(algo); }
  std::vector<LinkLoad> link_bytes() const;  // per_byte_links scaled to this operation
};

class CommModel {
 public:
  // gpus[r] is the global GPU (cluster rank) of communicator rank r.
  CommModel(const Topology& topo, std::vector<int> gpus, const TuningEnv& env);

  // bytes follows nccl-tests' "size": the whole buffer for AllReduce/Broadcast/Reduce,
  // the gathered total for AllGather/ReduceScatter/Gather/Scatter, per-rank send total for
  // AlltoAll, the message for Send/Recv. Throws TuningError when forced settings leave no
  // algorithm.
  Estimate estimate(wire::CollType coll, uint64_t bytes, int root = 0) const;

  // The traffic of a collective under an algorithm (Algo; -1 for point-to-point patterns).
  std::vector<Flow> flow_plan(wire::CollType coll, int algo, int root = 0) const;

  // One Send/Recv pair, from comm rank `from` to comm rank `to`.
  // `both_ways`: the sender also receives in the same group (a ring, a pairwise exchange), so
  // each of its channels' blocks copies both ways, as nccl-tests' sendrecv runs.
  Estimate estimate_p2p(int from, int to, uint64_t bytes, bool both_ways = false) const;

  int nranks() const { return static_cast<int>(gpus_.size()); }
  int nnodes() const { return static_cast<int>(node_ranks_.size()); }
  int channels() const { return channels_; }
  int nvls_channels() const { return nvls_channels_; }
  // NCCL's NVLS chunk and an NVLS tree's cap on it, as the comm's init set them (tune_nvls).
  double nvls_chunk_size() const { return nvls_chunk_size_; }
  double nvls_tree_max_chunk() const { return nvls_tree_max_chunk_; }
  int p2p_channels() const { return p2p_channels_; }           // NCCL's p2pnChannels
  int p2p_channels_per_peer() const { return p2p_per_peer_; }  // p2pnChannelsPerPeer
  const TuningEnv& tuning() const { return env_; }
  const NcclRules& rules() const { return rules_; }  // of the NCCL release modeled (env_.nccl_version)
  bool nvlink_inside_nodes() const { return nvl_intra_; }  // every pair of a node on NVLink
  // Some pair of a node without NVLink cannot reach its peer over PCIe: it meets in host memory.
  bool host_memory_inside_nodes() const { return shm_intra_; }
  // The latency class of a step inside a node (HwClass).
  int intra_class() const { return nvl_intra_ ? kHwNvlink : shm_intra_ ? kHwShm : kHwPci; }
  int node_of(int rank) const { return node_of_[rank]; }                          // comm node
  const std::vector<int>& node_ranks(int node) const { return node_ranks_[node]; }  // local order
  int gpu_of(int rank) const { return gpus_[rank]; }  // global GPU
  const Topology& topology() const { return topo_; }
  const std::vector<std::vector<int>>& rings() const { return rings_; }
  const std::vector<std::vector<TreeNode>>& trees() const { return trees_; }
  int tree_depth() const;  // network levels of the deepest node in the tree over the nodes
  // Which half of NCCL's double binary tree channel c's tree is (0 or 1).
  int tree_half(int c) const;
  // The first rank of comm node `node` beside each of its NICs, in local order: one head per NIC,
  // as NCCL picks NVLS and CollNet heads.
  std::vector<int> nic_heads(int node) const;
  const Graph& graph(int algo) const { return graphs_[algo]; }
  bool algo_available(int func, int algo, int proto) const { return bw_[func][algo][proto] > 0; }
  static double bus_factor(wire::CollType coll, int nranks);
  double simple_step() const;  // bytes of a Simple step (NCCL_BUFFSIZE / 8)
  // Bytes an NVLS or NVLS tree round moves per channel and head for a buffer of `bytes`.
  double nvls_chunk(int algo, uint64_t bytes) const;

 private:
  struct Pattern {
    std::vector<LinkLoad> per_byte;  // link bytes per byte of the operation
    std::vector<NodePairLoad> node_pairs;  // node-to-node bytes per byte of the operation
    double worst_nvlink = 0;         // max over NVLink links of coefficient / capacity (us per MB)
    double worst_pcie = 0;           // the same over PCIe links
    double worst_net = 0;            // the same over NIC links (or what their channels' blocks copy)
    double hop_cost = 0;             // one channel on the slowest hop of ring 0: us per MB
    double tree_intra_cost = 0;      // one channel on the slowest hop inside a node of tree 0: us per MB
    double tree_net_cost = 0;        // the same across the network
  };

  void place(const Topology& topo);
  void search_graphs();
  int within_ctas(int channels) const;
  void tune_nvls(bool inter);
  int graph_channel(int c) const;
  void build_rings();
  void build_trees();
  void tune();
  bool net_path_allows_ll128() const;
  void choose(int func, uint64_t bytes, int* algo, int* proto) const;
  double nvls_channel_bw(int func, int algo, const Graph& g, bool for_time = false) const;
  double latency(int func, int algo, int proto, const double (*base_lat)[kNumProtos],
                 const double (*hw_lat)[kNumAlgos][kNumProtos], double net_floor_us, double plugin_us,
                 bool for_time) const;
  int ring_net_steps(int func, bool for_time) const;
  // NCCL's latency as its tuner sees it, or (for_time) with measured per-step latencies.
  double nccl_latency(int func, int algo, int proto, uint64_t bytes, bool for_time = false) const;
  int op_channels(int algo, int proto, uint64_t bytes) const;
  const Pattern& pattern(wire::CollType coll, int algo, int root) const;
  Pattern build_pattern(wire::CollType coll, int algo, int root) const;
  Pattern summarize(const Flows& flows) const;
  double p2p_latency(bool inter_node) const;
  // Point-to-point channels (p2p_channels.cpp).
  struct P2pCopy {
    int channels = 1;  // at one rank
    double us = 0;     // the least time they take to copy the bytes
  };
  void setup_p2p();
  int p2p_channels_to_local(int from, int to) const;
  int p2p_channels_to_network(int from) const;
  int p2p_op_channels(uint64_t bytes) const;
  double p2p_channel_gbs(bool both_ways, bool network) const;
  double channel_copy_gbs(bool both_ways) const;
  bool blocks_hold_channels() const;
  P2pCopy p2p_copy(wire::CollType coll, uint64_t bytes, bool lone = false, bool remote = false,
                   bool lone_both_ways = false) const;
  double efficiency(int func, int algo, int proto) const;
  double tuner_efficiency(int func, int algo, int proto) const;
  double tree_ll128_share() const;
  double cap_busbw(int func, int algo, int proto, int nc, bool for_time = false) const;
  double bus_to_alg(int func, int algo, bool for_time = true) const;
  double fill_us(wire::CollType coll, int algo, int proto, int nc, uint64_t bytes, double rate, const Pattern& pat) const;
  double tree_fill_us(int proto, int nc, uint64_t bytes, const Pattern& pat) const;
  double nvls_rounds_in_flight() const;

  const Topology& topo_;
  std::vector<int> gpus_;
  TuningEnv env_;
  NcclRules rules_;
  std::vector<int> node_of_;                  // comm rank -> comm node
  std::vector<std::vector<int>> node_ranks_;  // comm node -> comm ranks, local order
  int min_cc_ = 0, max_cc_ = 0;
  int ppn_ = 1;  // most ranks on one node
  bool nvl_intra_ = true;
  bool shm_intra_ = false;
  int min_clock_mhz_ = 1 << 30;  // the slowest GPU's SM clock
  bool arm_host_ = false;  // some GPU sits beside an Arm CPU (Grace): NCCL's x86-only rules are off
  bool nvswitch_ = false;
  Graph graphs_[kNumAlgos];
  int channels_ = 1;
  int nvls_channels_ = 0;
  double nvls_chunk_size_ = 0;      // NCCL's nvlsChunkSize
  double nvls_tree_max_chunk_ = 0;  // NCCL's nvlsTreeMaxChunkSize
  int p2p_channels_ = 1;      // channels p2p operations spread over (NCCL's p2pnChannels)
  int p2p_per_peer_ = 1;      // the most one Send or Recv takes (p2pnChannelsPerPeer)
  int p2p_min_channels_ = 1;  // the fewest it takes once its bytes fill them
  int p2p_remote_peers_ = 0;  // the most peers a rank has on other nodes
  double p2p_chunk_ = 0;      // NCCL's p2p chunk: parts are counted in it
  std::vector<std::vector<int>> rings_;
  std::vector<std::vector<TreeNode>> trees_;
  double bw_[kNumFuncs][kNumAlgos][kNumProtos] = {};
  double lat_[kNumFuncs][kNumAlgos][kNumProtos] = {};
  double step_lat_[kNumFuncs][kNumAlgos][kNumProtos] = {};
  mutable std::mutex cache_mutex_;
  mutable std::map<std::tuple<int, int, int>, Pattern> cache_;
  mutable std::map<std::pair<int, int>, Pattern> p2p_cache_;  // by (from, to)
};

}  // namespace fakegpu::planner
