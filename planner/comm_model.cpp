// Communicator set-up: placement, NCCL's channel search, rings, trees and tuning tables.
#include "comm_model.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace fakegpu::planner {
namespace {


// NCCL's binary tree over n ranks rooted at 0: a rank's lowest set bit decides its level.
TreeNode btree(int n, int r) {
  TreeNode t;
  int bit = 1;
  while (bit < n && !(bit & r)) bit <<= 1;
  if (r == 0) {
    if (n > 1) t.children.push_back(bit >> 1);
    return t;
  }
  int up = (r ^ bit) | (bit << 1);
  if (up >= n) up = r ^ bit;
  t.parent = up;
  int low = bit >> 1;
  if (low > 0) {
    t.children.push_back(r - low);
    int d1 = r + low;
    while (low > 0 && d1 >= n) {
      low >>= 1;
      d1 = r + low;
    }
    if (low > 0) t.children.push_back(d1);
  }
  return t;
}

// The second tree of the double binary tree: mirrored for even n, shifted by one for odd n,
// so that a rank that is a leaf in one tree is interior in the other.
TreeNode dtree(int n, int r, int which) {
  if (which == 0) return btree(n, r);
  auto map_in = [&](int x) { return n % 2 ? (x - 1 + n) % n : n - 1 - x; };
  auto map_out = [&](int x) { return x < 0 ? -1 : n % 2 ? (x + 1) % n : n - 1 - x; };
  TreeNode t = btree(n, map_in(r));
  t.parent = map_out(t.parent);
  for (int& c : t.children) c = map_out(c);
  return t;
}

}  // namespace

CommModel::CommModel(const Topology& topo, std::vector<int> gpus, const TuningEnv& env)
    : topo_(topo), gpus_(std::move(gpus)), env_(env), rules_(nccl_rules(env.nccl_version)) {
  place(topo);
  search_graphs();
  build_rings();
  build_trees();
  tune();
  setup_p2p();
}

void CommModel::place(const Topology& topo) {
  std::map<int, int> node_index;  // topology node -> comm node, in order of first rank
  min_cc_ = 1000, max_cc_ = 0;
  for (int r = 0; r < nranks(); ++r) {
    const Gpu& g = topo.gpus.at(gpus_[r]);
    auto [it, fresh] = node_index.emplace(g.node, static_cast<int>(node_ranks_.size()));
    if (fresh) node_ranks_.emplace_back();
    node_of_.push_back(it->second);
    node_ranks_[it->second].push_back(r);
    min_cc_ = std::min(min_cc_, g.cc);
    max_cc_ = std::max(max_cc_, g.cc);
    arm_host_ |= g.profile->arm_host;
    min_clock_mhz_ = std::min(min_clock_mhz_, g.profile->clock_mhz);
  }
  // Ranks of a node in the node's local GPU order, as NCCL orders them by bus id.
  for (auto& ranks : node_ranks_)
    std::sort(ranks.begin(), ranks.end(), [&](int a, int b) { return topo.gpus[gpus_[a]].local < topo.gpus[gpus_[b]].local; });
  nvswitch_ = true;
  for (auto& ranks : node_ranks_) {
    ppn_ = std::max<int>(ppn_, ranks.size());
    const Node& node = topo.nodes[topo.gpus[gpus_[ranks[0]]].node];
    for (size_t i = 0; i < ranks.size(); ++i)  // every pair of the node on NVLink, or NCCL sees PCIe
      for (size_t j = i + 1; j < ranks.size(); ++j)
        if (!topo.nvlink_between(gpus_[ranks[i]], gpus_[ranks[j]])) {
          nvl_intra_ = false;
          if (!topo.gpus[gpus_[ranks[i]]].profile->p2p || !topo.gpus[gpus_[ranks[j]]].profile->p2p) shm_intra_ = true;
        }
    if (node.fabric != IntraFabric::kNvSwitch) nvswitch_ = false;
  }
}

