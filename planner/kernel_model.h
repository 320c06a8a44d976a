// The kernel model: how long one PyTorch operator's CUDA kernels take on a GPU, and how long the
// host takes to launch them. A pure function of the operator's facts (op_facts.h), the GPU's
// profile and the measured rates (kernel_rates.h): no state, no clock. The runtime
// (libfakecuda/runtime/compute_time.cpp) queues what it answers on the rank's streams and host clock.
//
// Each operator is priced as the kernels PyTorch's CUDA backend launches for it: matrix products
// in tiles and waves over the SMs, convolutions as implicit products (with the layout transforms
// cuDNN adds for NCHW), fused attention by head dim, normalisations and softmax by the passes
// they make over their rows, optimizers' multi-tensor kernels by their launches, everything else
// by its bytes; each kernel pays a fixed cost besides its work.
#pragma once

#include "gpu_profiles.h"
#include "kernel_rates.h"
#include "op_facts.h"

namespace fakegpu::kernels {

// The operator's GPU time, launch time on the host, kernels and what bounds it. `host_speed`: how
// fast the rank's CPUs run eager PyTorch against the host the rates were measured on.
fakegpu_op_cost estimate(const GpuProfile& gpu, const fakegpu_op_facts& op, double host_speed = 1.0);

// The share of its rate a tensor-core matrix product keeps when the rows of its matrices start
// only every `row_alignment` bytes (1 when nothing is lost).
double alignment_share(const GpuProfile& gpu, int math, int row_alignment);

// Host work outside any one operator.
enum class HostEvent {
  kBackwardCall,   // count unused
  kModuleCall,     // count: modules called
  kOptimizerStep,  // count: parameters the step updates times the entries of state each keeps
};
double host_event_us(HostEvent event, long count, double host_speed = 1.0);

}  // namespace fakegpu::kernels
