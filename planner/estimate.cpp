// Per operation: NCCL's choice of algorithm and protocol, the flow plan over physical links,
// and the modeled time.
//
// time = latency + data + fill
//   latency: NCCL's latency model for the chosen algorithm and protocol;
//   data:    bytes on the busiest link over that link's rate, scaled by the protocol's
//            efficiency (LL carries a flag with every word, LL128 one line in sixteen...);
//   fill:    pipeline start-up: before the busiest link runs at full rate, the first chunk
//            has to pass the pipeline's stages. Chunk sizes follow NCCL's own rules.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "comm_model.h"

namespace fakegpu::planner {
namespace {

using wire::CollType;

int func_of(CollType coll) {
  switch (coll) {
    case CollType::kAllReduce: return kAllReduce;
    case CollType::kBroadcast: return kBroadcast;
    case CollType::kReduce: return kReduce;
    case CollType::kAllGather: return kAllGather;
    case CollType::kReduceScatter: return kReduceScatter;
    default: return -1;
  }
}

// Share of what a protocol writes that is data: LL's 16-byte lines carry 8 bytes and a flag,
// LL128's 128-byte lines 120 bytes and a flag word.
constexpr double kLLPayload = 0.5;
constexpr double kLL128Payload = 120.0 / 128;
double payload_share(int proto) { return proto == kLL ? kLLPayload : proto == kLL128 ? kLL128Payload : 1.0; }

// Broadcast and Reduce run a ring as a chain from or to the root (fill_us says why their fill
// does not show).
bool chain_from_or_to_root(CollType coll) { return coll == CollType::kBroadcast || coll == CollType::kReduce; }

constexpr double kDefaultBuffsize = 4.0 * 1024 * 1024;  // NCCL's Simple buffer, NCCL_BUFFSIZE
constexpr int kNcclSteps = 8;                               // a buffer holds this many steps
constexpr double kLL128Step = 120.0 * 640 * 8 * kLL128Payload;  // data part of an LL128 step
constexpr double kLLStep = 64.0 * 1024 * kLLPayload;            // data part of a 64 KiB LL step
constexpr double kLL128Grain = 1920;           // LL128 chunks are whole multiples of this

}  // namespace

// Accumulates bytes per link for paths between GPUs, and which channels cross each link.
class Flows {
 public:
  explicit Flows(const Topology& topo)
      : topo_(topo), bytes_(topo.links.size(), 0.0), channels_(topo.links.size(), 0), last_(topo.links.size(), -1) {}

  // The links a path crosses: NVLink (or PCIe) inside a node; across nodes the GPU's PCIe
  // to its rail NIC (GPUDirect RDMA), the NICs, and PCIe again on the far side.
  int path(int from, int to, int* out) const {
    const Gpu& a = topo_.gpus[from];
    const Gpu& z = topo_.gpus[to];
    if (a.node == z.node) {
      bool nvl = topo_.nvlink_between(from, to);
      out[0] = nvl ? topo_.nvl_tx(from) : topo_.pcie_tx(from);
      out[1] = nvl ? topo_.nvl_rx(to) : topo_.pcie_rx(to);
      return 2;
    }
    out[0] = topo_.pcie_tx(from);
    out[1] = topo_.nic_tx(a.nic);
    out[2] = topo_.nic_rx(z.nic);
    out[3] = topo_.pcie_rx(to);
    return 4;
  }
  void send(int from, int to, double b, int channel = 0) {
    if (from == to || b == 0) return;
    pairs_[{topo_.gpus[from].node, topo_.gpus[to].node}] += b;
    int links[4];
    int count = path(from, to, links);
    for (int i = 0; i < count; ++i) add(links[i], b, channel);
  }
  // To and from a switch that reduces in the network (SHARP): the GPU's PCIe and its NIC.
  void to_network(int gpu, double b) {
    pairs_[{topo_.gpus[gpu].node, kNetworkNode}] += b;
    add(topo_.pcie_tx(gpu), b, 0), add(topo_.nic_tx(topo_.gpus[gpu].nic), b, 0);
  }
  void from_network(int gpu, double b) {
    pairs_[{kNetworkNode, topo_.gpus[gpu].node}] += b;
    add(topo_.nic_rx(topo_.gpus[gpu].nic), b, 0), add(topo_.pcie_rx(gpu), b, 0);
  }
  // To and from the node's NVSwitch (NVLS): the GPU's NVLink ports.
  void to_switch(int gpu, double b) {
    pairs_[{topo_.gpus[gpu].node, topo_.gpus[gpu].node}] += b;
    add(topo_.nvl_tx(gpu), b, 0);
  }
  void from_switch(int gpu, double b) { add(topo_.nvl_rx(gpu), b, 0); }
  // Seconds per byte (as us per MB) for one channel of a path: each link is shared by the
  // channels that cross it.
  double channel_cost(int from, int to) const {
    int links[4];
    int count = path(from, to, links);
    double worst = 0;
    for (int i = 0; i < count; ++i)
      worst = std::max(worst, std::max(1, channels_[links[i]]) / std::max(topo_.links[links[i]].gbytes, 1e-6));
    return worst;
  }
  const std::vector<double>& bytes() const { return bytes_; }
  const std::map<std::pair<int, int>, double>& node_pairs() const { return pairs_; }