// NCCL's search, reduced to its arithmetic: a channel at speed s takes s from each GPU's
// intra-node bandwidth and, across nodes, s from one NIC (and from the PCIe path of a GPU on
// its rail) on every node. The search starts at the fastest listed speed the paths allow,
// keeps the best channels x speed, stops when that reaches the GPU's total bandwidth, and
// moves down the list while the next speed is more than half the best one found. Fast channels are then split in two, and Ring tries a higher
// speed with the channel count it found.
void CommModel::search_graphs() {
  const bool inter = nnodes() > 1;
  double total = 1e9, max_bw = 1e9;  // one GPU alone: nothing limits a channel
  for (int r = 0; r < nranks(); ++r) {
    const Gpu& g = topo_.gpus[gpus_[r]];
    bool alone = node_ranks_[node_of_[r]].size() == 1;
    double intra = alone ? 1e9 : nvl_intra_ ? g.nvlink_gbs : g.pcie_gbs;
    const Node& node = topo_.nodes[g.node];
    double pair = intra;
    if (!alone && node.fabric == IntraFabric::kNvLinkMesh) pair = intra / std::max<size_t>(1, node.gpus.size() - 1);
    total = std::min(total, intra);
    max_bw = std::min(max_bw, pair);
  }
  if (inter) {
    max_bw = 0;
    for (int r = 0; r < nranks(); ++r) {
      const Gpu& g = topo_.gpus[gpus_[r]];
      if (g.nic >= 0) max_bw = std::max(max_bw, std::min(g.pcie_gbs, topo_.nics[g.nic].line_gbytes));
    }
  }
  // Channels one node's NICs can carry at a speed: each needs the NIC and the PCIe path of a
  // GPU of the communicator on that NIC's rail.
  auto nic_channels = [&](double speed) {
    int fewest = rules_.max_channels;
    for (auto& ranks : node_ranks_) {
      std::map<int, int> pcie_slots;  // NIC -> channels its rail GPUs can feed
      for (int r : ranks) {
        const Gpu& g = topo_.gpus[gpus_[r]];
        if (g.nic >= 0) pcie_slots[g.nic] += static_cast<int>(g.pcie_gbs / speed + 1e-9);
      }
      int slots = 0;
      for (auto [nic, feed] : pcie_slots) slots += std::min(feed, static_cast<int>(topo_.nics[nic].line_gbytes / speed + 1e-9));
      fewest = std::min(fewest, slots);
    }
    return fewest;
  };
  auto fits = [&](double speed, int channels) {
    if (speed > max_bw + 1e-9 || channels * speed > total + 1e-9) return false;
    return !inter || channels <= nic_channels(speed);
  };
  auto most_channels = [&](double speed, int cap) {
    int n = 0;
    while (n < cap && fits(speed, n + 1)) ++n;
    return n;
  };

  SpeedList speeds = rules_.search_speeds(min_cc_, inter);
  int max_ring = rules_.max_channels / 2;
  if (env_.max_channels > 0) max_ring = std::min(max_ring, env_.max_channels);
  Graph ring;
  int i = 0;
  while (i < speeds.count - 1 && speeds.speeds[i] > max_bw) ++i;
  for (;;) {
    double s = speeds.speeds[i];
    int n = most_channels(s, max_ring);
    if (n > 0 && n * s > ring.channels * ring.bw_intra + 1e-9) ring = {n, s, s};
    if (ring.channels * ring.bw_intra >= total - 1e-9) break;
    if (i + 1 < speeds.count && (ring.channels == 0 || speeds.speeds[i + 1] / ring.bw_intra > .49)) ++i;
    else break;
  }
  if (ring.channels == 0) ring = {1, 0.1, 0.1};  // NCCL's fallback when nothing fits
  // Split fast channels (NCCL's ncclTopoDupChannels).
  if (ring.bw_intra >= 25.0 && !(min_cc_ > 80 && ring.bw_intra < 50.0 && ring.channels > 4)) {
    int dup = std::min(ring.channels * 2, max_ring);
    int div = (dup + ring.channels - 1) / ring.channels;
    ring.bw_intra /= div, ring.bw_inter /= div;
    ring.channels = dup;
  }
  for (int k = speeds.count - 1; k >= 0; --k) {  // a faster speed at the same channel count
    double s = speeds.speeds[k];
    if (s > ring.bw_intra && fits(s, ring.channels)) {
      ring.bw_intra = ring.bw_inter = s;
      break;
    }
  }
  graphs_[kRing] = ring;

  // Trees use the ring's channel count; across nodes their intra-node speed may rise to
  // twice the inter-node one.
  Graph tree = ring;
  if (inter) {
    for (int k = 0; k < speeds.count; ++k) {
      double s = speeds.speeds[k];
      if (s <= 2 * tree.bw_inter && s > tree.bw_intra && ring.channels * s <= total + 1e-9) {
        tree.bw_intra = s;
        break;
      }
    }
  }
  graphs_[kTree] = tree;
  graphs_[kPat] = ring;

  // NVLS (NCCL 2.28's search): one channel per head GPU, every GPU of a node on one node, the
  // GPUs beside the NICs across nodes; a channel takes its speed from every GPU's NVLink and
  // twice from its head's. Its network speed then rises to twice that, as far as the NIC paths
  // allow. Needs NVSwitch and Hopper or later.
  bool nvls_ok = nvswitch_ && min_cc_ >= 90 && env_.nvls_enable != 0 && ppn_ >= rules_.nvls_min_gpus;
  if (nvls_ok) {
    Graph nvls;
    nvls.channels = std::min(rules_.nvls_arity, ppn_);
    if (inter)
      for (int nd = 0; nd < nnodes(); ++nd)
        nvls.channels = std::min<int>(nvls.channels, std::max<size_t>(1, nic_heads(nd).size()));
    SpeedList intra = rules_.search_speeds(min_cc_, false);
    for (int k = 0; k < intra.count && nvls.bw_intra == 0; ++k)
      if (intra.speeds[k] * (nvls.channels + 1) <= total + 1e-9) nvls.bw_intra = intra.speeds[k];
    SpeedList raise = rules_.search_speeds(min_cc_, inter);
    const double inter_cap = std::min(2 * nvls.bw_intra, inter ? max_bw : 1e9);
    for (int k = 0; k < raise.count && nvls.bw_inter == 0; ++k)
      if (raise.speeds[k] <= inter_cap + 1e-9) nvls.bw_inter = raise.speeds[k];
    graphs_[kNvls] = nvls;
    graphs_[kNvlsTree] = nvls;
    tune_nvls(inter);
  }

  // CollNet on a network that reduces in its switches: one channel per NIC of a node (its
  // head GPU sends the node's share up), at what that NIC and the head's PCIe take.
  if (inter && topo_.sharp) {
    int heads = rules_.max_channels;
    double per_head = 1e9;
    for (auto& ranks : node_ranks_) {
      std::set<int> nics;
      for (int r : ranks) {
        const Gpu& g = topo_.gpus[gpus_[r]];
        if (g.nic < 0) continue;
        nics.insert(g.nic);
        per_head = std::min(per_head, std::min(g.pcie_gbs, topo_.nics[g.nic].line_gbytes));
      }
      heads = std::min<int>(heads, nics.size());
    }
    if (heads > 0) {
      double s = speeds.speeds[speeds.count - 1];
      for (int k = 0; k < speeds.count; ++k)
        if (speeds.speeds[k] <= per_head + 1e-9) {
          s = speeds.speeds[k];
          break;
        }
      graphs_[kCollNetDirect] = graphs_[kCollNetChain] = Graph{heads, s, s};
    }
  }

  // NCCL's connect.cc: at most NCCL_MAX_NCHANNELS and NCCL_MAX_CTAS, then copied up to at least
  // NCCL_MIN_NCHANNELS and NCCL_MIN_CTAS.
  channels_ = std::min(rules_.max_channels, ring.channels * 2);
  if (env_.max_channels > 0) channels_ = std::min(channels_, env_.max_channels);
  channels_ = within_ctas(channels_);
  channels_ = std::max({channels_, std::min(env_.min_channels, rules_.max_channels), 1});
}

