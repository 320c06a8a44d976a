// Modeled time of work that runs on the CPU in place of a GPU kernel (PyTorch's operators under
// fakegpu): a roofline on the device's profile. The caller counts the work's floating-point
// operations and the bytes it moves; the time is the larger of flops at the profile's peak rate
// for the math used and bytes at its memory bandwidth, and never less than one kernel launch.
// It is queued on the stream as an empty piece of work of that cost, so it advances the stream's
// modeled clock in stream order, overlapping other streams as the program's streams allow.
#include <algorithm>

#include "device_facts.h"
#include "devices.h"
#include "runtime_state.h"
#include "stream_ops.h"

using namespace fakegpu::cuda;

namespace {

// How the work computes; the values are the ones fakegpu's Python hook passes.
enum Math { kMemoryBound = 0, kFp64 = 1, kFp32 = 2, kTf32 = 3, kHalf = 4, kFp8 = 5, kHostDeviceCopy = 6 };

// A kernel takes at least this long on a GPU: launch and the first wave's ramp-up.
constexpr double kLaunchNs = 2000;

double peak_tflops(const fakegpu::GpuProfile& p, int math) {
  switch (math) {
    case kFp64: return p.fp64_tflops;
    case kFp32: return p.fp32_tflops;
    case kTf32: return p.tf32_tflops;
    case kHalf: return p.half_tflops;
    case kFp8: return p.fp8_tflops;
    default: return 0;
  }
}

}  // namespace

// Returns the modeled nanoseconds in *cost_ns and queues them on the stream.
FAKECUDA_API cudaError_t fakegpu_cuda_record_kernel(cudaStream_t stream, int math, double flops, double bytes,
                                                   int64_t* cost_ns) {
  return guarded([&] {
    if (math < kMemoryBound || math > kHostDeviceCopy || flops < 0 || bytes < 0) throw cudaErrorInvalidValue;
    const fakegpu::GpuProfile& p = *current().profile;
    double ns;
    if (math == kHostDeviceCopy) {
      ns = bytes / pcie_copy_gbytes(p);  // bytes / (GB/s) = ns
    } else {
      const double tflops = peak_tflops(p, math);
      const double math_ns = tflops > 0 ? flops / (tflops * 1e3) : 0;  // TFLOP/s = 1e3 flop per ns
      ns = std::max({kLaunchNs, math_ns, bytes / memory_gbytes_per_s(p)});
    }
    const auto cost = static_cast<int64_t>(ns);
    if (cost_ns) *cost_ns = cost;
    submit(stream, [] {}, cost, math == kHostDeviceCopy ? kCopyWork : kKernelWork);
  });
}
