// What one NCCL release does its own way, for the cost model: the tuner's tables and formulas
// (which pick the algorithm and protocol), the algorithms it has, and how many channels it builds.
// The newest release's values are nccl_tuning.h's tables; each older release is the newest with
// the changes since undone, one by one, as NCCL's history made them (NVIDIA/nccl's
// src/graph/tuning.cc, search.cc, connect.cc and enqueue.cc at each release tag).
//
// The tuner's figures steer the choice only. The modeled time keeps the links' physics and the
// measured per-step latencies of every release; what a release changes in the time is what it
// builds: its channels, NVLS heads and protocols enabled.
#pragma once

#include "nccl_tuning.h"

namespace fakegpu::planner {

// How a release's tuner rates NVLS (and NVLS trees).
enum class NvlsTunerRule {
  kGeneric,         // 2.18: the algorithm's graph speed, as any other
  kMinIntraInter,   // 2.19: the slower of the graph's NVLink and network speeds, at 5/6 of it
  kGatherShare,     // 2.27: as 2.19, but AllGather/ReduceScatter at (ppn-1)/ppn and 0.9 of the network
  kEfficiency,      // 2.28: the switch's efficiency, less one channel, twice for AllReduce
};

// Which GPUs get LL128 where NCCL_PROTO leaves it to NCCL.
enum class Ll128Rule {
  kVoltaAmpereHopper,  // up to 2.24: compute capability 7.0, 8.0 and 9.0 exactly
  kAndBlackwell,       // 2.25: and 10.0 and 12.0
  kAnySm70,            // 2.27: every GPU from 7.0 on
};

struct NcclRules {
  int version = kNewestNcclModeled;
  // The tuner's latencies (us): base per algorithm and protocol, per step by link class.
  double base_lat[kNumAlgos][kNumProtos];
  double hw_lat[kNumHwClasses][kNumAlgos][kNumProtos];
  // Per-channel caps (GB/s) by architecture index and node count (1, 2, 3 or more).
  double ll_max_bw[4][3];
  double ring_ll128_bw[4][3];
  double tree_ll128_bw[4][3];
  double tree_bw[4][3];
  double nvls_tree_bw[4][3];
  bool blackwell_index = true;  // 2.25: compute capability 10.x reads tables of its own, not Hopper's
  bool pat = true;              // 2.23: PAT for AllGather and ReduceScatter, one GPU a node
  double pat_share = 0.75;      // 0.85 in 2.23
  bool nvls_gather = true;      // 2.19: NVLS AllGather and ReduceScatter on one node
  NvlsTunerRule nvls_rule = NvlsTunerRule::kEfficiency;
  bool ring_ll_half = true;           // 2.21: ring LL at half the bus bandwidth (before: a quarter or a third)
  bool ll128_lone_gpu_share = false;  // before 2.23: ring LL128 at 0.7 where a node holds one GPU
  bool ring_steps_per_node = false;   // before 2.23: an AllReduce ring counts 2 x nodes network steps
  int max_channels = kMaxChannels;    // MAXCHANNELS: 32 before 2.25
  int nvls_arity = 32;                // NCCL_MAX_NVLS_ARITY, the most NVLS heads: 8 before 2.21
  int nvls_min_gpus = 2;              // GPUs a node needs for NVLS: 3 before 2.28
  bool nvls_tree_linear = false;      // 2.18: an NVLS tree's latency counts a level per node, not log2
  double collnet_arity_lat = 0.4;     // us per CollNet Direct arity step: 0.5 in 2.18
  bool tree_simple_halving = false;   // before 2.20: a Simple tree halves its chunk for small shares
  bool nvls_gather_five_sixths = false;  // 2.19 to 2.22: NVLS gathers' bus bandwidth at 5/6 of it
  bool nvls_tree_corrected = true;    // 2.29: Blackwell's NVLS trees beside x86 take trees' correction
  // 2.30: Blackwell across nodes sets its NVLS channels, chunk and NVLS tree chunk cap by the
  // nodes, the GPUs a node and the NICs' speed (nvls.cc's ncclNvlsTreeSm100Tuning).
  bool nvls_sm100_node_tuning = true;
  Ll128Rule ll128 = Ll128Rule::kAnySm70;

  // The architecture index of the tables for a compute capability (cc = major * 10 + minor).
  int arch(int cc) const;
  // NVLS channels (NCCL_NVLS_NCHANNELS' default) on GPUs of `cc`, across nodes or on one.
  int nvls_channels(int cc, bool inter_node) const;
  // Per-channel speeds the channel search tries, highest first.
  SpeedList search_speeds(int cc, bool inter_node) const;
  // Whether LL128 is on by default for GPUs of compute capability `cc` (all alike).
  bool ll128_default(int cc) const;
};

// The rules of `version` (kOldestNcclModeled to kNewestNcclModeled; others are clamped).
NcclRules nccl_rules(int version);
// The newest release's rules, built once: the caps the modeled time takes whatever the release.
const NcclRules& newest_nccl_rules();

}  // namespace fakegpu::planner