 private:
  void add(int link, double b, int channel) {
    bytes_[link] += b;
    if (last_[link] != channel) last_[link] = channel, ++channels_[link];
  }
  const Topology& topo_;
  std::vector<double> bytes_;
  std::vector<int> channels_, last_;
  std::map<std::pair<int, int>, double> pairs_;
};

double CommModel::bus_factor(CollType coll, int n) {
  if (n <= 1) return coll == CollType::kAllReduce ? 0.0 : 1.0;
  switch (coll) {
    case CollType::kAllReduce: return 2.0 * (n - 1) / n;
    case CollType::kAllGather:
    case CollType::kReduceScatter:
    case CollType::kAlltoAll:
    case CollType::kGather:
    case CollType::kScatter: return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

double CommModel::nccl_latency(int f, int a, int p, uint64_t bytes, bool for_time) const {
  double lat = for_time ? step_lat_[f][a][p] : lat_[f][a][p];
  if (a == kRing && p == kSimple && nnodes() > 1 && f == kAllReduce && bytes / (channels_ * nranks()) >= 64)
    lat *= min_cc_ < 80 ? 1.9 : 1.4;  // NCCL: plateau effect of rings across nodes
  return lat;
}

// NCCL's selection: the enabled (algorithm, protocol) with the least modeled time.
void CommModel::choose(int f, uint64_t bytes, int* algo, int* proto) const {
  double best = std::numeric_limits<double>::infinity();
  *algo = -1;
  // NVLS trees of Blackwell beside x86 hosts take trees' correction (since 2.29).
  const bool nvls_tree_corrected = min_cc_ >= 100 && !arm_host_ && rules_.nvls_tree_corrected;
  for (int a = 0; a < kNumAlgos; ++a)
    for (int p = 0; p < kNumProtos; ++p) {
      double bw = bw_[f][a][p] * tree_correction(f, a, p, bytes, nvls_tree_corrected);
      if (bw <= 0) continue;
      double t = nccl_latency(f, a, p, bytes) + bytes / (1000.0 * bw);
      if (t < best) best = t, *algo = a, *proto = p;
    }
  if (*algo < 0)
    throw TuningError(std::string("no algorithm/protocol available for ") + func_name(f) +
                      (env_.algo_forced || env_.proto_forced ? " with the NCCL_ALGO/NCCL_PROTO settings given" : ""));
}

// NCCL uses fewer channels (and threads) when a message is too small to feed them all.
int CommModel::op_channels(int a, int p, uint64_t bytes) const {
  if (a == kNvls || a == kNvlsTree) return nvls_channels_;
  if (a == kCollNetDirect || a == kCollNetChain) return graphs_[a].channels;
  int threads = p == kLL128 ? 640 : 512;
  if (a == kRing && p == kSimple && graphs_[kRing].bw_intra * graphs_[kRing].channels <= 12.0) threads = 256;
  double threshold = p == kSimple ? 64 : 8;
  if (a == kRing && p == kLL) threshold *= nranks();
  int nc = channels_;
  while (nc >= 2 && bytes < nc * threads * threshold) --nc;
  return nc;
}

// What of a tree's rate LL128 keeps: NCCL's 7/9 inside one node, its payload share across nodes.
double CommModel::tree_ll128_share() const { return nnodes() == 1 ? 7.0 / 9.0 : kLL128Payload; }

// Share of a link's rate that an algorithm and protocol reach (NCCL's model refinements). Ring LL
// keeps the half its flags leave on every GPU generation: NCCL's tuner says so since 2.21 (before,
// it took a quarter for AllReduce), and runs of newer NCCL show it (8 x A100: 37.9 us at 1 MiB;
// 8 x H100: 28.6 us; 8 x H20: 20.4 us at 512 KiB).
double CommModel::efficiency(int f, int a, int p) const {
  double e = 1.0;
  if (a == kRing) e = p == kLL ? 0.5 : p == kLL128 ? 0.92 : 1.0;
  if (a == kTree) {
    if (f == kAllReduce) e = 0.92;
    if (p == kLL) e /= 3.8;
    if (p == kLL128) e *= tree_ll128_share();
  }
  if (a == kNvls || a == kNvlsTree) e = nvls_efficiency(min_cc_);
  if (a == kPat) e = 0.75;
  return e;
}

// The share NCCL's tuner takes, where a release differs from the newest: ring LL at a quarter of
// the bus bandwidth before 2.21 (a third for one node's AllGather, ReduceScatter and Broadcast),
// ring LL128 at 0.7 on nodes of one GPU before 2.23, and PAT at 0.85 in 2.23.
double CommModel::tuner_efficiency(int f, int a, int p) const {
  if (a == kRing && p == kLL && !rules_.ring_ll_half)
    return nnodes() > 1 || f == kAllReduce || f == kReduce ? 0.25 : 1.0 / 3;
  if (a == kRing && p == kLL128 && rules_.ll128_lone_gpu_share && ppn_ < 2) return 0.7;
  if (a == kPat) return rules_.pat_share;
  return efficiency(f, a, p);
}

// What one channel's thread block copies each way on the communicator's slowest GPU, half its
// whole copy when it receives and sends at once, as a ring's channels and a p2p channel that
// carries both do: 40 GB/s at 1980 MHz, as fast as the SM's clock. nccl-tests' sendrecv on one
// node, where four channels each send and receive, shows it: 8 x H100 80 GB/s each way at 32 MiB,
// 8 x B200 (1965 MHz) 77 to 84 from 16 to 64 MiB, 8 x A100 (1410 MHz) 14 a channel.
double CommModel::channel_copy_gbs(bool both_ways) const {
  return 40.0 * sm_clock_ratio(min_clock_mhz_) / (both_ways ? 2 : 1);
}

// Whether a ring's channels and an NVLS tree's network data are held to what their blocks copy
// (channel_copy_gbs). Hopper's and older GPUs' are: rings and NVLS trees of 8 x H100 across 4 to
// 10 nodes carry 20 GB/s a channel, 320 GB/s of bus bandwidth on NCCL's 16, where their NICs
// carry 380 with 24 channels. Blackwell's rings across nodes carry more than their p2p channels
// copy (2 x 8 B200: 366 to 380 GB/s, 8 GB200 in each of 3 racks: 394, on 16 channels as the
// search gives them), so what holds their channels is not known and their links set the rate.
bool CommModel::blocks_hold_channels() const { return min_cc_ < 100; }

// Per-channel limits of the protocols (what one SM can push), as NCCL bus bandwidth: with
// efficiency() this is NCCL's chain of model refinements, bus = min(raw * efficiency, cap).
// `for_time` adds the limits the modeled time knows and NCCL's tuner does not: a ring LL
// channel is one thread block, which moves LL lines no faster than LL128's per-channel cap
// scaled by the data each line carries (small operations run on few channels, NCCL's nc rule),
// a ring's Simple or LL128 channel, one block receiving and sending at once, no faster than that
// block copies (blocks_hold_channels; LL128 less its flags, close to NCCL's own LL128 cap per
// searched channel, which counts two of the communicator's), and NVLS on one node is held to its
// NVLink side (nvls_channel_bw). It drops one: NCCL's cap on a tree channel (perChMaxTreeBw), a
// figure that steers its choice and that trees outrun (GB200 racks, three of eight GPUs, tree
// forced: 253 GB/s of algorithm bandwidth on 16 channels, where the cap allows 192; NCCL picks
// the slower ring there for it, NVIDIA/nccl issue 1801).
double CommModel::cap_busbw(int f, int a, int p, int nc, bool for_time) const {
  // The time takes the newest release's caps, what the kernels do; the tuner its release's own.
  const NcclRules& caps = for_time ? newest_nccl_rules() : rules_;
  const int arch = caps.arch(min_cc_);
  const int idx2 = nnodes() <= 2 ? nnodes() - 1 : 2;
  const double ll_max = caps.ll_max_bw[nnodes() == 1 ? arch : 0][idx2];
  const double inf = std::numeric_limits<double>::infinity();
  if (a == kRing) {
    if (p == kLL)
      return for_time ? std::min(ll_max, nc * caps.ring_ll128_bw[arch][idx2] * kLLPayload / kLL128Payload) : ll_max;
    const double blocks = for_time && blocks_hold_channels() ? nc * channel_copy_gbs(/*both_ways=*/true) : inf;
    if (p == kLL128) return std::min(nc * caps.ring_ll128_bw[arch][idx2], blocks * kLL128Payload);
    return blocks;
  }
  // NVLS: what its channels carry at the speed the search gave them (NCCL 2.28's formula), so
  // the switch's rounds never outrun the channels that feed them.
  if (a == kNvls || a == kNvlsTree) return graphs_[a].channels * nvls_channel_bw(f, a, graphs_[a], for_time);
  if (a != kTree || f != kAllReduce) return inf;
  // Applies before the protocol's own cap.
  const double tree = for_time ? inf : nc * caps.tree_bw[arch][idx2];
  if (p == kLL) return std::min(tree / 3.8, ll_max);
  if (p == kLL128) return std::min(tree * tree_ll128_share(), nc * caps.tree_ll128_bw[arch][idx2]);
  return tree;
}

// NCCL's conversion of bus bandwidth to algorithm bandwidth. Its tuner took NVLS at 5/6 before
// 2.28 (AllGather and ReduceScatter too, until 2.23), and an NVLS tree in 2.18 at 0.7 of a ring
// over its nodes.
double CommModel::bus_to_alg(int f, int a, bool for_time) const {
  const int n = nranks();
  if (!for_time && (a == kNvls || a == kNvlsTree) && rules_.nvls_rule != NvlsTunerRule::kEfficiency) {
    if (f == kAllGather || f == kReduceScatter) return rules_.nvls_gather_five_sixths ? 5.0 / 6 : 1.0;
    if (a == kNvlsTree && rules_.nvls_rule == NvlsTunerRule::kGeneric) return 0.7 * nnodes() / (2.0 * (nnodes() - 1));
    return 5.0 / 6;
  }
  if (a == kRing) return static_cast<double>(n) / (f == kAllReduce ? 2 * (n - 1) : (f == kAllGather || f == kReduceScatter) ? n - 1 : n);
  if (f == kAllGather || f == kReduceScatter) return 1.0;
  if (a == kNvls || a == kNvlsTree) return static_cast<double>(n) / (f == kAllReduce ? 2 * (n - 1) : n);  // NCCL 2.28
  return 0.5;
}

// A Simple step: an eighth of NCCL's buffer (NCCL_BUFFSIZE, 4 MiB unless set; AWS's plugin sets
// 8 MiB on its GPU instances).
double CommModel::simple_step() const {
  return (env_.buffsize > 0 ? static_cast<double>(env_.buffsize) : kDefaultBuffsize) / kNcclSteps;
}

// NCCL's concurrentOps: an NVLS round per channel and head at once. The heads are the first GPUs
// of the NVLS graph's channels: every GPU of an 8-GPU node, 32 of an NVL72 rack's 72.
double CommModel::nvls_rounds_in_flight() const {
  return static_cast<double>(nvls_channels_) * std::max(1, graphs_[kNvls].channels);
}

// The chunk NCCL's NVLS and NVLS tree AllReduce move per round (enqueue.cc): the comm's NVLS
// chunk, capped for a tree at its tree chunk (tune_nvls), and shrunk while the buffer holds too
// few chunks for every channel and head.
double CommModel::nvls_chunk(int a, uint64_t bytes) const {
  const double ops = nvls_rounds_in_flight();
  auto shrink = [&](double chunk, double times, double to) {
    return bytes < times * ops * chunk && chunk > to ? to : chunk;
  };
  if (a == kNvls) {
    double chunk = std::min(simple_step(), nvls_chunk_size_);
    if (nnodes() > 1 && bw_[kAllReduce][kNvls][kSimple] < 150) chunk = std::min(chunk, 32768.0);
    chunk = shrink(chunk, 64, 65536);
    chunk = shrink(chunk, 8, 32768);
    return shrink(chunk, 2, 16384);
  }
  double chunk = std::min(nvls_chunk_size_, nvls_tree_max_chunk_);
  chunk = shrink(chunk, 32, 262144);
  chunk = shrink(chunk, 16, 131072);
  chunk = shrink(chunk, 4, 65536);
  return shrink(chunk, 1, 32768);
}

double CommModel::fill_us(CollType coll, int a, int p, int nc, uint64_t bytes, double rate, const Pattern& pat) const {
  const int n = nranks();
  if (a == kNvls || a == kNvlsTree) {
    // NVLS works in rounds of one chunk per (channel, head); NCCL shrinks the chunk for
    // smaller messages. A chunk is reduced through the switch, returned, then multicast:
    // two rounds are exposed (more across nodes, one per tree level each way).
    if (rate <= 0) return 0;
    const double ops = nvls_rounds_in_flight();
    const double chunk = nvls_chunk(a, bytes);
    if (a == kNvls) return 2 * std::min<double>(bytes, ops * chunk) / rate;
    // The tree's levels each pass on one chunk per channel, from the channel's head over its
    // NIC, not a chunk per GPU as the switch's rounds do.
    const double level = std::min<double>(bytes, nvls_channels_ * chunk) / rate;
    return 2 * std::min<double>(bytes, ops * chunk) / rate + 2 * tree_depth() * level;
  }
  if (a == kTree) return tree_fill_us(p, nc, bytes, pat);
  if (a != kRing && a != kPat) return 0;
  // A chain to or from a root (Broadcast, Reduce) fills over its n - 2 inner hops, but nothing
  // waits for its far end: the root of a broadcast, or the first GPU of a reduce, is held back
  // only by its receiver's free buffer slots and starts its next operation while the hops
  // behind it drain. Operations that follow one another, as nccl-tests times them and as DDP's
  // coalesced broadcasts run, each hide the last one's fill behind their own data (8 x B200:
  // broadcast 64 MiB in 135 us and reduce in 134, where a fill over six hops of 32 channels'
  // 512 KiB steps would take 139 us alone). Only a lone broadcast's last rank sees it.
  if (chain_from_or_to_root(coll)) return 0;
  // Every ring link is busy from the first step: only the last slice shows, on the slowest hop
  // of a channel (hop_cost, us per MB at full protocol efficiency). Simple slices hold two steps.
  const double slice = p == kSimple ? 2 * simple_step() : p == kLL128 ? kLL128Step : kLLStep;
  const double block = static_cast<double>(bytes) / (static_cast<double>(nc) * n);
  return std::min(slice, block) * pat.hop_cost / efficiency(func_of(coll), a, p) / 1e3;
}

// NCCL's tree AllReduce moves each channel's share in chunks, up the chain inside each node and
// the tree across nodes to the root, then back down. The slowest level sets the pace (data_us),
// but the first chunk has to cross every other level before it: those levels show once each.
// Chunks follow NCCL's calcCollChunking: Simple and LL keep one buffer step (simple_step, 32
// KiB of LL data; Simple's halved for small shares before 2.20); LL128 shrinks from its
// 576,000-byte step while a channel's share holds too few of them for the tree's depth.
double CommModel::tree_fill_us(int p, int nc, uint64_t bytes, const Pattern& pat) const {
  const int nodes = nnodes();
  const double ppn = static_cast<double>(nranks()) / nodes;
  const double share = static_cast<double>(bytes) / std::max(1, nc);
  double chunk = p == kSimple ? simple_step() : p == kLL ? kLLStep : kLL128Step;
  if (p == kLL128) {
    const double steps = 1 + log2i(nodes) + 0.1 * ppn;
    while (std::floor(share / chunk) < steps * 64 / ppn && chunk > 131072) chunk = std::floor(chunk / 2);
    while (std::floor(share / chunk) < steps * 16 / ppn && chunk > 32768) chunk = std::floor(chunk / 2);
    chunk = std::max(kLL128Grain, std::floor(chunk / kLL128Grain) * kLL128Grain);
  }
  if (p == kSimple && rules_.tree_simple_halving) {
    // Before 2.20 a Simple tree's chunk halved, to 128, 64 and 32 KiB, while a channel's share held
    // fewer than 8, 4 and 1 chunks a level of the tree (its depth: a node's chain and the network's).
    const double depth = ppn - 1 + log2i(nodes);
    for (auto [times, floor_bytes] : {std::pair{8.0, 131072.0}, {4.0, 65536.0}, {1.0, 32768.0}})
      while (std::floor(share / chunk) < depth * times && chunk > floor_bytes) chunk = std::floor(chunk / 2);
  }
  chunk = std::min(chunk, share);
  // A level passes on its chunk at the link's rate less the protocol's flags.
  const double eff = payload_share(p);
  const double t_intra = chunk * pat.tree_intra_cost / eff / 1e3;
  const double t_net = chunk * pat.tree_net_cost / eff / 1e3;
  const int intra_levels = 2 * static_cast<int>(std::lround(ppn - 1));
  const int net_levels = 2 * tree_depth();
  const double slowest = std::max(intra_levels ? t_intra : 0.0, net_levels ? t_net : 0.0);
  return std::max(0.0, intra_levels * t_intra + net_levels * t_net - slowest);
}

const CommModel::Pattern& CommModel::pattern(CollType coll, int algo, int root) const {
  bool rooted = coll == CollType::kBroadcast || coll == CollType::kReduce || coll == CollType::kGather ||
                coll == CollType::kScatter;
  auto key = std::make_tuple(static_cast<int>(coll), algo, rooted ? root : 0);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, build_pattern(coll, algo, root)).first;
  return it->second;
}

CommModel::Pattern CommModel::build_pattern(CollType coll, int algo, int root) const {
  const int n = nranks();
  Flows flows(topo_);
  auto g = [&](int r) { return gpus_[r]; };
  for (const Flow& f : flow_plan(coll, algo, root)) {
    const double w = f.bytes * f.steps;
    if (f.dst == Flow::kSwitch) flows.to_switch(g(f.src), w);
    else if (f.src == Flow::kSwitch) flows.from_switch(g(f.dst), w);
    else if (f.dst == Flow::kNetwork) flows.to_network(g(f.src), w);
    else if (f.src == Flow::kNetwork) flows.from_network(g(f.dst), w);
    else flows.send(g(f.src), g(f.dst), w, f.channel);
  }

  Pattern pat = summarize(flows);
  // An NVLS tree's network data goes through its channels' blocks on the heads: a NIC carries no
  // more than its head's channels copy (8 x H100 nodes: two of NCCL's 16 NVLS channels a NIC).
  if (algo == kNvlsTree && blocks_hold_channels()) {
    const double nic_gbs = static_cast<double>(nvls_channels_) / std::max(1, graphs_[kNvls].channels) *
                           channel_copy_gbs(/*both_ways=*/true);
    for (const LinkLoad& l : pat.per_byte)
      if (is_nic(topo_.links[l.link].kind)) pat.worst_net = std::max(pat.worst_net, l.bytes / nic_gbs);
  }
  // A ring's links are all busy from its first step, so its start-up exposes only the last
  // slice, on the slowest hop of a channel (a chain's exposes nothing: fill_us).
  if ((algo == kRing || algo == kPat) && !chain_from_or_to_root(coll) && !rings_.empty()) {
    const auto& ring = rings_[0];
    for (int i = 0; i < n; ++i) pat.hop_cost = std::max(pat.hop_cost, flows.channel_cost(g(ring[i]), g(ring[(i + 1) % n])));
  }
  // A tree's levels: its edges inside nodes and across the network, both ways.
  if (algo == kTree && !trees_.empty()) {
    const auto& tree = trees_[0];
    for (int r = 0; r < n; ++r) {
      const int up = tree[r].parent;
      if (up < 0) continue;
      double& cost = node_of_[r] == node_of_[up] ? pat.tree_intra_cost : pat.tree_net_cost;
      cost = std::max({cost, flows.channel_cost(g(r), g(up)), flows.channel_cost(g(up), g(r))});
    }
  }
  return pat;
}

// Per-byte link loads of a flow plan, and its busiest links.
CommModel::Pattern CommModel::summarize(const Flows& flows) const {
  Pattern pat;
  for (const auto& [pair, b] : flows.node_pairs()) pat.node_pairs.push_back({pair.first, pair.second, b});
  const auto& bytes = flows.bytes();
  for (size_t l = 0; l < bytes.size(); ++l) {
    if (bytes[l] <= 0) continue;
    pat.per_byte.push_back({static_cast<int>(l), bytes[l]});
    const Link& link = topo_.links[l];
    double load = bytes[l] / std::max(link.gbytes, 1e-6);
    double& worst = is_nic(link.kind) ? pat.worst_net : is_pcie(link.kind) ? pat.worst_pcie : pat.worst_nvlink;
    worst = std::max(worst, load);
  }
  return pat;
}

double CommModel::p2p_latency(bool inter_node) const {
  return kBaseLat[kRing][kLL] + kStepLat[inter_node ? kHwNet : intra_class()][kRing][kSimple];
}

// One message between two ranks: NCCL's p2p kernels spread it over the channels of that peer,
// so the path's slowest link sets the rate.
Estimate CommModel::estimate_p2p(int from, int to, uint64_t bytes, bool both_ways) const {
  Estimate e;
  e.channels = 1;
  e.bytes = bytes;
  if (from == to || bytes == 0 || nranks() <= 1) {
    e.time_us = bytes / 1.0e6;  // a local copy at about 1 TB/s
  } else {
    const Pattern* pat;
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      auto it = p2p_cache_.find({from, to});
      if (it == p2p_cache_.end()) {
        Flows flows(topo_);
        flows.send(gpus_[from], gpus_[to], 1.0);
        it = p2p_cache_.emplace(std::make_pair(from, to), summarize(flows)).first;
      }
      pat = &it->second;
    }
    const bool remote = node_of_[from] != node_of_[to];
    e.latency_us = p2p_latency(remote);
    const P2pCopy copy = p2p_copy(CollType::kSend, bytes, /*lone=*/true, remote, both_ways);
    e.data_us = std::max(bytes * std::max({pat->worst_nvlink, pat->worst_pcie, pat->worst_net}) / 1e3, copy.us);
    e.channels = copy.channels;
    e.time_us = e.latency_us + e.data_us;
    e.per_byte_links = &pat->per_byte;
    e.per_byte_node_pairs = &pat->node_pairs;
  }
  e.algbw_gbs = e.busbw_gbs = e.time_us > 0 ? bytes / e.time_us / 1e3 : 0;
  return e;
}

std::vector<LinkLoad> Estimate::link_bytes() const {
  std::vector<LinkLoad> out;
  if (per_byte_links)
    for (const LinkLoad& l : *per_byte_links) out.push_back({l.link, l.bytes * bytes});
  return out;
}

Estimate CommModel::estimate(CollType coll, uint64_t bytes, int root) const {
  Estimate e;
  e.bytes = bytes;
  const int n = nranks();
  const int f = func_of(coll);
  if (n <= 1 || bytes == 0) {
    // One rank copies locally; nothing crosses a link.
    e.algo = kRing, e.channels = 1;
    e.time_us = bytes / 1.0e6;  // about 1 TB/s of device memory
  } else {
    int a = -1, p = kSimple;
    if (f >= 0) {
      choose(f, bytes, &a, &p);
      e.latency_us = nccl_latency(f, a, p, bytes, true);
    } else {
      e.latency_us = p2p_latency(nnodes() > 1);
    }
    e.algo = a, e.proto = p;
    e.channels = a < 0 ? channels_ : op_channels(a, p, bytes);
    const Pattern& pat = pattern(coll, a, root);
    double eff = f >= 0 ? efficiency(f, a, p) : 1.0;
    // Through host memory, the node's GPU links carry data at a share of their rate.
    const double store_eff = shm_intra_ ? eff * kShmRateShare : eff;
    // NVLS's efficiency is the switch's reduction over NVLink; an NVLS tree's NICs, and the PCIe
    // links between them and their heads, carry plain data.
    const bool nvls = a == kNvls || a == kNvlsTree;
    const double net_eff = nvls ? 1.0 : eff;
    const double pcie_eff = nvls ? 1.0 : store_eff;
    e.data_us =
        bytes * std::max({pat.worst_nvlink / store_eff, pat.worst_pcie / pcie_eff, pat.worst_net / net_eff}) / 1e3;
    // No protocol outruns its per-channel cap. NCCL's tree correction factors move its choice
    // only: the medium sizes a tree falls short at are its start-up, which tree_fill_us models.
    if (f >= 0) {
      const double cap = cap_busbw(f, a, p, e.channels, /*for_time=*/true);
      e.data_us = std::max(e.data_us, bytes / (cap * bus_to_alg(f, a) * 1e3));
    } else {
      // Nor do point-to-point patterns outrun the channels NCCL gives each message.
      const P2pCopy copy = p2p_copy(coll, bytes);
      e.data_us = std::max(e.data_us, copy.us);
      e.channels = copy.channels;
    }
    double rate = e.data_us > 0 ? bytes / e.data_us : 0;  // bytes per us at full speed
    e.fill_us = fill_us(coll, a, p, e.channels, bytes, rate, pat);
    e.time_us = e.latency_us + e.data_us + e.fill_us;
    e.per_byte_links = &pat.per_byte;
    e.per_byte_node_pairs = &pat.node_pairs;
  }
  e.algbw_gbs = e.time_us > 0 ? bytes / e.time_us / 1e3 : 0;
  e.busbw_gbs = e.algbw_gbs * bus_factor(coll, n);
  return e;
}

}  // namespace fakegpu::planner
