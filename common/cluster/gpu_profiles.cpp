#include "gpu_profiles.h"

#include "gpu_rates.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace fakegpu {
namespace {

// Public datasheet and deviceQuery figures. NVLink bandwidth is per link and direction.
// name, product name, memory MiB, SMs, cc, NVLinks, GB/s per link, PCIe gen,
// SM MHz, memory MHz, bus bits, L2 MiB, smem per SM KiB, opt-in smem KiB, threads per SM,
// dense TFLOP/s: FP64, FP32, TF32, FP16/BF16, FP8 (V100 has no TF32 or BF16 units: FP32 and FP16
// rates stand in; Ampere has no FP8: its FP16 rate stands in)
const GpuProfile kProfiles[] = {
    {"v100", "Tesla V100-SXM2-32GB", 32768, 80, 7, 0, 6, 25.0, 3, 1530, 877, 4096, 6, 96, 96, 2048,
     7.8, 15.7, 15.7, 125, 125},
    {"a100-40gb", "NVIDIA A100-SXM4-40GB", 40960, 108, 8, 0, 12, 25.0, 4, 1410, 1215, 5120, 40, 164, 163, 2048,
     19.5, 19.5, 156, 312, 312},
    {"a100-80gb", "NVIDIA A100-SXM4-80GB", 81920, 108, 8, 0, 12, 25.0, 4, 1410, 1593, 5120, 40, 164, 163, 2048,
     19.5, 19.5, 156, 312, 312},
    {"a800", "NVIDIA A800-SXM4-80GB", 81920, 108, 8, 0, 8, 25.0, 4, 1410, 1593, 5120, 40, 164, 163, 2048,
     19.5, 19.5, 156, 312, 312},
    {"h100-sxm", "NVIDIA H100 80GB HBM3", 81559, 132, 9, 0, 18, 25.0, 5, 1980, 2619, 5120, 50, 228, 227, 2048,
     67, 67, 494.5, 989.5, 1979},
    {"h100-pcie", "NVIDIA H100 PCIe", 81559, 114, 9, 0, 0, 0.0, 5, 1755, 1593, 5120, 50, 228, 227, 2048,
     51, 51, 378, 756, 1513},
    {"h800", "NVIDIA H800", 81559, 132, 9, 0, 8, 25.0, 5, 1980, 2619, 5120, 50, 228, 227, 2048,
     67, 67, 494.5, 989.5, 1979},
    {"h20", "NVIDIA H20", 97871, 78, 9, 0, 18, 25.0, 5, 1980, 2619, 6144, 60, 228, 227, 2048, 1, 44, 74, 148, 296},
    {"h200", "NVIDIA H200", 143771, 132, 9, 0, 18, 25.0, 5, 1980, 3201, 6144, 50, 228, 227, 2048,
     67, 67, 494.5, 989.5, 1979},
    {"b200", "NVIDIA B200", 183359, 148, 10, 0, 18, 50.0, 6, 1965, 4000, 8192, 126, 228, 227, 2048,
     40, 80, 1100, 2250, 4500},
    {"gb200", "NVIDIA GB200", 189471, 152, 10, 0, 18, 50.0, 6, 1965, 4000, 8192, 126, 228, 227, 2048,
     45, 80, 1250, 2500, 5000, 16, true, /*arm_host=*/true},
    {"l40s", "NVIDIA L40S", 46068, 142, 8, 9, 0, 0.0, 4, 2520, 9001, 384, 96, 100, 99, 1536,
     1.4, 91.6, 183, 362, 733},
};

const std::pair<const char*, const char*> kAliases[] = {
    {"a100", "a100-80gb"}, {"a100-80g", "a100-80gb"}, {"a100-40g", "a100-40gb"},
    {"h100", "h100-sxm"},  {"b200-sxm", "b200"},      {"v100-sxm2", "v100"},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

}  // namespace

const GpuProfile* find_gpu_profile(const std::string& name) {
  std::string key = lower(name);
  for (const auto& [alias, target] : kAliases)
    if (key == alias) key = target;
  for (const auto& p : kProfiles)
    if (key == p.name) return &p;
  return nullptr;
}

std::vector<std::string> gpu_profile_names() {
  std::vector<std::string> names;
  for (const auto& p : kProfiles) names.emplace_back(p.name);
  for (const auto& [alias, target] : kAliases) names.emplace_back(alias);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {
struct OwnedProfile {
  std::string name, product_name, base;
  std::optional<GpuRates> rates;
  GpuProfile profile;
};

bool same_rates(const GpuRates* a, const GpuRates* b) {
  if (!a || !b) return a == b;
  for (const auto& field : gpu_rate_fields())
    if (a->*field.member != b->*field.member) return false;
  return true;
}

bool same_figures(const GpuProfile& a, const GpuProfile& b) {
  return a.memory_mib == b.memory_mib && a.sm_count == b.sm_count && a.cc_major == b.cc_major &&
         a.cc_minor == b.cc_minor && a.nvlink_links == b.nvlink_links &&
         a.nvlink_gbytes_per_link == b.nvlink_gbytes_per_link && a.pcie_gen == b.pcie_gen &&
         a.clock_mhz == b.clock_mhz && a.memory_clock_mhz == b.memory_clock_mhz &&
         a.memory_bus_bits == b.memory_bus_bits && a.l2_mib == b.l2_mib && a.smem_per_sm_kib == b.smem_per_sm_kib &&
         a.smem_optin_kib == b.smem_optin_kib && a.max_threads_per_sm == b.max_threads_per_sm &&
         a.fp64_tflops == b.fp64_tflops && a.fp32_tflops == b.fp32_tflops && a.tf32_tflops == b.tf32_tflops &&
         a.half_tflops == b.half_tflops && a.fp8_tflops == b.fp8_tflops && a.pcie_width == b.pcie_width &&
         a.p2p == b.p2p && a.arm_host == b.arm_host && a.host_speed == b.host_speed && same_rates(a.rates, b.rates);
}
}  // namespace

const GpuProfile* register_gpu_profile(const GpuProfile& profile) {
  static std::mutex mutex;
  static std::deque<OwnedProfile> registered;  // a deque never moves what it holds
  std::lock_guard<std::mutex> lock(mutex);
  const std::string base = profile.base ? profile.base : "";
  for (const auto& r : registered)
    if (r.name == profile.name && r.product_name == profile.product_name && r.base == base &&
        same_figures(r.profile, profile))
      return &r.profile;
  OwnedProfile& owned = registered.emplace_back(OwnedProfile{profile.name, profile.product_name, base, {}, profile});
  owned.profile.name = owned.name.c_str();
  owned.profile.product_name = owned.product_name.c_str();
  owned.profile.base = owned.base.empty() ? nullptr : owned.base.c_str();
  if (profile.rates) owned.rates = *profile.rates;
  owned.profile.rates = owned.rates ? &*owned.rates : nullptr;
  return &owned.profile;
}

}  // namespace fakegpu
