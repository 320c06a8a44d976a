#include "gpu_rates.h"

#include <limits>

#include "gpu_profiles.h"

namespace fakegpu {
namespace {

// Hopper, from verification/kernels/h100-sxm.jsonl: 251 operator timings on one H100 SXM (PyTorch
// 2.11, CUDA 13.0, CUDA events over back-to-back calls), measured 2026-11-27 by a plain PyTorch
// script whose cases fakegpu/kernel_cases.py repeats. Each share is read off the operators the
// comment names; none is fitted to a whole model's step.
constexpr GpuRates kHopper{
    // Elementwise kernels from 4 M to 268 M elements take 3 us more than their bytes at 90% of
    // the bandwidth (fp32 add of 16 M: 69.9 us for 201 MB).
    3.0,
    0.9,
    // Row-wise kernels: layer norm, softmax and cross-entropy forward, 22 figures of 40 us or more
    // (rows of 256 to 50304), read off by `fgpu calibrate --fit` (fakegpu/rate_fit.py): 82%.
    0.82,
    // Copies of 17 to 33 MB (H100's L2: 50 MB) back to back: 8 to 10 us, host-bound, against
    // 14 to 20 at the memory's rate.
    2.0,
    // bf16 products from 2048^3 to 16384 x 32000 x 2048, 128 x 256 tiles in waves over 132 SMs:
    // 83% of the SM's peak in the main loop, 192 steps of K per tile besides (2048^3: 28 us).
    0.83,
    192,
    // fp32 products of 2048^3 and 4096^3: 50 to 51 of 67 TFLOP/s.
    0.78,
    // 1 to 64 rows by 4096 x 4096 bf16: 20 to 25 us to read 33.5 MB.
    0.45,
    // 3x3 convolutions of 64 to 512 channels, NHWC, bf16 and TF32; 1x1 ones read-bound.
    0.8,
    0.7,
    // 3x3 convolutions, NCHW against NHWC: 24 to 59 us more, two transposes of input and output.
    0.72,
    // Causal flash attention, bf16/fp16: 8 x 12 x 1024 x 64 at 256 TFLOP/s, 1 x 32 x 4096 x 128
    // at 546; fp32 (the memory-efficient kernel) the first at 26 of 67 TFLOP/s, the second at 42.
    0.45,
    0.62,
    0.45,
    0.67,
    // Forward and backward of 1 x 32 x 4096 x 128: the backward at 432 TFLOP/s against 546.
    0.78,
    // Batch norm of 64 x 3 x 224 x 224 in fp32: 1442 us forward, 3 channels of 3.2 M elements
    // each; its backward about three times as long.
    2200,
    750,
    // Max pooling 3x3, stride 2, of 64 x 64 x 112 x 112 fp32: forward 205 us (an H200: 202), so
    // 1920 input elements per SM per microsecond; its backward, in a ResNet-18 step's profile, 577
    // us (the table's forward and backward, 1040 us, less the forward and the gradient's
    // accumulation, agrees): 680.
    1920,
    680,
    // A 7x7 stride-2 stem of 3 channels on 64 x 224 x 224 in NHWC: 411 us in TF32, 464 in bf16
    // (an H200: 404 and 454), however many FLOPs each type pads the channels to; 118 M input
    // elements gathered at about 2050 per SM per microsecond (2190 and 1940).
    2050,
    // Batch norm in bf16 (PyTorch's own kernels), forward and backward, read off the table's 8 bf16
    // shapes by `fgpu calibrate --fit` (their 8 forward figures, and the 6 forward-and-backward
    // ones of 400 us and more): 1391 and 549. A ResNet-18's bf16 inference step profiles alike:
    // 13 statistics kernels in 609 us, about 1400 elements of a channel per microsecond.
    1390,
    550,
    // Layer norm's weight gradient (GammaBetaBackward) in the profiles of whole steps
    // (verification/steps/h100-sxm.jsonl, `kernels`): 32768 x 1024 fp32 in 158 us, 8192 x 1024
    // bf16 (RMS norm) in 36 us, 3220 and 3530 operand elements per SM and microsecond, an H200
    // within 6% of them (GPT-2's 8192 x 768 ran at 2070).
    3300,
    // Read off single kernels in the profiles of whole steps (verification/steps/h100-sxm.jsonl,
    // `kernels`), each the same within 2% in two models and on an H200, so bound by the SMs:
    // - bf16 to fp32 copies (PyTorch vectorizes only fp32 to bf16 or fp16): a Llama model's 262 M
    //   logits in 811 us, two operands, 4900 per SM and microsecond; GPT-2's fp32 + bf16 adds
    //   (three operands) 27 us for 6.3 M elements, 5300;
    // - strided: a multiply of a broadcast gradient (one dimension) at 3220 elements per SM and
    //   microsecond in both models (GPT-2's 412 M in 970 us); the query, key and value gradients
    //   put back into rows (a copy over 5 dimensions) at 2360 and 2380: 3540 elements and 36000
    //   element-dimensions;
    // - stacking the query, key and value gradients, which are not contiguous, 1910 and 1930
    //   elements per SM and microsecond in the two models.
    5000,
    3540,
    36000,
    1920,
};

constexpr double kNoLimit = std::numeric_limits<double>::infinity();

}  // namespace

const std::vector<GpuRateField>& gpu_rate_fields() {
  static const std::vector<GpuRateField> fields = {
      {"kernel_us", &GpuRates::kernel_us, kNoLimit, "microseconds"},
      {"memory_share", &GpuRates::memory_share, 1, "a share of the memory bandwidth"},
      {"row_memory_share", &GpuRates::row_memory_share, 1, "a share of the memory bandwidth"},
      {"l2_speedup", &GpuRates::l2_speedup, kNoLimit, "times"},
      {"gemm_tile_share", &GpuRates::gemm_tile_share, 1, "a share of the SM's peak"},
      {"gemm_tile_overhead_k", &GpuRates::gemm_tile_overhead_k, kNoLimit, "steps of K", /*may_be_zero=*/true},
      {"gemm_cuda_core_share", &GpuRates::gemm_cuda_core_share, 1, "a share of the SM's peak"},
      {"skinny_memory_share", &GpuRates::skinny_memory_share, 1, "a share of the memory bandwidth"},
      {"conv_tile_share", &GpuRates::conv_tile_share, 1, "a share of the SM's peak"},
      {"conv_memory_share", &GpuRates::conv_memory_share, 1, "a share of the memory bandwidth"},
      {"layout_transform_share", &GpuRates::layout_transform_share, 1, "a share of the memory bandwidth"},
      {"attention_share_d64", &GpuRates::attention_share_d64, 1, "a share of the tensor-core peak"},
      {"attention_share_d128", &GpuRates::attention_share_d128, 1, "a share of the tensor-core peak"},
      {"attention_fp32_share_d64", &GpuRates::attention_fp32_share_d64, 1, "a share of the FP32 peak"},
      {"attention_fp32_share_d128", &GpuRates::attention_fp32_share_d128, 1, "a share of the FP32 peak"},
      {"attention_backward_share", &GpuRates::attention_backward_share, 1, "a share of the forward's rate"},
      {"channel_reduce_per_us", &GpuRates::channel_reduce_per_us, kNoLimit, "elements per microsecond"},
      {"channel_reduce_backward_per_us", &GpuRates::channel_reduce_backward_per_us, kNoLimit, "elements per microsecond"},
      {"pool_forward_per_us", &GpuRates::pool_forward_per_us, kNoLimit, "elements per SM and microsecond"},
      {"pool_backward_per_us", &GpuRates::pool_backward_per_us, kNoLimit, "elements per SM and microsecond"},
      {"conv_gather_per_us", &GpuRates::conv_gather_per_us, kNoLimit, "elements per SM and microsecond"},
      {"native_channel_reduce_per_us", &GpuRates::native_channel_reduce_per_us, kNoLimit, "elements per microsecond"},
      {"native_channel_reduce_backward_per_us", &GpuRates::native_channel_reduce_backward_per_us, kNoLimit,
       "elements per microsecond"},
      {"norm_weight_grad_per_us", &GpuRates::norm_weight_grad_per_us, kNoLimit, "operand elements per SM and microsecond"},
      {"unrolled_operand_per_us", &GpuRates::unrolled_operand_per_us, kNoLimit, "operand elements per SM and microsecond"},
      {"strided_element_per_us", &GpuRates::strided_element_per_us, kNoLimit, "elements per SM and microsecond"},
      {"strided_dim_per_us", &GpuRates::strided_dim_per_us, kNoLimit, "element-dimensions per SM and microsecond"},
      {"strided_cat_per_us", &GpuRates::strided_cat_per_us, kNoLimit, "elements per SM and microsecond"},
  };
  return fields;
}

const GpuRates& family_gpu_rates(const GpuProfile&) {
  // Only Hopper is measured; other families take its shares against their own peaks until a set
  // measured on them (fgpu calibrate) is added here.
  return kHopper;
}

const GpuRates& gpu_rates(const GpuProfile& gpu) { return gpu.rates ? *gpu.rates : family_gpu_rates(gpu); }

}  // namespace fakegpu
