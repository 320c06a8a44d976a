// Point-to-point channels: how many of a communicator's channels NCCL gives one Send or Recv
// (its init's ncclTopoComputeP2pChannels, its enqueue's addP2pToPlan), and what they carry.
//
// A p2p channel is one thread block copying between the user's buffer and the peer's, at what
// such a block copies (channel_copy_gbs, estimate.cpp): split between the send and the receive it
// carries when it carries both, and as fast as the SM's clock. nccl-tests' sendrecv on one node,
// where every channel does both, shows it on three GPU generations: 8 x H100 at 80 GB/s from 32 to
// 64 MiB (4 channels), 162 at 128 MiB (8), 361 at 1 GiB (the links); 8 x B200 at 77 to 84 GB/s
// from 16 to 64 MiB, 330 at 256 MiB (16 channels), 656 at 16 GiB (32); 8 x A100 (1410 MHz) at
// 111 GB/s at 128 MiB (8 channels, 14 GB/s each way). Gather and Scatter, whose root only
// receives or only sends, run at their links.
//
// Across the network a channel's block fills and drains the buffer of one network connection,
// 128 KiB chunks each posted by the proxy as its own RDMA write, and carries each way the 14 GB/s
// NCCL gives a peer a channel for (NCCL_P2P_PER_CHANNEL_NET_BW): ten nodes of H100 with a
// 400 Gbit/s NIC a GPU, which their rings fill, send round a ring at 25 GB/s on the two channels
// NCCL gives a message with 1 to 4 GPUs a node, and at 15 on the one it gives with 8.
#include <algorithm>
#include <cmath>

#include "comm_model.h"

