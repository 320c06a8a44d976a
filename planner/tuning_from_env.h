// The NCCL_* tuning settings of a job, for the cost model: this process's environment, else the
// cluster's nccl_conf (what its nodes give every job, as /etc/nccl.conf does). Kept out of the
// planner library, which reads no environment: the coordinator and fakegpu-model call it.
#pragma once

#include <vector>

#include "cluster_config.h"
#include "nccl_tuning.h"

namespace fakegpu::planner {

// Throws env::SettingError naming the variable when the environment's value is malformed, and
// ConfigError naming the file, line and key when the cluster's is.
TuningEnv tuning_from_env(const std::vector<NcclSetting>& cluster_conf = {});
// The same for a cluster: its nccl_conf, and the NCCL release its jobs run (FAKEGPU_NCCL_VERSION,
// else cluster.nccl_version, else the newest modeled).
TuningEnv tuning_from_env(const ClusterConfig& cluster);

}  // namespace fakegpu::planner
