#include "tuning_from_env.h"

#include "env.h"

namespace fakegpu::planner {
namespace {

// The cluster's entry for a variable the environment leaves unset, else null.
const NcclSetting* from_cluster(env::Id id, const std::vector<NcclSetting>& conf) {
  if (env::is_set(id)) return nullptr;
  for (const NcclSetting& s : conf)
    if (s.name == env::declaration(id).name) return &s;
  return nullptr;
}

[[noreturn]] void bad_entry(const NcclSetting& s, const std::string& what) {
  throw ConfigError(s.where + ": cluster.nccl_conf." + s.name + ": " + what);
}

template <typename T>
T value_of(env::Setting<T> setting, const std::vector<NcclSetting>& conf) {
  const NcclSetting* s = from_cluster(setting.id, conf);
  if (!s) return env::get(setting);
  try {
    return std::get<T>(env::parse(env::declaration(setting.id), s->value.c_str()).value());
  } catch (const env::SettingError& e) {
    bad_entry(*s, e.what());
  }
}

// NCCL_ALGO and NCCL_PROTO: NCCL's list grammar, which TuningEnv parses.
void apply_list(TuningEnv& tuning, env::Setting<std::string> setting, void (TuningEnv::*set)(const std::string&),
                const std::vector<NcclSetting>& conf) {
  const NcclSetting* s = from_cluster(setting.id, conf);
  const std::string text = s ? s->value : env::get(setting);
  if (text.empty()) return;
  try {
    (tuning.*set)(text);
  } catch (const TuningError& e) {
    if (s) bad_entry(*s, e.what());
    throw env::SettingError(e.what());  // a malformed setting, like any other
  }
}

}  // namespace

TuningEnv tuning_from_env(const std::vector<NcclSetting>& conf) {
  TuningEnv tuning;
  apply_list(tuning, env::kNcclAlgo, &TuningEnv::set_algo, conf);
  apply_list(tuning, env::kNcclProto, &TuningEnv::set_proto, conf);
  tuning.min_channels = static_cast<int>(value_of(env::kNcclMinChannels, conf));
  tuning.max_channels = static_cast<int>(value_of(env::kNcclMaxChannels, conf));
  tuning.min_ctas = static_cast<int>(value_of(env::kNcclMinCtas, conf));
  tuning.max_ctas = static_cast<int>(value_of(env::kNcclMaxCtas, conf));
  tuning.nvls_enable = static_cast<int>(value_of(env::kNcclNvlsEnable, conf));
  tuning.collnet_enable = value_of(env::kNcclCollnetEnable, conf);
  tuning.buffsize = value_of(env::kNcclBuffsize, conf);
  tuning.ll_buffsize = value_of(env::kNcclLlBuffsize, conf);
  tuning.ll128_buffsize = value_of(env::kNcclLl128Buffsize, conf);
  tuning.runtime_connect = value_of(env::kNcclRuntimeConnect, conf);
  tuning.nvls_chunksize = value_of(env::kNcclNvlsChunksize, conf);
  tuning.nvls_tree_max_chunksize = value_of(env::kNcclNvlsTreeMaxChunksize, conf);
  tuning.p2p_nvl_chunksize = value_of(env::kNcclP2pNvlChunksize, conf);
  tuning.p2p_net_chunksize = value_of(env::kNcclP2pNetChunksize, conf);
  tuning.p2p_pci_chunksize = value_of(env::kNcclP2pPciChunksize, conf);
  tuning.max_p2p_channels = static_cast<int>(value_of(env::kNcclMaxP2pChannels, conf));
  tuning.min_p2p_channels = static_cast<int>(value_of(env::kNcclMinP2pChannels, conf));
  tuning.channels_per_net_peer = static_cast<int>(value_of(env::kNcclNchannelsPerNetPeer, conf));
  tuning.p2p_per_channel_net_bw = static_cast<int>(value_of(env::kNcclP2pPerChannelNetBw, conf));
  return tuning;
}

TuningEnv tuning_from_env(const ClusterConfig& cluster) {
  TuningEnv tuning = tuning_from_env(cluster.nccl_conf);
  const std::string given = env::get(env::kNcclVersion);
  try {
    if (!given.empty()) tuning.nccl_version = parse_nccl_version(given, "FAKEGPU_NCCL_VERSION");
  } catch (const TuningError& e) {
    throw env::SettingError(e.what());
  }
  const NcclSetting& v = cluster.nccl_version;
  try {
    if (given.empty() && !v.value.empty()) tuning.nccl_version = parse_nccl_version(v.value, "cluster.nccl_version");
  } catch (const TuningError& e) {
    throw ConfigError(v.where + ": " + e.what());
  }
  return tuning;
}

}  // namespace fakegpu::planner