namespace fakegpu::planner {
namespace {

constexpr int kMaxP2pTasksPerBatch = 8;       // NCCL_MAX_DEV_WORK_P2P_PER_BATCH
// What NCCL sizes a network peer's channels by (NCCL_P2P_PER_CHANNEL_NET_BW's default), and what
// such a channel carries each way whatever that setting says.
constexpr double kP2pPerChannelNetGBs = 14;
constexpr double kP2pNvlChunk = 512 * 1024;   // NCCL_P2P_NVL_CHUNKSIZE
constexpr double kP2pNetChunk = 128 * 1024;   // NCCL_P2P_NET_CHUNKSIZE
constexpr double kP2pPciChunk = 128 * 1024;   // NCCL_P2P_PCI_CHUNKSIZE

int pow2_up(int x) {
  int p = 1;
  while (p < x) p <<= 1;
  return p;
}

}  // namespace

// Channels NCCL gives a peer on the same node: twice the NVLinks between the two GPUs (2 over
// PCIe).
int CommModel::p2p_channels_to_local(int from, int to) const {
  const Gpu& a = topo_.gpus[gpus_[from]];
  const Gpu& b = topo_.gpus[gpus_[to]];
  if (!topo_.nvlink_between(gpus_[from], gpus_[to])) return 2;
  const Node& node = topo_.nodes[a.node];
  double pair = std::min(a.nvlink_gbs, b.nvlink_gbs);
  if (node.fabric == IntraFabric::kNvLinkMesh) pair /= std::max<size_t>(1, node.gpus.size() - 1);
  return 2 * std::max(1, static_cast<int>(pair / nccl_nvlink_bw(a.cc)));
}

// Channels NCCL gives every peer across the network: one per NIC of the GPU, more where its NICs
// outrun 14 GB/s a channel (NCCL_P2P_PER_CHANNEL_NET_BW), or NCCL_NCHANNELS_PER_NET_PEER.
int CommModel::p2p_channels_to_network(int from) const {
  if (env_.channels_per_net_peer > 0) return env_.channels_per_net_peer;
  const Gpu& a = topo_.gpus[gpus_[from]];
  int count = 0;
  double bw = 0;
  for (int nic : topo_.nodes[a.node].nics) {
    const auto& served = topo_.nics[nic].gpus;
    if (std::find(served.begin(), served.end(), gpus_[from]) == served.end()) continue;
    ++count, bw += topo_.nics[nic].line_gbytes;
    if (bw >= a.pcie_gbs) break;  // NCCL stops once the NICs match the GPU's own link
  }
  if (count == 0) return 2;
  const double per_channel =
      env_.p2p_per_channel_net_bw > 0 ? static_cast<double>(env_.p2p_per_channel_net_bw) : kP2pPerChannelNetGBs;
  return std::max(count, static_cast<int>(std::ceil(bw / per_channel)));
}

void CommModel::setup_p2p() {
  const int n = nranks();
  const int most = env_.max_p2p_channels > 0 ? env_.max_p2p_channels : rules_.max_channels;
  p2p_channels_ = pow2_up(std::max(std::min(channels_, most), std::max(1, env_.min_p2p_channels)));
  int per_peer = rules_.max_channels;
  for (int r : node_ranks_[node_of_[0]])
    if (r != 0) per_peer = std::min(per_peer, p2p_channels_to_local(0, r));
  if (nnodes() > 1) per_peer = std::min(per_peer, p2p_channels_to_network(0));
  per_peer = pow2_up(per_peer);
  if (nnodes() > 1 && env_.channels_per_net_peer == 0) {
    // Across nodes NCCL fits every peer into one round of channels, unless told a peer's share.
    const int groups = (n + kMaxP2pTasksPerBatch - 1) / kMaxP2pTasksPerBatch;
    while (per_peer * groups > p2p_channels_ && per_peer > 1) per_peer /= 2;
  } else {
    per_peer = std::min(per_peer, p2p_channels_);
  }
  p2p_per_peer_ = per_peer;
  size_t fewest_local = n;
  for (const auto& ranks : node_ranks_) fewest_local = std::min(fewest_local, ranks.size());
  p2p_remote_peers_ = n - static_cast<int>(fewest_local);
  p2p_min_channels_ = per_peer;
  while (p2p_min_channels_ * n > p2p_channels_ && p2p_min_channels_ > 1) p2p_min_channels_ /= 2;
  // Across nodes every p2p uses the network's chunk (twice it on Grace Blackwell, whose nodes
  // have four GPUs); on one node NVLink's, or PCIe's where some pair has no NVLink.
  auto set_or = [](int64_t set, double fallback) { return set > 0 ? static_cast<double>(set) : fallback; };
  double chunk = nnodes() > 1 ? set_or(env_.p2p_net_chunksize, kP2pNetChunk) * (arm_host_ && min_cc_ >= 100 ? 2 : 1)
                 : nvl_intra_ ? set_or(env_.p2p_nvl_chunksize, kP2pNvlChunk)
                              : set_or(env_.p2p_pci_chunksize, kP2pPciChunk);
  p2p_chunk_ = std::min(chunk, simple_step());
}

// NCCL's split of one Send or Recv of `bytes`: at least a minimum part per channel, its fewest
// channels, doubled while parts stay over the most a part may hold.
int CommModel::p2p_op_channels(uint64_t bytes) const {
  if (bytes == 0) return 1;
  const bool multi = nnodes() > 1;
  const double min_part = multi ? p2p_chunk_ / 2 : p2p_chunk_ / 8;
  const double max_part = multi ? p2p_chunk_ : p2p_chunk_ * 32;
  int nc = static_cast<int>(std::min<double>(p2p_min_channels_, std::ceil(bytes / min_part)));
  double part = std::max(min_part, std::ceil(static_cast<double>(bytes) / nc));
  while (part > max_part && nc <= p2p_per_peer_ / 2) {
    nc *= 2;
    part = std::ceil(static_cast<double>(bytes) / nc);
  }
  return nc;
}

// What one p2p channel copies each way on the communicator's slowest GPU: its block's copy, shared
// between the send and the receive when it carries both, and over the network no more than the
// rate NCCL sizes a peer's network channels by.
double CommModel::p2p_channel_gbs(bool both_ways, bool network) const {
  const double gbs = channel_copy_gbs(both_ways);
  return network ? std::min(gbs, kP2pPerChannelNetGBs) : gbs;
}

// The channels a p2p pattern's bytes run on at one rank, and the least time they take to copy
// them: each of nccl-tests' sendrecv ranks (CollType::kSend) sends one message and receives one
// on the same channels; AlltoAll sends and receives a share per peer, its channels shared once
// they outnumber the communicator's; a Gather's root only receives and a Scatter's only sends, at
// a channel's whole rate; a lone Send (`lone`, across the network when `remote`) has its
// message's channels to itself. Patterns are timed at the rank with the most peers on other
// nodes.
CommModel::P2pCopy CommModel::p2p_copy(wire::CollType coll, uint64_t bytes, bool lone, bool remote,
                                       bool lone_both_ways) const {
  using wire::CollType;
  const int n = nranks();
  const bool one_message = lone || coll == CollType::kSend;
  const uint64_t share = one_message ? bytes : bytes / std::max(1, n);
  const int peers = one_message ? 1 : n - 1;
  // The ring of sends leaves every node once; other patterns reach all of a rank's remote peers.
  const int remote_peers = lone ? remote : one_message ? nnodes() > 1 : p2p_remote_peers_;
  const bool both_ways = lone ? lone_both_ways : coll == CollType::kSend || coll == CollType::kAlltoAll;
  const bool copies = one_message || coll == CollType::kAlltoAll || coll == CollType::kGather ||
                      coll == CollType::kScatter;  // a Recv's time is its Send's
  const int op_channels = p2p_op_channels(share);
  P2pCopy out;
  out.channels = std::min(p2p_channels_, peers * op_channels);
  if (!copies) return out;
  const double local_gbs = p2p_channel_gbs(both_ways, false);
  const double net_gbs = p2p_channel_gbs(both_ways, true);
  // The channels copy their peers' shares side by side, and no share outruns its own channels.
  const double all_shares = share * ((peers - remote_peers) / local_gbs + remote_peers / net_gbs);
  const double slowest_share = share / (op_channels * (remote_peers > 0 ? net_gbs : local_gbs));
  out.us = std::max(all_shares / out.channels, slowest_share) / 1e3;
  return out;
}

}  // namespace fakegpu::planner
