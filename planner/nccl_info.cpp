#include "nccl_info.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace fakegpu::planner {
namespace {

constexpr size_t kMaxLine = 127;  // NCCL cuts a ring dump at its buffer size

int pow2_up(int v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, pattern, args...);
  return buf;
}

// The ranks of `rank`'s node in the order ring c visits them.
std::vector<int> node_segment(const CommModel& model, int c, int node) {
  std::vector<int> out;
  for (int r : model.rings()[c])
    if (model.node_of(r) == node) out.push_back(r);
  return out;
}

// NCCL's local index of the NIC a GPU reaches the network through, -1 without one.
int nic_dev(const CommModel& model, int rank) {
  const Topology& topo = model.topology();
  int nic = topo.gpus[model.gpu_of(rank)].nic;
  return nic < 0 ? -1 : topo.nics[nic].local;
}

}  // namespace

RankPlace rank_place(const CommModel& model, int rank) {
  RankPlace p;
  p.nnodes = model.nnodes();
  const auto& mine = model.node_ranks(model.node_of(rank));
  p.local_ranks = static_cast<int>(mine.size());
  p.local_rank = static_cast<int>(std::find(mine.begin(), mine.end(), rank) - mine.begin());
  return p;
}

int p2p_channels(const CommModel& model) { return pow2_up(std::min(model.channels(), model.rules().max_channels)); }

// NCCL gives a peer two channels per NVLink's worth of bandwidth on the path to it, two on
// PCIe, and two per NIC (fewer on large communicators) across the network; the communicator
// takes the smallest over its peers, rounded up to a power of two.
int p2p_channels_per_peer(const CommModel& model) {
  const Topology& topo = model.topology();
  const int total = p2p_channels(model);
  int fewest = total;
  for (int r = 0; r < model.nranks(); ++r) {
    const Gpu& g = topo.gpus[model.gpu_of(r)];
    const Node& node = topo.nodes[g.node];
    int local = 2;
    if (model.nvlink_inside_nodes() && g.nvlink_gbs > 0) {
      double path = node.fabric == IntraFabric::kNvSwitch ? g.nvlink_gbs : g.nvlink_gbs / std::max<size_t>(1, node.gpus.size() - 1);
      local = 2 * std::max(1, static_cast<int>(path / nccl_nvlink_bw(g.cc)));
    }
    if (model.node_ranks(model.node_of(r)).size() > 1) fewest = std::min(fewest, local);
  }
  if (model.nnodes() > 1) {
    int net = 2;
    while (net * model.nranks() > total * 4 && net > 1) net /= 2;
    fewest = std::min(fewest, net);
  }
  return std::min(pow2_up(fewest), total);
}

std::vector<wire::InfoLine> init_info_lines(const CommModel& model, int rank) {
  std::vector<wire::InfoLine> lines;
  const int n = model.nranks();
  const auto& rings = model.rings();
  if (rank == 0) {
    const int width = static_cast<int>(std::to_string(std::max(0, n - 1)).size());
    for (size_t c = 0; c < rings.size(); ++c) {
      std::vector<int> order(rings[c]);
      std::rotate(order.begin(), std::find(order.begin(), order.end(), 0), order.end());
      std::string line = format("Channel %02d/%02d :", static_cast<int>(c), static_cast<int>(rings.size()));
      for (int r : order) line += format(" %*d", width, r);
      if (line.size() > kMaxLine) line = line.substr(0, kMaxLine - 3) + "...";
      lines.push_back({wire::kSubsysInit, line});
    }
  }
  std::string trees = "Trees";
  for (size_t c = 0; c < rings.size(); ++c) {
    const auto& ring = rings[c];
    int at = static_cast<int>(std::find(ring.begin(), ring.end(), rank) - ring.begin());
    lines.push_back({wire::kSubsysGraph, format("Ring %02d : %d -> %d -> %d", static_cast<int>(c), ring[(at + n - 1) % n], rank,
                                       ring[(at + 1) % n])});
    const TreeNode& t = model.trees()[c][rank];
    int down[3] = {-1, -1, -1};
    for (size_t i = 0; i < t.children.size() && i < 3; ++i) down[i] = t.children[i];
    trees += format(" [%d] %d/%d/%d->%d->%d", static_cast<int>(c), down[0], down[1], down[2], rank, t.parent);
  }
  lines.push_back({wire::kSubsysInit, trees});
  // NCCL prints the communicator's channel count for CollNet too.
  lines.push_back({wire::kSubsysInit, format("%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, "
                                             "%d p2p channels per peer",
                                             model.channels(), model.channels(), model.nvls_channels(),
                                             p2p_channels(model), p2p_channels_per_peer(model))});
  return lines;
}

std::string graph_xml(const CommModel& model, int rank) {
  const int node = model.node_of(rank);
  const bool net = model.nnodes() > 1;
  const Topology& topo = model.topology();
  const bool nvl = model.nvlink_inside_nodes();
  // NCCL's graph ids and patterns: ring 4, balanced tree 1, CollNet direct 6 and chain 3, NVLS 5.
  struct Entry {
    int algo, pattern;
  };
  const Entry entries[] = {{kRing, 4}, {kTree, 1}, {kCollNetDirect, 6}, {kCollNetChain, 3}, {kNvls, 5}};
  std::string xml = "<graphs version=\"1\">\n";
  for (int id = 0; id < 5; ++id) {
    const Graph& g = model.graph(entries[id].algo);
    const int nc = std::min<int>(g.channels, static_cast<int>(model.rings().size()));
    xml += format("  <graph id=\"%d\" pattern=\"%d\" crossnic=\"0\" nchannels=\"%d\" speedintra=\"%g\" speedinter=\"%g\" "
               "latencyinter=\"0\" typeintra=\"%s\" typeinter=\"%s\" samechannels=\"%d\">\n",
               id, entries[id].pattern, nc, g.bw_intra, g.bw_inter, nvl ? "NVL" : "PIX", net ? "PIX" : "LOC",
               entries[id].algo == kNvls ? 0 : 1);
    for (int c = 0; c < nc; ++c) {
      std::vector<int> seg = node_segment(model, c, node);
      xml += "    <channel>\n";
      if (net) xml += format("      <net dev=\"%d\"/>\n", nic_dev(model, seg.front()));
      for (int r : seg) {
        xml += format("      <gpu dev=\"%d\"/>\n", topo.gpus[model.gpu_of(r)].local);
        if (entries[id].algo == kNvls) break;  // NVLS channels name their head GPU only
      }
      if (net) xml += format("      <net dev=\"%d\"/>\n", nic_dev(model, seg.back()));
      xml += "    </channel>\n";
    }
    xml += "  </graph>\n";
  }
  return xml + "</graphs>\n";
}

}  // namespace fakegpu::planner