namespace {
constexpr double kDefaultNvlsChunk = 128 * 1024;  // NCCL_NVLS_CHUNKSIZE's default
}  // namespace

// NCCL's ncclNvlsTuning (nvls.cc): NVLS channels by GPU generation; from 2.30, Blackwell across
// nodes also by the nodes, the fewest GPUs a node, the NICs' speed (the slowest GPU-to-NIC
// path, GB/s) and how far a GPU is from its NIC. NCCL_NVLS_CHUNKSIZE and
// NCCL_NVLSTREE_MAX_CHUNKSIZE win where set; an NVLS tree's chunk is otherwise capped at 64 KiB
// from four nodes on.
void CommModel::tune_nvls(bool inter) {
  int channels = rules_.nvls_channels(min_cc_, inter);
  double chunk = kDefaultNvlsChunk, tree_max = 0;
  if (inter && min_cc_ >= 100 && rules_.nvls_sm100_node_tuning) {
    int fewest = 1 << 30;
    for (const auto& ranks : node_ranks_) fewest = std::min<int>(fewest, ranks.size());
    double nic_gbs = 1e9;
    PathType farthest = PathType::kLoc;
    for (int gpu : gpus_) {
      const Gpu& g = topo_.gpus[gpu];
      if (g.nic < 0) continue;
      nic_gbs = std::min({nic_gbs, g.pcie_gbs, topo_.nics[g.nic].line_gbytes});
      farthest = std::max(farthest, g.nic_path);
    }
    const bool near_nic = farthest <= PathType::kPxb;
    if (nnodes() == 2 && nic_gbs >= 48) {
      channels = 32;
      tree_max = 128 * 1024;
      if (fewest <= 4) {
        chunk = tree_max = 256 * 1024;
      } else if (fewest >= 16 || (fewest <= 8 && near_nic && nic_gbs < 96)) {
        tree_max = 64 * 1024;
      }
    } else if (nic_gbs >= 96) {
      channels = fewest <= 8 ? 24 : 32;
      if (fewest <= 8) chunk = tree_max = 256 * 1024;
      else tree_max = fewest < 32 ? 128 * 1024 : 64 * 1024;
    } else if (nic_gbs >= 48) {
      channels = 24;
      tree_max = near_nic ? 64 * 1024 : 128 * 1024;
    }
  }
  if (env_.nvls_chunksize > 0) chunk = static_cast<double>(env_.nvls_chunksize);
  if (env_.nvls_tree_max_chunksize > 0) tree_max = static_cast<double>(env_.nvls_tree_max_chunksize);
  else if (tree_max == 0) tree_max = nnodes() >= 4 ? 65536.0 : chunk;
  nvls_channels_ = within_ctas(channels);
  nvls_chunk_size_ = chunk;
  nvls_tree_max_chunk_ = tree_max;
}

