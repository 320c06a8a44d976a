#include "tuning_from_env.h"

#include "env.h"

namespace fakegpu::planner {

TuningEnv tuning_from_env() {
  TuningEnv tuning;
  try {
    if (std::string algo = env::get(env::kNcclAlgo); !algo.empty()) tuning.set_algo(algo);
    if (std::string proto = env::get(env::kNcclProto); !proto.empty()) tuning.set_proto(proto);
  } catch (const TuningError& e) {
    throw env::SettingError(e.what());  // a malformed setting, like any other
  }
  tuning.min_channels = static_cast<int>(env::get(env::kNcclMinChannels));
  tuning.max_channels = static_cast<int>(env::get(env::kNcclMaxChannels));
  tuning.nvls_enable = static_cast<int>(env::get(env::kNcclNvlsEnable));
  tuning.collnet_enable = env::get(env::kNcclCollnetEnable);
  return tuning;
}

}  // namespace fakegpu::planner
