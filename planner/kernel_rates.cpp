#include "kernel_rates.h"

namespace fakegpu::kernels {
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
};

// The host lines of the same file and its operators too small to keep the GPU busy: an add from
// Python 7.5 us in a loop, 8 to 11 between CUDA events; a bf16 product of 128^3 through `@` 15
// to 17 us; a sum 10 to 17; layer norm 16.8; scaled_dot_product_attention of 1 x 12 x 128 x 64,
// 45 to 49 us; a Linear module 19.7; each of the six operators of an eager RMS norm on a tensor
// that needs gradients, 16 to 17; a Linear module's forward, a sum and backward 285 us; AdamW over
// 50 tiny parameters (three entries of state each) 608 us, of which its 8 foreach operators
// account for about 64.
//
// The backward pass and the optimizer are split by verification/kernels/h100-sxm-host.jsonl
// (four runs on H100 servers whose small operators ran 0.7 to 1.3 times as fast): chains of
// 1, 2, 4 and 8 tiny Linear+GELU layers, forward, sum and backward, cost 206 to 236 us more per
// layer in every run, of which about 40 is the forward's, so the 6 operators autograd's engine
// runs for a layer (two products, the bias's sum, GELU's backward, two gradient accumulations)
// cost about 28 us each: the engine's work per node (its queue, input buffers, the dispatch
// through autograd's kernels) is on them. Starting the pass and waiting for it is what is left of
// the table's forward-and-backward lines of single operators too small to keep the GPU busy
// (softmax, layer norm, attention: 155 to 350 us for one operator, its backward and up to three
// gradient accumulations): about 150 us (the Linear line alone would say 50; the chains' own
// intercepts, 0 to 320, are too noisy to tell). AdamW over 1, 8 and 50 parameters: 7 to 13 us
// more per parameter (about 3 per entry of state), the rest once.
constexpr HostRates kServerHost{
    8,    // op_us
    6,    // autograd_node_us
    28,   // backward_op_us
    5,    // gemm_extra_us
    4,    // reduction_extra_us
    35,   // attention_extra_us
    20,   // conv_extra_us
    3,    // norm_extra_us
    45,   // batch_norm_extra_us: BatchNorm2d of 64 channels or more takes 65 us however small
    150,  // backward_call_us
    3.5,  // module_call_us
    3.0,  // optimizer_state_us
    94,   // optimizer_step_us: 608 - 64 for the foreach operators - 150 x 3.0
};

}  // namespace

const GpuRates& gpu_rates(const GpuProfile&) {
  // Only Hopper is measured; other families take its shares against their own peaks until a table
  // measured on them (fgpu calibrate) is added here.
  return kHopper;
}

const HostRates& default_host_rates() { return kServerHost; }

}  // namespace fakegpu::kernels
