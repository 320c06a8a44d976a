#include "nccl_rules.h"

#include <algorithm>
#include <cstring>

namespace fakegpu::planner {
namespace {

template <size_t N>
SpeedList list(const double (&a)[N]) {
  return {a, static_cast<int>(N)};
}

// The channel search's speed lists (GB/s) as each release had them; the newest are in
// nccl_tuning.cpp. Hopper's gained 50 and 22 in 2.19 and 11 in 2.21; Blackwell's own lists came in
// 2.25 (Hopper's before), gaining 18 and 96 in 2.27, 45 and 80 in 2.29 and 86 in 2.30.
const double kSm90Intra218[] = {60, 40, 30, 24, 20, 15, 12, 6, 3};
const double kSm90Intra219[] = {60, 50, 40, 30, 24, 20, 15, 12, 6, 3};
const double kSm90Inter218[] = {48, 45, 42, 40, 30, 24, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const double kSm100Intra225[] = {90, 80, 70, 60, 50, 40, 30, 24, 20, 19};
const double kSm100Intra227[] = {90, 80, 70, 60, 50, 40, 30, 24, 20, 19, 18};
const double kSm100Inter227[] = {96, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const double kSm100Inter229[] = {96, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};

template <typename T, size_t N>
void set3(T (&row)[N], T a, T b, T c) {
  static_assert(N == 3);
  row[0] = a, row[1] = b, row[2] = c;
}

}  // namespace

int NcclRules::arch(int cc) const {
  const int a = arch_index(cc);
  return a == kBlackwell && !blackwell_index ? kHopper : a;
}

int NcclRules::nvls_channels(int cc, bool inter_node) const {
  if (cc < 100 || version < 22500) return 16;
  if (version < 22700) return 32;
  return inter_node ? 32 : 24;
}

SpeedList NcclRules::search_speeds(int cc, bool inter_node) const {
  if (cc >= 100 && version >= 22500) {
    if (version >= 23000) return planner::search_speeds(cc, inter_node);
    if (inter_node) return version >= 22900 ? list(kSm100Inter229) : version >= 22700 ? list(kSm100Inter227)
                                                                                     : planner::search_speeds(90, true);
    if (version >= 22900) return planner::search_speeds(cc, false);
    return version >= 22700 ? list(kSm100Intra227) : list(kSm100Intra225);
  }
  if (cc < 90) return planner::search_speeds(cc, inter_node);
  if (inter_node) return version >= 21900 ? planner::search_speeds(90, true) : list(kSm90Inter218);
  if (version >= 22100) return planner::search_speeds(90, false);
  return version >= 21900 ? list(kSm90Intra219) : list(kSm90Intra218);
}

bool NcclRules::ll128_default(int cc) const {
  switch (ll128) {
    case Ll128Rule::kVoltaAmpereHopper: return cc == 70 || cc == 80 || cc == 90;
    case Ll128Rule::kAndBlackwell: return cc == 70 || cc == 80 || cc == 90 || cc == 100 || cc == 120;
    case Ll128Rule::kAnySm70: return cc >= 70;
  }
  return false;
}

NcclRules nccl_rules(int version) {
  NcclRules r;
  r.version = nearest_nccl_modeled(version);
  const int v = r.version;
  std::memcpy(r.base_lat, kBaseLat, sizeof r.base_lat);
  std::memcpy(r.hw_lat, kHwLat, sizeof r.hw_lat);
  std::memcpy(r.ll_max_bw, kLlMaxBw, sizeof r.ll_max_bw);
  std::memcpy(r.ring_ll128_bw, kPerChMaxRingLL128Bw, sizeof r.ring_ll128_bw);
  std::memcpy(r.tree_ll128_bw, kPerChMaxTreeLL128Bw, sizeof r.tree_ll128_bw);
  std::memcpy(r.tree_bw, kPerChMaxTreeBw, sizeof r.tree_bw);
  std::memcpy(r.nvls_tree_bw, kPerChMaxNvlsTreeBw, sizeof r.nvls_tree_bw);

  // Newest first: each step undoes what its release changed.
  if (v < 23000) {
    r.nvls_tree_bw[kBlackwell][2] = 43.8;  // 2.30 raised Blackwell's NVLS tree cap from 3 nodes
    r.nvls_sm100_node_tuning = false;
  }
  if (v < 22900) {
    set3(r.ring_ll128_bw[kBlackwell], 73.4, 34.6, 73.4);
    r.nvls_tree_corrected = false;
  }
  if (v < 22800) {
    // 2.28: NVLS rated by the switch's efficiency; Blackwell's caps retuned; NVLS tree's network
    // steps 20.9 us (14 before).
    r.nvls_rule = NvlsTunerRule::kGatherShare;
    r.hw_lat[kHwNet][kNvlsTree][kSimple] = 14;
    r.nvls_min_gpus = 3;
    set3(r.ring_ll128_bw[kBlackwell], 73.4, 73.4, 73.4);
    set3(r.tree_ll128_bw[kBlackwell], 73.4, 73.4, 58.0);
    set3(r.tree_bw[kBlackwell], 77.4, 82.8, 72.0);
  }
  if (v < 22700) {
    r.nvls_rule = NvlsTunerRule::kMinIntraInter;
    r.ll128 = Ll128Rule::kAndBlackwell;
  }
  if (v < 22500) {
    r.blackwell_index = false;
    r.max_channels = 32;
    r.ll128 = Ll128Rule::kVoltaAmpereHopper;
  }
  if (v < 22400) r.pat_share = 0.85;
  if (v < 22300) {
    // 2.23: PAT; trees' Simple latency back to a base of 8.4 us and 4/4/14 us a step; the ring's
    // network steps counted right; ring LL128 no slower on nodes of one GPU.
    r.pat = false;
    r.nvls_gather_five_sixths = true;
    r.ring_steps_per_node = true;
    r.ll128_lone_gpu_share = true;
    r.base_lat[kTree][kSimple] = 0;
    for (int hw = 0; hw < kNumHwClasses; ++hw) r.hw_lat[hw][kTree][kSimple] = 28;
  }
  if (v < 22100) {
    // 2.21: ring LL at half the bus bandwidth, Hopper's LL cap raised, NVLS steps 25 us (23 before),
    // up to 32 NVLS heads (8 before).
    r.ring_ll_half = false;
    set3(r.ll_max_bw[kHopper], 87.7, 22.5, 19.0);
    for (int a : {kNvls, kNvlsTree}) r.hw_lat[kHwNvlink][a][kSimple] = 23;
    r.nvls_arity = 8;
  }
  if (v < 22000) r.tree_simple_halving = true;  // 2.20 dropped it: a Simple tree keeps its whole step
  if (v < 21900) {
    // 2.18: no NVLS AllGather/ReduceScatter; NVLS rated as any algorithm, with a fixed 23 us base;
    // the older tree and CollNet latencies.
    r.nvls_gather = false;
    r.nvls_rule = NvlsTunerRule::kGeneric;
    for (int a : {kNvls, kNvlsTree}) {
      r.base_lat[a][kSimple] = 23;
      r.hw_lat[kHwNvlink][a][kSimple] = 0;
    }
    r.hw_lat[kHwNet][kNvlsTree][kSimple] = 19;
    r.nvls_tree_linear = true;
    r.collnet_arity_lat = 0.5;
    for (int a : {kCollNetDirect, kCollNetChain}) set3(r.base_lat[a], 6.8, 14.0, 0.0);
    const double tree_simple[] = {4.0, 6.0, 14.0}, direct[] = {8.0, 8.0, 10.7}, chain[] = {4.75, 8.0, 14.0};
    for (int hw : {kHwNvlink, kHwPci, kHwNet}) {
      r.hw_lat[hw][kTree][kSimple] = tree_simple[hw];
      r.hw_lat[hw][kCollNetDirect][kSimple] = direct[hw];
      r.hw_lat[hw][kCollNetChain][kSimple] = chain[hw];
    }
  }
  // A path through host memory is PCI to NCCL's tuner.
  std::memcpy(r.hw_lat[kHwShm], r.hw_lat[kHwPci], sizeof r.hw_lat[kHwShm]);
  return r;
}

const NcclRules& newest_nccl_rules() {
  static const NcclRules newest = nccl_rules(kNewestNcclModeled);
  return newest;
}

}  // namespace fakegpu::planner