// `channels` within NCCL_MAX_CTAS and NCCL_MIN_CTAS (the minimum lowered to the maximum where it
// is above it, as NCCL's init does), and at most NCCL's MAXCHANNELS.
int CommModel::within_ctas(int channels) const {
  const int min_ctas = env_.max_ctas > 0 ? std::min(env_.min_ctas, env_.max_ctas) : env_.min_ctas;
  if (env_.max_ctas > 0) channels = std::min(channels, env_.max_ctas);
  return std::min(rules_.max_channels, std::max(channels, min_ctas));
}

// The channel of the searched graph that channel c copies. NCCL runs twice the graph's
// channels (connect.cc): channel c + n repeats channel c's ring, GPUs and NICs, and takes the
// other half of the double binary tree.
int CommModel::graph_channel(int c) const { return c % std::max(1, graphs_[kRing].channels); }
int CommModel::tree_half(int c) const { return (c / std::max(1, graphs_[kRing].channels)) % 2; }

std::vector<int> CommModel::nic_heads(int node) const {
  std::vector<int> heads;
  std::set<int> nics;
  for (int r : node_ranks_[node])
    if (int nic = topo_.gpus[gpus_[r]].nic; nic >= 0 && nics.insert(nic).second) heads.push_back(r);
  return heads;
}

