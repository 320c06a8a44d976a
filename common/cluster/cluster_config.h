// The cluster YAML: which ranks live on which node with which GPUs, and the fabric between
// them. Units: bandwidth_gbps is Gbit/s (as network gear is rated), latency_us microseconds.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_profiles.h"
#include "topo_xml.h"

namespace fakegpu {

// Message reads "FILE:LINE:COLUMN: KEY: what is wrong".
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One network adapter: its line rate and the local GPUs it serves (its rail).
struct NicConfig {
  double bandwidth_gbps = 0;
  std::vector<int> gpus;  // local GPU indices on the node
};

struct NodeConfig {
  std::string id;
  std::string host;
  // How fast its CPUs run eager PyTorch against the server the kernel model's host costs were
  // measured on (planner/kernel_rates.cpp): 2 halves every host cost.
  double host_speed = 1.0;
  std::vector<int> ranks;                // global ranks placed on this node, in local order
  std::vector<const GpuProfile*> gpus;   // one per rank
  std::vector<NicConfig> nics;           // empty: derived from fabric.inter_node (or topology)
  // nodes[].topology_xml: the node's NCCL topology XML, parsed here so that loading a config
  // validates it (the cost model only reads the result). Nodes naming the same file share
  // one parse. Empty path and null topology without the key.
  std::string topology_xml;                 // resolved against the YAML file's directory
  std::shared_ptr<const NodeXml> topology;
};

struct LinkConfig {
  std::string type;
  double bandwidth_gbps = 0;  // Gbit/s per direction (inter_node: per node, all NICs together)
  double latency_us = 0;
  double oversubscription = 1.0;  // >= 1: how much the fabric is oversubscribed
  std::string topology = "fat_tree";  // inter_node only: fat_tree or rail_optimized
  int nics_per_node = 0;              // inter_node only: 0 means one NIC per GPU
  bool sharp = false;                 // inter_node only: switches reduce in the network (SHARP)
  // inter_node only, 0 / -1 when not given (the type's default then applies, see the planner):
  double efficiency = 0;         // share of the NICs' line rate that transfers reach
  double plugin_latency_us = -1; // what the NCCL net plugin reports as its latency (EFA: 75)
  bool simple_only = false;      // the plugin restricts NCCL to its Simple protocol (EFA on p4d)
};

// One entry of cluster.nccl_conf: an NCCL setting the cluster gives every job, as a node's
// /etc/nccl.conf or a cloud's recommended NCCL profile does. The job's own environment wins.
struct NcclSetting {
  std::string name;   // NCCL_ALGO, NCCL_PROTO, ...: a variable the cost model reads
  std::string value;  // as it would be written in the environment
  std::string where;  // "FILE:LINE:COLUMN", for a message about its value
};

struct ClusterConfig {
  int version = 1;
  std::string name;
  std::string default_backend = "nccl";
  std::vector<NcclSetting> nccl_conf;
  // cluster.nccl_version: the NCCL release the cluster's jobs run, whose rules the cost model
  // follows (the planner checks it); name "nccl_version", empty value when not given.
  NcclSetting nccl_version;
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
// A GPU profile file (cluster-config.md: `version: 1`, `name`, the keys of a gpu_types entry and
// the kernel_rates fgpu calibrate measured): the GPU it describes, registered for the process.
const GpuProfile* load_gpu_profile(const std::string& path);
// A GPU named by a path ending in .yaml or .yml is a GPU profile file, not a profile's name.
bool is_profile_file(const std::string& name);
// A config file's whole text; throws ConfigError naming the file and what it is (`what`).
std::string read_config_file(const std::string& path, const std::string& what);
// source_name is used in error messages in place of a file name.
ClusterConfig parse_cluster_config(const std::string& yaml_text, const std::string& source_name);

}  // namespace fakegpu
