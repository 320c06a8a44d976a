// The measured constants of the kernel model (kernel_model.h), kept as data: what eager PyTorch
// costs the host here; what a GPU's kernels reach is common/cluster/gpu_rates.h, beside the GPU profiles.
#pragma once

#include "gpu_profiles.h"
#include "gpu_rates.h"

namespace fakegpu::kernels {

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

const HostRates& default_host_rates();

}  // namespace fakegpu::kernels