// Ring c visits the nodes in order; inside a node it starts at a GPU on the rail of the
// channel's NIC (NICs serving the communicator's GPUs take turns), so traffic enters the node
// next to that NIC; it leaves from the node's last GPU through that GPU's own rail.
void CommModel::build_rings() {
  rings_.clear();
  for (int c = 0; c < channels_; ++c) {
    std::vector<int> order;
    for (auto& ranks : node_ranks_) {
      std::vector<size_t> rail_starts;  // first local position on each distinct rail
      std::set<int> nics;
      for (size_t i = 0; i < ranks.size(); ++i)
        if (int nic = topo_.gpus[gpus_[ranks[i]]].nic; nic >= 0 && nics.insert(nic).second) rail_starts.push_back(i);
      size_t start = nnodes() > 1 && !rail_starts.empty() ? rail_starts[graph_channel(c) % rail_starts.size()] : 0;
      for (size_t i = 0; i < ranks.size(); ++i) order.push_back(ranks[(start + i) % ranks.size()]);
    }
    rings_.push_back(std::move(order));
  }
}

// Tree c: a chain inside each node from its first ring GPU, and across nodes one half of
// NCCL's double binary tree (tree_half). So each NIC carries both halves, as in NCCL: a node
// with two children in one half has fewer in the other, and no rail takes the heavier half
// alone.
void CommModel::build_trees() {
  trees_.clear();
  for (int c = 0; c < channels_; ++c) {
    std::vector<TreeNode> tree(nranks());
    const std::vector<int>& ring = rings_[c];
    std::vector<int> head(nnodes());
    size_t at = 0;
    for (int n = 0; n < nnodes(); ++n) {
      size_t count = node_ranks_[n].size();
      head[n] = ring[at];
      for (size_t i = 1; i < count; ++i) {  // chain: ring[at] -> ring[at+1] -> ...
        tree[ring[at + i]].parent = ring[at + i - 1];
        tree[ring[at + i - 1]].children.push_back(ring[at + i]);
      }
      at += count;
    }
    for (int n = 0; n < nnodes(); ++n) {
      TreeNode t = dtree(nnodes(), n, tree_half(c));
      if (t.parent >= 0) tree[head[n]].parent = head[t.parent];
      for (int child : t.children) tree[head[n]].children.push_back(head[child]);
    }
    trees_.push_back(std::move(tree));
  }
}

// Network levels from the deepest node up to the root of NCCL's double binary tree over the
// nodes: ceil(log2(nodes)), where NCCL's latency formula takes floor(log2(nodes)).
int CommModel::tree_depth() const { return nnodes() > 1 ? log2i(nnodes() - 1) + 1 : 0; }

