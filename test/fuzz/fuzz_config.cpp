// Fuzz target for the cluster config loader: the input is the text of a cluster YAML. A bad
// config must end in a ConfigError naming where it went wrong; anything else (a crash, a
// sanitizer report, a YAML exception let through) is a bug, and so is a config that loads
// while breaking a promise the loader makes to the coordinator (checked below).
#include <cstdlib>
#include <string>
#include <vector>

#include "cluster_config.h"

namespace {
using namespace fakegpu;

// Stands in for the file name. It sits in configs/topo so that a topology_xml key naming
// dgx-h100-node.xml, as the seed from there does, reaches the topology XML parser.
#ifndef FUZZ_CONFIG_SOURCE
#define FUZZ_CONFIG_SOURCE "fuzz-input.yaml"
#endif

void check(bool promise) {
  if (!promise) std::abort();
}

void check_loaded(const ClusterConfig& cfg) {
  check(!cfg.nodes.empty());
  check(cfg.nodes.size() == 1 || cfg.has_inter_node);
  check(cfg.intra_node.bandwidth_gbps > 0 && cfg.intra_node.latency_us >= 0);
  // Ranks are 0..N-1, each on exactly one node with one GPU.
  std::vector<bool> seen(static_cast<size_t>(cfg.world_size()), false);
  for (const NodeConfig& node : cfg.nodes) {
    check(!node.ranks.empty() && node.gpus.size() == node.ranks.size());
    for (const GpuProfile* gpu : node.gpus) check(gpu != nullptr);
    for (int rank : node.ranks) {
      check(rank >= 0 && static_cast<size_t>(rank) < seen.size() && !seen[static_cast<size_t>(rank)]);
      seen[static_cast<size_t>(rank)] = true;
    }
    for (const NicConfig& nic : node.nics) {
      check(nic.bandwidth_gbps > 0);
      for (int local : nic.gpus) check(local >= 0 && static_cast<size_t>(local) < node.gpus.size());
    }
    check(!node.topology || node.topology->gpus.size() == node.gpus.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    check_loaded(parse_cluster_config(text, FUZZ_CONFIG_SOURCE));
  } catch (const ConfigError&) {
  }
  return 0;
}
