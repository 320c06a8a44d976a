// The measured constants of the kernel model (kernel_model.h), kept as data: what a GPU
// architecture's kernels reach as shares of its profile's peaks, and what eager PyTorch costs the
// host. Shares carry to every GPU of the family through its own peaks (an H200 uses the H100's
// shares against its faster memory).
#pragma once

#include "gpu_profiles.h"

namespace fakegpu::kernels {

// Where each figure comes from is said beside it, in kernel_rates.cpp.
struct GpuRates {
  // Any kernel: what a GPU spends on one besides its work (launch, ramp-up, the last wave's tail).
  double kernel_us;
  // Memory-bound kernels: the share of the memory bandwidth they reach once large.
  double memory_share;
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
};

// What eager PyTorch costs the host, per call, in microseconds: measured on one server (a 16-core
// x86 CPU, Python 3.12, PyTorch 2.11) as the CPU time of calls whose GPU work is tiny.
struct HostRates {
  double op_us;              // an operator called from Python (dispatch, launch)
  double autograd_node_us;   // on top, where autograd records a node for the backward
  double backward_op_us;     // an operator autograd's engine runs in a backward pass (no Python)
  double gemm_extra_us;      // a matrix product's cuBLAS call on top
  double reduction_extra_us; // a reduction's setup on top
  double attention_extra_us; // scaled_dot_product_attention's backend choice and checks on top
  double conv_extra_us;      // cuDNN's plan lookup on top, for each pass
  double norm_extra_us;      // layer norm's shape checks on top
  double batch_norm_extra_us; // batch norm's Python (running statistics, checks) on top
  double backward_call_us;   // starting a backward pass (Tensor.backward) and waiting for it to end
  double module_call_us;     // calling an nn.Module (hooks, __call__)
  double optimizer_state_us; // an optimizer step, per parameter and entry of its state (Python loop)
  double optimizer_step_us;  // an optimizer step, once
};

const GpuRates& gpu_rates(const GpuProfile& gpu);
const HostRates& default_host_rates();

}  // namespace fakegpu::kernels
