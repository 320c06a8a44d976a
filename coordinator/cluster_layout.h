// A cluster config as the validating parser read it, in JSON, for fgpu: its nodes and ranks, each
// node's GPUs and NICs (the fabric's layout where the node lists none, as the cost model lays them
// out), its fabric and the NCCL settings and release it gives every job. fgpu places ranks from it
// and builds clusters of any size from a preset's node without parsing YAML itself.
#pragma once

#include <nlohmann/json.hpp>

#include "cluster_config.h"

namespace fakegpu::coord {

nlohmann::json cluster_layout_json(const ClusterConfig& cluster);

}  // namespace fakegpu::coord
