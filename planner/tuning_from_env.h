// The NCCL_* tuning overrides of this process's environment, for the cost model. Kept out of
// the planner library, which reads no environment: the coordinator and fakegpu-model call it.
#pragma once

#include "nccl_tuning.h"

namespace fakegpu::planner {

// Throws env::SettingError naming the variable when one is malformed.
TuningEnv tuning_from_env();

}  // namespace fakegpu::planner
