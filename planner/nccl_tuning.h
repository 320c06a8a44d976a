// NCCL's tuning vocabulary and constants (NCCL 2.30's src/graph/tuning.cc and search.cc),
// and the user overrides NCCL reads from the environment. The cost model uses these to pick
// the algorithm and protocol NCCL would pick.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "nccl_release.h"

namespace fakegpu::planner {

// Same order as NCCL, so indexes match its tables and debug output.
enum Algo { kTree = 0, kRing, kCollNetDirect, kCollNetChain, kNvls, kNvlsTree, kPat, kNumAlgos };
enum Proto { kLL = 0, kLL128, kSimple, kNumProtos };
enum Func { kBroadcast = 0, kReduce, kAllGather, kReduceScatter, kAllReduce, kNumFuncs };

const char* algo_name(int algo);
// algo_name, with "P2P" for the point-to-point patterns that have no NCCL algorithm (-1).
const char* algo_label(int algo);
const char* proto_name(int proto);
const char* func_name(int func);

enum Arch { kVolta = 0, kAmpere, kHopper, kBlackwell };
int arch_index(int cc);  // cc = major*10+minor

// Latencies in microseconds, bandwidths in GB/s, indexed as NCCL indexes them.
extern const double kBaseLat[kNumAlgos][kNumProtos];
constexpr int kMaxChannels = 64;  // NCCL's MAXCHANNELS

// kHwShm: GPUs of a node without peer access, whose data meets in host memory (NCCL's SHM
// transport). NCCL's tuner counts such a path as PCI; the modeled time does not.
enum HwClass { kHwNvlink = 0, kHwPci, kHwNet, kHwShm, kNumHwClasses };
// Per-step latencies: NCCL's tuner table, and the one the modeled time takes (kStepLat).
extern const double kHwLat[kNumHwClasses][kNumAlgos][kNumProtos];
extern const double kStepLat[kNumHwClasses][kNumAlgos][kNumProtos];
// kStepLat for GPUs whose SM clock is `clock_mhz` (the slowest GPU of the communicator);
// `b200_on_x86`: data-center Blackwell (compute capability 10.x) beside x86 hosts, not Grace.
struct StepLatencies {
  double at[kNumHwClasses][kNumAlgos][kNumProtos];
};
StepLatencies step_latencies(int clock_mhz, bool b200_on_x86);
// A GPU's SM clock over Hopper's and Blackwell's 1980 MHz, which the per-step and per-channel
// figures are measured at (1 when the clock is not known). What an SM's own loop does scales by it.
double sm_clock_ratio(int clock_mhz);
// Share of the PCIe rate that data moved through host memory reaches (NCCL's SHM transport).
extern const double kShmRateShare;
extern const double kLlMaxBw[4][3];
extern const double kPerChMaxRingLL128Bw[4][3];
extern const double kPerChMaxTreeLL128Bw[4][3];
extern const double kPerChMaxTreeBw[4][3];
extern const double kPerChMaxNvlsTreeBw[4][3];
inline int log2i(uint64_t n) {
  int l = 0;
  while (n > 1) n >>= 1, ++l;
  return l;
}

// Trees fall short of the model at medium sizes: NCCL scales a tree AllReduce's bandwidth by
// a factor indexed by log2(bytes / 64), 64 B to 256 MiB, and (2.30) an NVLS tree's the same
// way on Blackwell with x86 hosts (`blackwell_x86`). 1 elsewhere.
double tree_correction(int func, int algo, int proto, uint64_t bytes, bool blackwell_x86);
// NVLS bandwidth efficiency (NCCL 2.30): share of the NVLink rate that switch reductions reach.
double nvls_efficiency(int cc);

// Per-channel bandwidths the channel search tries, highest first.
struct SpeedList {
  const double* speeds;
  int count;
};
SpeedList search_speeds(int cc, bool inter_node);

class TuningError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The NCCL settings the cost model reads (common/env/env.def's NCCL_ variables for the coordinator).
// The planner reads no environment: its callers fill this in (tuning_from_env.h).
struct TuningEnv {
  // The NCCL release whose rules apply (nccl_release.h): FAKEGPU_NCCL_VERSION, else the cluster's
  // cluster.nccl_version, else the newest modeled.
  int nccl_version = kNewestNcclModeled;
  bool algo_enabled[kNumFuncs][kNumAlgos];
  int proto_enabled[kNumFuncs][kNumProtos];  // 2: LL128 "enabled where NCCL enables it"
  bool algo_forced = false;
  bool proto_forced = false;
  int min_channels = 0;  // 0: not set
  int max_channels = 0;
  // NCCL_MIN_CTAS and NCCL_MAX_CTAS bound the channels as NCCL_MIN/MAX_NCHANNELS do, and NVLS's
  // channels as well; 0: not set.
  int min_ctas = 0;
  int max_ctas = 0;
  int nvls_enable = 2;   // 0 off, 1 on, 2 auto
  bool collnet_enable = false;  // NCCL_COLLNET_ENABLE: CollNet (and NVLS across nodes) on a SHARP network
  // Bytes; 0: NCCL's default. NCCL_BUFFSIZE sets the Simple protocol's buffer, whose eighth is a
  // step; NCCL_NVLS_CHUNKSIZE and NCCL_NVLSTREE_MAX_CHUNKSIZE the NVLS algorithms' chunks.
  int64_t buffsize = 0;
  int64_t ll_buffsize = 0;     // NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE: the device memory of connections
  int64_t ll128_buffsize = 0;
  bool runtime_connect = true;  // NCCL_RUNTIME_CONNECT: connect each algorithm at its first use, not at init
  int64_t nvls_chunksize = 0;
  int64_t nvls_tree_max_chunksize = 0;
  // Point-to-point: NCCL_P2P_{NVL,NET,PCI}_CHUNKSIZE (bytes), NCCL_MAX_P2P_NCHANNELS,
  // NCCL_MIN_P2P_NCHANNELS, NCCL_NCHANNELS_PER_NET_PEER, NCCL_P2P_PER_CHANNEL_NET_BW (GB/s);
  // 0: NCCL's default.
  int64_t p2p_nvl_chunksize = 0;
  int64_t p2p_net_chunksize = 0;
  int64_t p2p_pci_chunksize = 0;
  int max_p2p_channels = 0;
  int min_p2p_channels = 0;
  int channels_per_net_peer = 0;
  int p2p_per_channel_net_bw = 0;

  TuningEnv();
  // Parses NCCL's list grammar ("ring,tree", "^LL128", "allreduce:tree;broadcast:ring").
  // Throws TuningError naming the variable and the bad token.
  void set_algo(const std::string& value);
  void set_proto(const std::string& value);
};

}  // namespace fakegpu::planner
