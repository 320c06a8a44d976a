#include "topology.h"

#include <algorithm>
#include <cstdio>

namespace fakegpu::planner {
namespace {

// Share of a NIC's line rate that collectives reach, unless the YAML says (efficiency).
// InfiniBand reaches about 95% of line rate in public NCCL runs (NDR: 46-48 of 50 GB/s); RoCE
// loses a little more to congestion control, and so do AWS's EFA (SRD; 2 x p4de reach 84% of
// the node's 4 x 100 Gbit/s in a tree) and Google's TCPXO (2 x A3 Mega: 90% of 8 x 200 Gbit/s);
// plain Ethernet goes through NCCL's socket transport and the kernel stack.
double transport_efficiency(const LinkConfig& net) {
  if (net.efficiency > 0) return net.efficiency;
  if (net.type == "infiniband") return 0.95;
  if (net.type == "roce" || net.type == "efa" || net.type == "tcpxo") return 0.90;
  return 0.70;
}

// The latency the NCCL net plugin reports, which NCCL's tuner adds to every network step
// (twice for Simple), unless the YAML says (plugin_latency_us). AWS's plugin reports 75 us on
// p4d/p5 (35 us on p5en and later); NCCL's InfiniBand and socket transports and Google's
// plugins report 0.
double plugin_latency(const LinkConfig& net) {
  if (net.plugin_latency_us >= 0) return net.plugin_latency_us;
  return net.type == "efa" ? 75.0 : 0.0;
}

IntraFabric intra_fabric(const std::string& type) {
  if (type == "nvswitch") return IntraFabric::kNvSwitch;
  if (type == "nvlink") return IntraFabric::kNvLinkMesh;
  if (type == "nvlink_bridge") return IntraFabric::kNvLinkBridge;
  return IntraFabric::kPcie;
}

// The XML's NICs at their line rate, each with the rail GPUs among the first `used` GPUs.
std::vector<NicConfig> xml_nics(const NodeXml& xml, size_t used) {
  std::vector<NicConfig> nics;
  for (const XmlNic& x : xml.nics) {
    NicConfig nic;
    nic.bandwidth_gbps = x.gbytes * 8.0;
    for (int g : x.gpus)
      if (g < static_cast<int>(used)) nic.gpus.push_back(g);
    nics.push_back(nic);
  }
  return nics;
}

// NICs that serve the same GPUs work as one at their summed rate: AWS's EFA plugin presents a
// GPU's four EFA devices as one (a p5 node's 32 x 100 Gbit/s act as 8 x 400), and NCCL spreads
// a GPU's channels over the NICs beside it (NCCL_NETDEVS_POLICY, 2.28). NICs serving no GPU are
// kept as they are.
std::vector<NicConfig> fuse_rail_nics(const std::vector<NicConfig>& nics) {
  std::vector<NicConfig> fused;
  for (const NicConfig& nic : nics) {
    auto same_rail = std::find_if(fused.begin(), fused.end(), [&](const NicConfig& f) { return !nic.gpus.empty() && f.gpus == nic.gpus; });
    if (same_rail == fused.end())
      fused.push_back(nic);
    else
      same_rail->bandwidth_gbps += nic.bandwidth_gbps;
  }
  return fused;
}


}  // namespace

std::vector<NicConfig> fabric_nics(const LinkConfig& net, int gpus) {
  const int count = net.nics_per_node > 0 ? net.nics_per_node : gpus;
  const int per = std::max(1, (gpus + count - 1) / count);
  std::vector<NicConfig> nics(count);
  for (int i = 0; i < count; ++i) {
    nics[i].bandwidth_gbps = net.bandwidth_gbps / count;
    if (count > gpus) {
      nics[i].gpus.push_back(static_cast<int>(static_cast<long long>(i) * gpus / count));
    } else {
      for (int l = i * per; l < std::min(gpus, (i + 1) * per); ++l) nics[i].gpus.push_back(l);
    }
  }
  return nics;
}

bool Topology::nvlink_between(int a, int b) const {
  const Gpu& x = gpus[a];
  const Gpu& y = gpus[b];
  if (x.node != y.node) return false;
  switch (nodes[x.node].fabric) {
    case IntraFabric::kPcie: return false;
    case IntraFabric::kNvLinkBridge: return x.local / 2 == y.local / 2;
    default: return true;
  }
}

PathType Topology::path_type(int a, int b) const {
  if (a == b) return PathType::kLoc;
  const Gpu& x = gpus[a];
  const Gpu& y = gpus[b];
  if (x.node != y.node) return PathType::kNet;
  if (nvlink_between(a, b)) return PathType::kNvl;
  // GPUs that cannot do peer access over PCIe (consumer parts) meet in host memory.
  if (!x.profile->p2p || !y.profile->p2p) return PathType::kSys;
  const auto& paths = nodes[x.node].gpu_paths;
  if (x.local < static_cast<int>(paths.size()) && y.local < static_cast<int>(paths[x.local].size())) {
    PathType p = paths[x.local][y.local];
    if (p != PathType::kNvl) return p;  // the XML saw NVLink where the fabric does not: PCIe, unknown tree
  }
  return PathType::kPhb;
}

double nccl_nvlink_bw(int cc) {
  if (cc >= 100) return 40.1;
  if (cc >= 90) return 20.6;
  if (cc == 86) return 12.0;
  if (cc >= 70) return 20.0;
  if (cc >= 60) return 18.0;
  return 20.0;
}

double nvlink_line_rate(int cc) {
  if (cc >= 100) return 50.0;     // NVLink 5
  if (cc == 86) return 14.0625;   // the NVLink 3 bridges of SM86 boards: 4 links, 112.5 GB/s both ways
  if (cc >= 70) return 25.0;      // NVLink 2 to 4
  return 20.0;                    // NVLink 1
}

double nccl_pcie_bw(int gen) {
  // NCCL credits an x16 link with width * speed / 80: Gen3 12, Gen4 24, Gen5 48 GB/s.
  if (gen <= 3) return 12.0;
  return 12.0 * (1 << (gen - 3));
}

Topology Topology::from_config(const ClusterConfig& config) {
  Topology topo;
  topo.gpus.resize(config.world_size());
  const double intra_cap = config.intra_node.bandwidth_gbps / 8.0;  // rated, per GPU
  for (size_t n = 0; n < config.nodes.size(); ++n) {
    const NodeConfig& nc = config.nodes[n];
    // A node with a topology XML takes its fabric, NVLinks, PCIe and NICs from it rather
    // than from the profiles and fabric.intra_node.type; the rated cap still applies.
    const NodeXml* xml = nc.topology.get();
    if (xml && xml->gpus.size() < nc.ranks.size())
      throw ConfigError(nc.topology_xml + ": describes " + std::to_string(xml->gpus.size()) + " GPUs but node '" + nc.id +
                        "' uses " + std::to_string(nc.ranks.size()));
    Node node;
    node.id = nc.id;
    if (xml) node.gpu_paths = xml->gpu_gpu;
    node.fabric = intra_fabric(xml ? xml->fabric() : config.intra_node.type);
    for (size_t l = 0; l < nc.ranks.size(); ++l) {
      Gpu& gpu = topo.gpus[nc.ranks[l]];
      gpu.node = static_cast<int>(n);
      gpu.local = static_cast<int>(l);
      gpu.profile = nc.gpus[l];
      gpu.cc = gpu.profile->cc_major * 10 + gpu.profile->cc_minor;
      int nvlinks = xml ? xml->gpus[l].nvlink_count() : gpu.profile->nvlink_links;
      gpu.nvlink_gbs = std::min(nvlinks * nccl_nvlink_bw(gpu.cc), intra_cap);
      // A bridge is rated at its links' signalling rate; NCCL credits each link what it
      // credits any NVLink of that GPU generation.
      if (!xml && node.fabric == IntraFabric::kNvLinkBridge)
        gpu.nvlink_gbs = intra_cap * nccl_nvlink_bw(gpu.cc) / nvlink_line_rate(gpu.cc);
      gpu.pcie_gbs = xml ? xml->gpus[l].pcie_gbs : nccl_pcie_bw(gpu.profile->pcie_gen) * gpu.profile->pcie_width / 16.0;
      if (node.fabric == IntraFabric::kPcie) gpu.pcie_gbs = std::min(gpu.pcie_gbs, intra_cap);
      char bus[32];
      std::snprintf(bus, sizeof bus, "%04x:%02x:00.0", static_cast<unsigned>(n), static_cast<unsigned>(l + 1));
      gpu.bus_id = bus;
      node.gpus.push_back(nc.ranks[l]);
    }
    // A node whose GPUs have no NVLink talks over PCIe whatever the fabric says.
    for (int g : node.gpus)
      if (topo.gpus[g].nvlink_gbs <= 0) node.fabric = IntraFabric::kPcie;

    if (config.has_inter_node) {
      topo.sharp = config.inter_node.sharp;
      topo.net_latency_us = config.inter_node.latency_us;
      topo.plugin_latency_us = plugin_latency(config.inter_node);
      topo.net_simple_only = config.inter_node.simple_only;
      double eff = transport_efficiency(config.inter_node);
      std::vector<NicConfig> nics = xml ? xml_nics(*xml, nc.ranks.size()) : nc.nics;
      if (nics.empty()) nics = fabric_nics(config.inter_node, static_cast<int>(nc.ranks.size()));
      nics = fuse_rail_nics(nics);
      for (size_t i = 0; i < nics.size(); ++i) {
        Nic nic;
        nic.node = static_cast<int>(n);
        nic.local = static_cast<int>(i);
        nic.line_gbytes = nics[i].bandwidth_gbps / 8.0;
        nic.gbytes = nic.line_gbytes * eff;
        if (config.inter_node.topology == "fat_tree") nic.gbytes /= config.inter_node.oversubscription;
        int index = static_cast<int>(topo.nics.size());
        for (int l : nics[i].gpus) {
          nic.gpus.push_back(nc.ranks[l]);
          topo.gpus[nc.ranks[l]].nic = index;
        }
        node.nics.push_back(index);
        topo.nics.push_back(nic);
      }
      // GPUs left off every rail reach the network through the node's first NIC.
      for (int g : node.gpus)
        if (topo.gpus[g].nic < 0 && !node.nics.empty()) topo.gpus[g].nic = node.nics.front();
      if (xml)
        for (size_t l = 0; l < nc.ranks.size(); ++l)
          if (int x = xml->gpus[l].nic; x >= 0) topo.gpus[nc.ranks[l]].nic_path = xml->gpu_nic[l][x];
    }
    topo.nodes.push_back(std::move(node));
  }

  auto label = [&](int gpu) { return topo.nodes[topo.gpus[gpu].node].id + "/gpu" + std::to_string(topo.gpus[gpu].local); };
  for (size_t g = 0; g < topo.gpus.size(); ++g) {
    const Gpu& gpu = topo.gpus[g];
    topo.link_base_.push_back(static_cast<int>(topo.links.size()));
    int id = static_cast<int>(g);
    topo.links.push_back({LinkKind::kNvlTx, id, gpu.nvlink_gbs, label(id) + " nvlink tx"});
    topo.links.push_back({LinkKind::kNvlRx, id, gpu.nvlink_gbs, label(id) + " nvlink rx"});
    topo.links.push_back({LinkKind::kPcieTx, id, gpu.pcie_gbs, label(id) + " pcie tx"});
    topo.links.push_back({LinkKind::kPcieRx, id, gpu.pcie_gbs, label(id) + " pcie rx"});
  }
  topo.nic_link_base_ = static_cast<int>(topo.links.size());
  for (size_t i = 0; i < topo.nics.size(); ++i) {
    const Nic& nic = topo.nics[i];
    std::string base = topo.nodes[nic.node].id + "/nic" + std::to_string(nic.local);
    topo.links.push_back({LinkKind::kNicTx, static_cast<int>(i), nic.gbytes, base + " tx"});
    topo.links.push_back({LinkKind::kNicRx, static_cast<int>(i), nic.gbytes, base + " rx"});
  }
  return topo;
}

}  // namespace fakegpu::planner
