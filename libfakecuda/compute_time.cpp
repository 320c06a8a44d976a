// Modeled time of work that runs on the CPU in place of a GPU kernel (PyTorch's operators under
// fakegpu): a roofline on the device's profile. The caller counts the work's floating-point
// operations and the bytes it moves; the time is the larger of flops at the rate the math used
// reaches and bytes at the memory bandwidth it reaches, and never less than one kernel launch.
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

// The share of the datasheet peaks that the best kernels reach, measured on an H100 SXM: a bf16
// product of 8192 x 8192 matrices at 785 to 798 of 989 TFLOP/s, a device-to-device copy at 3.0
// of 3.35 TB/s. Smaller products and most elementwise kernels reach less; the model leaves that out.
// verification/bench/gpu_kernel_rates.py measures these shares, and the ones below, on a real GPU.
constexpr double kAchievableMath = 0.8;
constexpr double kAchievableMemory = 0.9;

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

// The share of its rate a tensor-core matrix product keeps when the rows of its matrices start
// only every `row_alignment` bytes. Hopper and later load tensor-core operands with TMA, whose
// row strides must be multiples of 16 bytes; cuBLAS otherwise falls back to older kernels (for
// 2-byte rows, an odd number of bf16 columns as GPT-2's vocabulary of 50257 gives its output
// layer, an H100 ran a Turing-generation one). Measured on an H100 and an H200 for bf16, fp16 and
// tf32 products: about a third of the rate with 4- or 8-byte rows, a sixth with 2-byte rows.
// Earlier GPUs: not measured, so not modeled.
double alignment_share(const fakegpu::GpuProfile& p, int math, int row_alignment) {
  const bool tensor_cores = math == kTf32 || math == kHalf || math == kFp8;
  if (!tensor_cores || p.cc_major < 9 || row_alignment >= 16) return 1;
  return row_alignment >= 4 ? 1.0 / 3 : 1.0 / 6;
}

}  // namespace

// Returns the modeled nanoseconds in *cost_ns and queues them on the stream. `row_alignment`:
// for a matrix product, the bytes every row of its operands and result is aligned to (the
// largest power of two, up to 16, dividing each row's start); 16 for any other work.
FAKECUDA_API cudaError_t fakegpu_cuda_record_kernel(cudaStream_t stream, int math, double flops, double bytes,
                                                   int row_alignment, int64_t* cost_ns) {
  return guarded([&] {
    if (math < kMemoryBound || math > kHostDeviceCopy || flops < 0 || bytes < 0 || row_alignment < 1)
      throw cudaErrorInvalidValue;
    const fakegpu::GpuProfile& p = *current().profile;
    double ns;
    if (math == kHostDeviceCopy) {
      ns = bytes / pcie_copy_gbytes(p);  // bytes / (GB/s) = ns
    } else {
      const double tflops = peak_tflops(p, math) * kAchievableMath * alignment_share(p, math, row_alignment);
      const double math_ns = tflops > 0 ? flops / (tflops * 1e3) : 0;  // TFLOP/s = 1e3 flop per ns
      ns = std::max({kLaunchNs, math_ns, bytes / (memory_gbytes_per_s(p) * kAchievableMemory)});
    }
    const auto cost = static_cast<int64_t>(ns);
    if (cost_ns) *cost_ns = cost;
    submit(stream, [] {}, cost, math == kHostDeviceCopy ? kCopyWork : kKernelWork);
  });
}

// The share of its rate a matrix product of this math and row alignment keeps on the current
// device (record_kernel's rule), so that the PyTorch hook can say when a product is slowed.
FAKECUDA_API cudaError_t fakegpu_cuda_matmul_share(int math, int row_alignment, double* share) {
  return guarded([&] {
    if (!share || math < kMemoryBound || math > kHostDeviceCopy || row_alignment < 1) throw cudaErrorInvalidValue;
    *share = alignment_share(*current().profile, math, row_alignment);
  });
}
