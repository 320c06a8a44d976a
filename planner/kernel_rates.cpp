#include "kernel_rates.h"

namespace fakegpu::kernels {
namespace {

// The host lines of verification/kernels/h100-sxm.jsonl (see common/cluster/gpu_rates.cpp) and its operators too small to keep the GPU busy: an add from
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

const HostRates& default_host_rates() { return kServerHost; }

}  // namespace fakegpu::kernels
