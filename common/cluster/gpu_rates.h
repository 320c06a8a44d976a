// What a GPU's kernels reach, as shares of its profile's peaks: the measured constants of the
// kernel model (planner/kernel_model.h), kept as data per GPU. A GPU without a measured set of its
// own takes its family's, which carries through its own peaks (an H200 uses the H100's shares
// against its faster memory). `fgpu calibrate` measures a set for the GPU at hand and writes it
// into a GPU profile file (cluster-config.md, "GPU profile files").
#pragma once

#include <string>
#include <vector>

namespace fakegpu {

struct GpuProfile;

// Where each figure comes from is said beside it, in gpu_rates.cpp.
struct GpuRates {
  // Any kernel: what a GPU spends on one besides its work (launch, ramp-up, the last wave's tail).
  double kernel_us;
  // Memory-bound kernels: the share of the memory bandwidth they reach once large.
  double memory_share;
  // Row-wise kernels (layer and RMS norm, softmax, and their backward passes): the share of the
  // bandwidth they reach; each row is reduced before it is written.
  double row_memory_share;
  // A kernel whose tensors fit in L2 (a tensor the previous kernel wrote, read again) moves them
  // this many times faster.
  double l2_speedup;
  // Matrix products: a tile's main loop runs at this share of the SM's peak; a tile also costs as
  // much as `tile_overhead_k` more steps of its inner dimension (prologue, epilogue).
  double gemm_tile_share;
  double gemm_tile_overhead_k;
  // The same for products on CUDA cores (FP32 without TF32, FP64).
  double gemm_cuda_core_share;
  // Products with 64 rows or fewer (or columns) are read-bound matrix-vector kernels: the share
  // of the bandwidth they reach.
  double skinny_memory_share;
  // Convolutions as implicit matrix products: the share of the SM's peak their main loop reaches,
  // and of the memory bandwidth their reads of the activations reach.
  double conv_tile_share;
  double conv_memory_share;
  // cuDNN runs NCHW convolutions of half and TF32 types as NHWC ones between two transposes, at
  // this share of the memory bandwidth.
  double layout_transform_share;
  // Fused attention forward, as a share of the tensor-core peak, at head dims of 64 and 128
  // (interpolated between, held beyond); fp32 attention on CUDA cores likewise.
  double attention_share_d64;
  double attention_share_d128;
  double attention_fp32_share_d64;
  double attention_fp32_share_d128;
  // The backward pass does 2.5 times the forward's products at this share of the forward's rate.
  double attention_backward_share;
  // Batch norm in training reduces each channel in one block: elements a block reduces per
  // microsecond, forward (mean and variance) and backward (two sums over the gradient).
  double channel_reduce_per_us;
  double channel_reduce_backward_per_us;
  // Max pooling: input elements an SM handles per microsecond, forward and backward.
  double pool_forward_per_us;
  double pool_backward_per_us;
  // A convolution whose input channels fill less than one 16-byte load (an RGB stem): its
  // forward kernel gathers the input element by element, this many per SM and microsecond.
  double conv_gather_per_us;
  // Batch norm of bf16 tensors, which cuDNN does not take: PyTorch's own kernels, one block per
  // channel, forward and backward (as channel_reduce_per_us).
  double native_channel_reduce_per_us;
  double native_channel_reduce_backward_per_us;
  // The weight and bias gradients of layer and RMS norm sum the output's gradient times the
  // normalised input down each column, blocks of columns at a time: operand elements (two per
  // element) an SM sums per microsecond.
  double norm_weight_grad_per_us;
  // PyTorch's elementwise kernels vectorize only over contiguous operands of the type they compute
  // in. Otherwise each thread handles one element at a time, and the SMs' instructions, not the
  // memory, can bound the kernel (an H200's faster memory then gains it nothing):
  // - converting operands (contiguous, of another type): operand elements an SM loads or stores
  //   per microsecond;
  // - strided operands: elements an SM handles per microsecond, and on top, elements times the
  //   dimensions each element's offsets are computed over;
  // - a concatenation of tensors that are not contiguous: elements per SM and microsecond.
  double unrolled_operand_per_us;
  double strided_element_per_us;
  double strided_dim_per_us;
  double strided_cat_per_us;
};

// One field of GpuRates by the name a GPU profile file gives it: the largest value it may take
// (shares: 1) and whether 0 is one (it must be > 0 otherwise).
struct GpuRateField {
  const char* name;
  double GpuRates::*member;
  double max;
  const char* unit;  // for messages: "a share of the peak", "microseconds", ...
  bool may_be_zero = false;
};
const std::vector<GpuRateField>& gpu_rate_fields();

// The rates the kernel model uses for a GPU: its own measured set when its profile has one, else
// its family's.
const GpuRates& gpu_rates(const GpuProfile& gpu);

// The measured set of a GPU's family (the one a profile without its own set takes).
const GpuRates& family_gpu_rates(const GpuProfile& gpu);

}  // namespace fakegpu
