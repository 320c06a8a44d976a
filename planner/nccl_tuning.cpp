#include "nccl_tuning.h"

#include <strings.h>

#include <algorithm>
#include <sstream>
#include <vector>

namespace fakegpu::planner {
namespace {

const char* const kAlgoNames[kNumAlgos] = {"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
const char* const kProtoNames[kNumProtos] = {"LL", "LL128", "Simple"};
const char* const kFuncNames[kNumFuncs] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"};

const double kIntraSpeeds[] = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0};
const double kInterSpeeds[] = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                               7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
const double kSm90IntraSpeeds[] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
const double kSm90InterSpeeds[] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                                   15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
const double kSm100IntraSpeeds[] = {90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
const double kSm100InterSpeeds[] = {96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0,
                                    20.0, 17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};

template <size_t N>
SpeedList list(const double (&a)[N]) {
  return {a, static_cast<int>(N)};
}

// Applies one NCCL list ("a,b", "^a") to the entries of `row` (nelems wide).
template <typename T>
void apply_list(const std::string& var, const std::string& elems, const char* const* names, int nelems, T* row) {
  std::string list_text = elems;
  T set = 1, unset = 0;
  if (!list_text.empty() && list_text[0] == '^') {
    set = 0, unset = 1;
    list_text.erase(0, 1);
  }
  for (int e = 0; e < nelems; ++e) row[e] = unset;
  std::stringstream items(list_text);
  std::string item;
  while (std::getline(items, item, ',')) {
    int e = 0;
    while (e < nelems && strcasecmp(item.c_str(), names[e]) != 0) ++e;
    if (e == nelems) {
      std::string known;
      for (int k = 0; k < nelems; ++k) known += (k ? ", " : "") + std::string(names[k]);
      throw TuningError(var + "=" + elems + ": unknown entry '" + item + "' (known: " + known + ")");
    }
    row[e] = set;
  }
}

// NCCL's grammar: an optional prefix-less list for every function, then "func:list" entries
// separated by ';'.
template <typename T, int N>
void parse_func_list(const std::string& var, const std::string& value, const char* const* names, T (*table)[N]) {
  std::stringstream entries(value);
  std::string entry;
  bool first = true;
  while (std::getline(entries, entry, ';')) {
    auto colon = entry.find(':');
    if (colon == std::string::npos) {
      if (!first) throw TuningError(var + "=" + value + ": every entry after the first needs a 'function:' prefix");
      for (int f = 0; f < kNumFuncs; ++f) apply_list(var, entry, names, N, table[f]);
    } else {
      std::string prefix = entry.substr(0, colon);
      int f = 0;
      while (f < kNumFuncs && strcasecmp(prefix.c_str(), kFuncNames[f]) != 0) ++f;
      if (f == kNumFuncs) throw TuningError(var + "=" + value + ": unknown function '" + prefix + "'");
      apply_list(var, entry.substr(colon + 1), names, N, table[f]);
    }
    first = false;
  }
}

}  // namespace

const char* algo_name(int algo) { return algo >= 0 && algo < kNumAlgos ? kAlgoNames[algo] : "?"; }
const char* algo_label(int algo) { return algo < 0 ? "P2P" : algo_name(algo); }
const char* proto_name(int proto) { return proto >= 0 && proto < kNumProtos ? kProtoNames[proto] : "?"; }
const char* func_name(int func) { return func >= 0 && func < kNumFuncs ? kFuncNames[func] : "?"; }

int arch_index(int cc) { return cc >= 100 ? kBlackwell : cc >= 90 ? kHopper : cc >= 80 ? kAmpere : kVolta; }

const double kBaseLat[kNumAlgos][kNumProtos] = {
    {6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {8.0, 8.0, 8.0}};

// NCCL's rows for NVLink, PCI and the network; a path through host memory is PCI to it.
const double kHwLat[kNumHwClasses][kNumAlgos][kNumProtos] = {
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}},
    {{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}}};

// What a step takes, for the modeled time: NCCL's figures, but for the two PCIe cases its
// tuner lumps together. A Simple step between peers is posted writes into the receiver's
// memory (data, then the flag it polls locally) behind one system-wide fence: about 2 us
// (8 x RTX 5090 with peer access: 104.5 us at 2 MiB, where NCCL's 5.7 a step gives 170).
// Through host memory NCCL's figures hold for Simple (4 x RTX 5090 without peer access: 152.9
// us at 2 MiB, 5.7 a step gives 163), and an LL step waits for one more read across PCIe, the
// receiver polling host memory instead of its own: about 1 us.
const double kStepLat[kNumHwClasses][kNumAlgos][kNumProtos] = {
    {{.6, 1.25, 4.0}, {.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0}},
    {{1.0, 1.9, 2.0}, {1.0, 2.5, 2.0}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 2.0}},
    {{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14}},
    {{2.0, 2.9, 4.0}, {2.0, 3.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0}}};

