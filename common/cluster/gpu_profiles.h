// Catalogue of GPU models that a cluster config may name with `profile:`.
#pragma once

#include <string>
#include <vector>

namespace fakegpu {

struct GpuRates;

struct GpuProfile {
  const char* name;          // canonical key used in cluster YAML
  const char* product_name;  // what cudaGetDeviceProperties reports
  int memory_mib;
  int sm_count;
  int cc_major;
  int cc_minor;
  int nvlink_links;                 // 0: no NVLink
  double nvlink_gbytes_per_link;    // GB/s per direction per link
  int pcie_gen;
  // What the fake CUDA runtime reports as device properties.
  int clock_mhz;            // boost SM clock
  int memory_clock_mhz;
  int memory_bus_bits;
  int l2_mib;
  int smem_per_sm_kib;      // shared memory per SM
  int smem_optin_kib;       // the most one block may opt in to
  int max_threads_per_sm;
  // Dense peak math rates, TFLOP/s, for modeled compute time: FP64 (tensor cores where the GPU
  // has them for FP64), FP32 on CUDA cores, TF32 and FP16/BF16 on tensor cores, FP8.
  double fp64_tflops;
  double fp32_tflops;
  double tf32_tflops;
  double half_tflops;
  double fp8_tflops;
  int pcie_width = 16;  // lanes
  bool p2p = true;      // GPUs of a node can reach each other's memory over PCIe (consumer parts: no)
  bool arm_host = false;  // half of a Grace superchip: NCCL sees an Arm CPU beside it, not x86
  // A GPU measured by `fgpu calibrate` (a GPU profile file): its kernel model rates, and how fast
  // the host it was measured in ran eager PyTorch (0: not measured). Built-in profiles have neither.
  const GpuRates* rates = nullptr;
  double host_speed = 0;
  // The built-in profile a described GPU's other figures came from (null for a built-in).
  const char* base = nullptr;
};

// A copy's rate over the GPU's PCIe link, GB/s: about 3 GB/s per Gen1-equivalent x16 lane group
// after protocol overhead, scaled by the link's width.
inline double pcie_copy_gbytes(const GpuProfile& p) { return 3.0 * (1 << p.pcie_gen) * p.pcie_width / 16.0; }

// The memory's bandwidth, GB/s: two transfers a clock over the bus.
inline double memory_gbytes_per_s(const GpuProfile& p) { return 2.0 * p.memory_clock_mhz * 1e6 * p.memory_bus_bits / 8 / 1e9; }

// Returns nullptr for an unknown name. Lookup is case-insensitive and accepts aliases
// ("a100" is the 80 GB SXM part, "h100" the SXM part).
const GpuProfile* find_gpu_profile(const std::string& name);
std::vector<std::string> gpu_profile_names();

// A GPU a cluster config describes itself (gpu_types, a GPU profile file): kept for the life of
// the process, so the pointer stays valid after the config that named it is gone, and the same
// description given again returns the same pointer. `profile`'s strings and rates are copied.
const GpuProfile* register_gpu_profile(const GpuProfile& profile);

}  // namespace fakegpu