// How many of a ring's steps cross the network. NCCL's tuner counts one per node boundary less
// one (twice for AllReduce). The time counts the chain the last GPU waits on: its last block has
// come around the whole ring but one link (AllGather, ReduceScatter; AllReduce's two laps but
// two adjacent links), so with a GPU or more on each side of that link inside a node, the chain
// crosses every network link (each of a ring's nodes is entered and left once).
int CommModel::ring_net_steps(int f, bool for_time) const {
  const int nodes = nnodes();
  if (nodes == 1) return 0;
  const bool all_reduce = f == kAllReduce;
  if (!for_time && rules_.ring_steps_per_node) return all_reduce ? 2 * nodes : nodes - 1;  // NCCL before 2.23
  if (!for_time || ppn_ == 1) return all_reduce ? 2 * (nodes - 1) : nodes - 1;
  if (!all_reduce) return nodes;
  return ppn_ == 2 ? 2 * nodes - 1 : 2 * nodes;  // two GPUs a node: one of the two links is the network
}

// NCCL's latency formula for one (function, algorithm, protocol), with per-step hardware
// latencies from `hw_lat` (NCCL's table for the tuner, the measured one for time), network
// steps no faster than net_floor_us, and `plugin_us` added to each (twice for Simple, as NCCL
// adds its net plugin's reported latency). `for_time`: a ring's network steps are those of
// the chain its last GPU waits on (ring_net_steps), a tree's levels those its deepest node
// crosses (tree_depth).
double CommModel::latency(int f, int a, int p, const double (*base_lat)[kNumProtos],
                          const double (*hw_lat)[kNumAlgos][kNumProtos], double net_floor_us, double plugin_us,
                          bool for_time) const {
  const int n = nranks(), nodes = nnodes();
  const int intra_hw = intra_class();
  const int hw = nodes == 1 ? intra_hw : kHwNet;
  const int nsteps = f == kAllReduce ? 2 * (n - 1) : (f == kReduceScatter || f == kAllGather) ? n - 1 : n;
  // A tree's levels across the network: NCCL's formula counts floor(log2(nodes)); its tree is
  // one level deeper between powers of two, and the time counts what its deepest node crosses.
  const int net_levels = for_time ? tree_depth() : log2i(nodes);
  double lat = base_lat[a][p];
  double intra_lat = hw_lat[intra_hw][a][p];
  double inter_lat = std::max(ppn_ == 1 ? hw_lat[kHwNet][kTree][p] : hw_lat[kHwNet][a][p], net_floor_us) +
                     plugin_us * (p == kSimple ? 2 : 1);
  if (a == kRing) {
    if (f == kReduce || f == kBroadcast) {
      lat += nsteps * (p == kSimple ? hw_lat[hw][kTree][p] : hw_lat[hw][a][p]);
    } else {
      double net_overhead = nodes > 1 ? (p == kSimple ? 3.0 : 1.0) : 0.0;  // Intel CPUs: 1 us
      intra_lat = std::max(intra_lat, net_overhead);
      const int inter_steps = ring_net_steps(f, for_time);
      lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat;
    }
  } else if (a == kTree) {
    if (f == kAllReduce) lat += 2 * ((n / nodes - 1) * intra_lat + net_levels * inter_lat);
  } else if (a == kCollNetDirect) {
    const int ppn = n / nodes;
    const double arity_us = for_time ? 0.4 : rules_.collnet_arity_lat;  // per arity step
    lat += 2 * (std::min(1, ppn - 1) * intra_lat + (ppn - 1) * arity_us) + inter_lat;
  } else if (a == kCollNetChain) {
    lat += 2 * (n / nodes - 1) * intra_lat + inter_lat;
  } else if (a == kNvls) {
    lat += intra_lat + (nodes > 1 ? inter_lat : 0);  // a base of 0 since 2.19 (23 us before)
  } else if (a == kNvlsTree) {
    const int levels = !for_time && rules_.nvls_tree_linear ? nodes - 1 : net_levels;
    lat += intra_lat + 2 * levels * inter_lat;
  } else if (a == kPat) {
    lat = 8 + log2i(nodes) * (inter_lat / 3.5) + n * 2.8;
  }
  return lat;
}