// An LL or LL128 step over NVLink is a loop of the GPU's own: the sender stores lines that carry
// their flags, the receiver spins on its memory until they land, so its time counts in SM cycles.
// kStepLat's figures are Hopper's (near 1980 MHz); a GPU clocked lower takes its steps that much
// longer (8 x A100 at 1410 MHz: 20 us for 8 B and 24 for 1 KiB, where 8 x H100 take 13 and 16).
// B200 boards beside x86 hosts take longer at the same clock: the smallest AllReduce of 8 x B200
// takes 3.0 us where 8 x H200 or H800 take 2.3 by the same method (NVIDIA/nccl issue 1940, one
// round over NVLink), so each of their steps adds that 0.7 us. GB200 keeps Hopper's figures: a
// ring over 20 of its racks takes 1.6 us a step (R6-3), under even Hopper's LL128 figure. A
// Simple step waits on fences across the links, not on the SM's loop, and keeps its figure; so do
// PCIe and network steps, which the bus sets.
constexpr double kB200NvlinkStepExtraUs = 0.7;

double sm_clock_ratio(int clock_mhz) {
  constexpr double kReferenceClockMhz = 1980;
  return clock_mhz > 0 ? clock_mhz / kReferenceClockMhz : 1.0;
}

StepLatencies step_latencies(int clock_mhz, bool b200_on_x86) {
  StepLatencies out;
  std::copy(&kStepLat[0][0][0], &kStepLat[0][0][0] + sizeof(out.at) / sizeof(double), &out.at[0][0][0]);
  const double scale = 1 / sm_clock_ratio(clock_mhz);
  const double extra = b200_on_x86 ? kB200NvlinkStepExtraUs : 0.0;
  for (auto& algo : out.at[kHwNvlink])
    for (int p : {kLL, kLL128})
      if (algo[p] > 0) algo[p] = algo[p] * scale + extra;
  return out;
}

// The sender writes into host memory and the receiver reads it back across PCIe, and a GPU's
// reads of host memory (requests that wait for their answer) run below its posted writes:
// 4 x RTX 5090 through host memory reach 27 GB/s of bus bandwidth where 8 with peer access
// reach 44, and 4 x RTX 4090 18 GB/s where peer access gives 22.
const double kShmRateShare = 0.6;

const double kLlMaxBw[4][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {282.0, 90.0, 70.0}};
const double kPerChMaxRingLL128Bw[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {40, 40, 40}};
const double kPerChMaxTreeLL128Bw[4][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20}};
const double kPerChMaxTreeBw[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70, 42.8, 24}};
// NCCL 2.28's cap on an NVLS tree channel across nodes (none on one node, where there is none).
const double kPerChMaxNvlsTreeBw[4][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0, 57.7, 45.5}, {0, 96, 80}};

namespace {
const double kTreeCorrection[kNumProtos][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9}};
}  // namespace

double tree_correction(int func, int algo, int proto, uint64_t bytes, bool blackwell_x86) {
  // Sizes the table covers: up to 256 MiB for trees, one entry more for NVLS trees.
  const int entries = algo == kTree ? 23 : algo == kNvlsTree && blackwell_x86 ? 24 : 0;
  const int log_size = log2i(bytes >> 6);
  if (func != kAllReduce || (bytes >> 6) == 0 || log_size >= entries) return 1.0;
  return kTreeCorrection[proto][log_size];
}

double nvls_efficiency(int cc) { return cc >= 100 ? 0.74 : cc >= 90 ? 0.85 : 0.0; }

SpeedList search_speeds(int cc, bool inter_node) {
  if (cc >= 100) return inter_node ? list(kSm100InterSpeeds) : list(kSm100IntraSpeeds);
  if (cc >= 90) return inter_node ? list(kSm90InterSpeeds) : list(kSm90IntraSpeeds);
  return inter_node ? list(kInterSpeeds) : list(kIntraSpeeds);
}

TuningEnv::TuningEnv() {
  for (int f = 0; f < kNumFuncs; ++f) {
    for (int a = 0; a < kNumAlgos; ++a) algo_enabled[f][a] = true;
    for (int p = 0; p < kNumProtos; ++p) proto_enabled[f][p] = p == kLL128 ? 2 : 1;
  }
}

void TuningEnv::set_algo(const std::string& value) {
  parse_func_list("NCCL_ALGO", value, kAlgoNames, algo_enabled);
  algo_forced = true;
}

void TuningEnv::set_proto(const std::string& value) {
  parse_func_list("NCCL_PROTO", value, kProtoNames, proto_enabled);
  proto_forced = true;
}

}  // namespace fakegpu::planner
