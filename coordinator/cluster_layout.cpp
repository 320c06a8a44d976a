#include "cluster_layout.h"

#include "topology.h"

namespace fakegpu::coord {
namespace {

// A link with the keys the cluster YAML spells it with; optional ones only where set.
nlohmann::json link_json(const LinkConfig& link, bool inter_node) {
  nlohmann::json j = {{"type", link.type},
                      {"bandwidth_gbps", link.bandwidth_gbps},
                      {"latency_us", link.latency_us},
                      {"oversubscription", link.oversubscription}};
  if (!inter_node) return j;
  j["topology"] = link.topology;
  j["sharp"] = link.sharp;
  j["simple_only"] = link.simple_only;
  if (link.efficiency > 0) j["efficiency"] = link.efficiency;
  if (link.plugin_latency_us >= 0) j["plugin_latency_us"] = link.plugin_latency_us;
  return j;
}

}  // namespace

nlohmann::json cluster_layout_json(const ClusterConfig& cluster) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : cluster.nodes) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto* g : n.gpus) gpus.push_back(g->name);
    std::vector<NicConfig> nics = n.nics;
    if (nics.empty() && n.topology_xml.empty() && cluster.has_inter_node)
      nics = planner::fabric_nics(cluster.inter_node, static_cast<int>(n.gpus.size()));
    nlohmann::json nic_list = nlohmann::json::array();
    for (const auto& nic : nics) nic_list.push_back({{"bandwidth_gbps", nic.bandwidth_gbps}, {"gpus", nic.gpus}});
    nodes.push_back({{"id", n.id}, {"host", n.host}, {"ranks", n.ranks}, {"gpus", gpus}, {"nics", nic_list}});
  }
  nlohmann::json conf = nlohmann::json::object();
  for (const auto& s : cluster.nccl_conf) conf[s.name] = s.value;
  nlohmann::json fabric = {{"intra_node", link_json(cluster.intra_node, false)}};
  if (cluster.has_inter_node) fabric["inter_node"] = link_json(cluster.inter_node, true);
  return {{"name", cluster.name},
          {"world_size", cluster.world_size()},
          {"nccl_conf", conf},
          {"nccl_version", cluster.nccl_version.value.empty() ? nlohmann::json() : nlohmann::json(cluster.nccl_version.value)},
          {"nodes", nodes},
          {"fabric", fabric}};
}

}  // namespace fakegpu::coord