// NCCL 2.28's bandwidth of one NVLS channel: the switch's reduction runs at a share of the NVLink
// speed, less one channel's worth, and an AllReduce pipelines two operations through it; an
// NVLS tree's network speed counts twice on two nodes (one edge, each side sends the buffer
// once), under a cap per channel. `for_time`: the rate the modeled time holds an NVLS channel
// to. On one node that is the NVLink side alone: no network limits it, and the "network" speed
// NCCL's formula also takes there is its search's bookkeeping, held to the top of its speed
// list (90 GB/s on Blackwell), which only the tuner's choice should see.
double CommModel::nvls_channel_bw(int f, int a, const Graph& g, bool for_time) const {
  const int nodes = nnodes();
  const double ppn = static_cast<double>(nranks()) / nodes;
  if (!for_time && rules_.nvls_rule != NvlsTunerRule::kEfficiency) {
    // Older tuners: the graph's speeds as any algorithm's (2.18), or the slower of its NVLink and
    // network sides (2.19), an NVLS tree's network halved from three nodes on, a gather's NVLink
    // side at its other GPUs' share (2.27).
    if (rules_.nvls_rule == NvlsTunerRule::kGeneric) return nodes <= 2 ? g.bw_intra : g.bw_inter;
    if (a == kNvlsTree) return std::min(g.bw_intra, nodes <= 2 ? g.bw_inter : g.bw_inter / 2);
    if (f != kAllReduce && rules_.nvls_rule == NvlsTunerRule::kGatherShare)
      return std::min(g.bw_intra * (ppn - 1) / ppn, 0.9 * g.bw_inter);
    return std::min(g.bw_intra, g.bw_inter);
  }
  if (g.channels < 2) return 0;  // since 2.28, NVLS needs two channels
  double intra = g.bw_intra * nvls_efficiency(min_cc_) * (g.channels - 1) / g.channels;
  intra *= f == kAllReduce ? 2.0 : (ppn - 1) / ppn;
  if (for_time && nodes == 1) return intra;
  double bw = std::min(intra, g.bw_inter * (a == kNvlsTree && nodes <= 2 ? 2 : 1));
  if (a == kNvlsTree) {
    const NcclRules& caps = for_time ? newest_nccl_rules() : rules_;
    bw = std::min(bw, caps.nvls_tree_bw[caps.arch(min_cc_)][nodes <= 2 ? nodes - 1 : 2]);
  }
  return bw;
}

// NCCL enables LL128 across nodes only where its graphs reach the network within a PCIe switch
// tree (path type PXB or closer; PXN on Hopper and later, which needs such a GPU beside the
// NIC too): on every node some GPU of the communicator must sit that close to its NIC. A NIC
// behind the CPU (PHB, or SYS across sockets), as a topology XML of a PCIe server or a
// virtual machine's flattened PCI tree shows it, leaves the network to LL and Simple.
bool CommModel::net_path_allows_ll128() const {
  for (const auto& ranks : node_ranks_) {
    bool near = false;
    for (int r : ranks) {
      const Gpu& g = topo_.gpus[gpus_[r]];
      near = near || (g.nic >= 0 && g.nic_path <= PathType::kPxb);
    }
    if (!near) return false;
  }
  return true;
}

