// The cluster YAML: which ranks live on which node with which GPUs, and the fabric between
// them. Units: bandwidth_gbps is Gbit/s (as network gear is rated), latency_us microseconds.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_profiles.h"

namespace fakegpu {

// Message reads "FILE:LINE:COLUMN: KEY: what is wrong".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct NodeConfig {
  std::string id;
  std::string host;
  std::vector<int> ranks;                // global ranks placed on this node, in local order
  std::vector<const GpuProfile*> gpus;   // one per rank
};

struct LinkConfig {
  std::string type;
  double bandwidth_gbps = 0;  // Gbit/s per direction
  double latency_us = 0;
  double oversubscription = 1.0;  // >= 1: how much the fabric is oversubscribed
};

struct ClusterConfig {
  int version = 1;
  std::string name;
  std::string default_backend = "nccl";
  std::vector<NodeConfig> nodes;
  LinkConfig intra_node;
  LinkConfig inter_node;
  bool has_inter_node = false;
  std::string source;  // file it came from, for messages

  int world_size() const;
  // Index into nodes of the node holding a global rank; -1 if none.
  int node_of_rank(int rank) const;
};

ClusterConfig load_cluster_config(const std::string& path);
// source_name is used in error messages in place of a file name.
ClusterConfig parse_cluster_config(const std::string& yaml_text, const std::string& source_name);

}  // namespace fakegpu