// NCCL's ncclTopoTuneModel for this communicator.
void CommModel::tune() {
  const int n = nranks(), nodes = nnodes();
  if (n <= 1) return;
  const double ppn = static_cast<double>(n) / nodes;

  const StepLatencies step_lat = step_latencies(min_clock_mhz_, min_cc_ / 10 == 10 && !arm_host_);
  for (int f = 0; f < kNumFuncs; ++f) {
    for (int a = 0; a < kNumAlgos; ++a) {
      if ((f == kBroadcast || f == kReduce) && a != kRing) continue;
      if ((f == kReduceScatter || f == kAllGather) && a != kPat && a != kRing && a != kNvls && a != kCollNetDirect) continue;
      if (f == kAllReduce && a == kPat) continue;
      if (a == kPat && !rules_.pat) continue;  // NCCL 2.23
      if ((f == kReduceScatter || f == kAllGather) && a == kNvls && !rules_.nvls_gather) continue;  // NCCL 2.19
      const bool collnet = a == kCollNetDirect || a == kCollNetChain;
      if (collnet && f != kAllReduce) continue;  // CollNet AllGather/ReduceScatter need plugin support
      const Graph& g = graphs_[a];
      if (g.channels == 0) continue;
      for (int p = 0; p < kNumProtos; ++p) {
        if ((a == kNvls || a == kNvlsTree || a == kPat) && p != kSimple) continue;
        if (a == kPat && !(nodes == n && min_cc_ >= 60)) continue;
        if (collnet && p != kSimple) continue;
        double bw = nodes <= 2 || collnet ? g.bw_intra : g.bw_inter;
        if (a == kNvls || a == kNvlsTree) bw = nvls_channel_bw(f, a, g);
        double bus = g.channels * bw;
        // NCCL's refinements (NVLS has its own formula above).
        if (a != kNvls && a != kNvlsTree)
          bus = std::min(bus * tuner_efficiency(f, a, p), cap_busbw(f, a, p, g.channels, /*for_time=*/false));
        if (a == kCollNetDirect) {  // full speed needs a NIC per GPU: NCCL discounts the GPU/NIC ratio
          double factor = ppn / g.channels;
          bus /= factor - (factor - 1) / 2;
          if (min_cc_ >= 90) bus *= 0.85;
        }
        bw_[f][a][p] = bus * bus_to_alg(f, a, /*for_time=*/false);

        lat_[f][a][p] = latency(f, a, p, rules_.base_lat, rules_.hw_lat, 0, topo_.plugin_latency_us, /*for_time=*/false);
        // The modeled time takes NCCL's per-step latencies, which match Hopper's runs with one
        // process per GPU (8 x H20: 19 us at 32 KiB; 2 x H100: 7.5 us), but for PCIe and for
        // LL steps of lower-clocked GPUs over NVLink (step_latencies), and a step across the
        // network at least the network's own latency instead of what its plugin reports.
        step_lat_[f][a][p] = latency(f, a, p, kBaseLat, step_lat.at, topo_.net_latency_us, 0, /*for_time=*/true);
      }
    }
  }

  // Enables: NVLS Tree needs several nodes; NVLS across nodes and CollNet need a SHARP
  // network and NCCL_COLLNET_ENABLE=1, CollNet Direct NVSwitch nodes; LL128 needs NVLink
  // inside nodes, one GPU generation and, across nodes, NICs near the GPUs (net_path_allows_ll128).
  const bool ll128_net = nodes == 1 || net_path_allows_ll128();
  for (int f = 0; f < kNumFuncs; ++f)
    for (int a = 0; a < kNumAlgos; ++a)
      for (int p = 0; p < kNumProtos; ++p) {
        bool on = env_.algo_enabled[f][a];
        if (nodes == 1 && a == kNvlsTree) on = false;
        const bool sharp = topo_.sharp && env_.collnet_enable && nodes > 1;
        if ((a == kCollNetDirect || a == kCollNetChain || (a == kNvls && nodes > 1)) && !sharp) on = false;
        if (a == kCollNetDirect && !nvswitch_) on = false;
        int pe = env_.proto_enabled[f][p];
        if (pe == 2) pe = (nvl_intra_ || ppn_ == 1) && min_cc_ == max_cc_ && rules_.ll128_default(min_cc_) && ll128_net;
        // A plugin that sets NCCL_PROTO=Simple does so for the whole process, unless the user set it.
        if (topo_.net_simple_only && p != kSimple && !env_.proto_forced) pe = 0;
        if (!on || !pe) bw_[f][a][p] = 0;
      }
}

}  // namespace fakegpu::planner
