#include "kernel_model.h"

#include <algorithm>
#include <cmath>

namespace fakegpu::kernels {
namespace {

// Rates in the units the model works in: flop and bytes per microsecond.
struct Gpu {
  const GpuProfile& profile;
  const GpuRates& rates;
  double bytes_per_us;  // the memory's bandwidth
  int sms;
};

// The peak rate of `math` on the GPU, TFLOP/s (0 for memory-bound work).
double peak_tflops(const GpuProfile& p, int math) {
  switch (math) {
    case FAKEGPU_MATH_FP64: return p.fp64_tflops;
    case FAKEGPU_MATH_FP32: return p.fp32_tflops;
    case FAKEGPU_MATH_TF32: return p.tf32_tflops;
    case FAKEGPU_MATH_HALF: return p.half_tflops;
    case FAKEGPU_MATH_FP8: return p.fp8_tflops;
    default: return 0;
  }
}

bool tensor_cores(int math) { return math == FAKEGPU_MATH_TF32 || math == FAKEGPU_MATH_HALF || math == FAKEGPU_MATH_FP8; }

double ceil_div(double a, double b) { return std::ceil(a / b); }

// Bytes moved at `share` of the bandwidth; faster when they all fit in L2.
double memory_us(const Gpu& g, double bytes, double share) {
  const double l2_bytes = double(g.profile.l2_mib) * (1 << 20);
  const double speedup = bytes <= l2_bytes ? g.rates.l2_speedup : 1.0;
  return bytes / (g.bytes_per_us * share * speedup);
}

struct Priced {
  double us = 0;
  int kernels = 1;
  int bound = FAKEGPU_BOUND_MEMORY;
  double workspace_bytes = 0;  // what each of its library calls takes from the allocator
  int workspace_calls = 0;
};

// Work that streams its bytes once, in `kernels` kernels, at `share` of the bandwidth (by default
// what elementwise kernels reach).
Priced streaming(const Gpu& g, double bytes, int kernels = 1, double share = 0) {
  const double fixed = kernels * g.rates.kernel_us;
  const double moving = memory_us(g, bytes, share > 0 ? share : g.rates.memory_share);
  return {fixed + moving, kernels, moving >= fixed ? FAKEGPU_BOUND_MEMORY : FAKEGPU_BOUND_LAUNCH};
}

// Where a kernel's SMs take longer over their work than its bytes take to move (`reading`, which
// `p` was priced by), the work sets its time, and `bound` says so.
void bound_by_work(Priced& p, double reading, double working, int bound) {
  if (working <= reading) return;
  p.us += working - reading;
  p.bound = bound;
}

struct Tile {
  int rows, columns;
};

// A matrix product's main loops: the best of the tile shapes and split-K factors cuBLAS chooses
// between, each CTA a tile (a slice of K with split-K), in waves over the SMs. Small tiles keep
// less of the tensor cores busy per byte loaded, so they reach a little less of the peak.
struct GemmTime {
  double us;
  double splits;
};
GemmTime gemm_main_loops(const Gpu& g, int math, double batch, double m, double n, double k, double share,
                         double overhead_k) {
  // The narrow tiles serve products with a handful of columns (or rows), such as the input
  // gradient of a convolution on 3 channels.
  static constexpr Tile kTensorTiles[] = {{128, 256}, {256, 128}, {128, 128}, {64, 128}, {128, 64}, {64, 64},
                                          {128, 16}, {16, 128}};
  static constexpr Tile kCudaCoreTiles[] = {{128, 128}, {64, 128}, {128, 64}, {64, 64}, {32, 64}};
  const bool tc = tensor_cores(math);
  const double sm_flop_per_us = peak_tflops(g.profile, math) * 1e6 / g.sms;
  GemmTime best{INFINITY, 1};
  auto consider = [&](const Tile& t) {
    const double area_share = tc ? std::min(1.0, std::pow(t.rows * t.columns / (128.0 * 256.0), 0.15)) : 1.0;
    for (double split : {1, 2, 4, 8, 16}) {
      if (split > 1 && k / split < 256) break;
      const double ctas = batch * ceil_div(m, t.rows) * ceil_div(n, t.columns) * split;
      const double waves = ceil_div(ctas, g.sms);
      const double tile_us = 2.0 * t.rows * t.columns * (k / split + overhead_k) / (sm_flop_per_us * share * area_share);
      double us = waves * tile_us;
      // Split-K writes fp32 partial sums and adds them up in a second kernel.
      if (split > 1) us += g.rates.kernel_us + memory_us(g, batch * m * n * 4 * split * 2, g.rates.memory_share);
      if (us < best.us) best = {us, split};
    }
  };
  if (tc)
    for (const Tile& t : kTensorTiles) consider(t);
  else
    for (const Tile& t : kCudaCoreTiles) consider(t);
  return best;
}

Priced gemm(const Gpu& g, int math, double batch, double m, double n, double k, double bytes, double share,
            double overhead_k, double memory_share) {
  if (batch <= 0 || m <= 0 || n <= 0) return {g.rates.kernel_us, 1, FAKEGPU_BOUND_LAUNCH};
  if (peak_tflops(g.profile, math) <= 0) return streaming(g, bytes);
  // A matrix times a vector is no tiled product: cuBLAS's matrix-vector kernels give every SM a
  // share of the matrix's rows and stream it, so only its FLOPs at the full rate count (fp32's
  // [1, 4096] x [4096, 4096] ran in 23.6 us on an H100, its 64 MiB at 85% of the bandwidth).
  const bool vector = std::min(m, n) <= 1;
  const GemmTime loops = k <= 0  ? GemmTime{0, 1}
                         : vector ? GemmTime{2 * batch * m * n * k / (peak_tflops(g.profile, math) * 1e6 * share), 1}
                                  : gemm_main_loops(g, math, batch, m, n, k, share, overhead_k);
  // A handful of rows (or columns) in half precision: a matrix-vector kernel that reads the other
  // matrix at less than the bandwidth elementwise kernels reach (fp32's reaches it).
  const bool skinny = math == FAKEGPU_MATH_HALF && std::min(m, n) < 32;
  const double reading = memory_us(g, bytes, skinny ? g.rates.skinny_memory_share : memory_share);
  Priced p;
  p.kernels = loops.splits > 1 ? 2 : 1;
  p.us = g.rates.kernel_us + std::max(loops.us, reading);
  p.bound = loops.us >= reading ? FAKEGPU_BOUND_COMPUTE : FAKEGPU_BOUND_MEMORY;
  return p;
}

// Hopper's tensor cores take TF32 operands from shared memory only with K, the inner dimension,
// contiguous (16-bit types either way). A product whose two matrices both hold K apart, such as a
// Linear layer's weight gradient, ran at two-thirds of the rate on an H100 (4 of an fp32 MLP's
// products in TF32, 515 us against 325 to 360 for the same FLOPs laid out otherwise; an H200 alike);
// one such matrix cost nothing measurable. Other GPUs: not measured, not modeled.
double layout_share(const GpuProfile& p, int math, int64_t apart) {
  return math == FAKEGPU_MATH_TF32 && p.cc_major == 9 && apart >= 2 ? 0.66 : 1.0;
}

Priced matrix_product(const Gpu& g, const fakegpu_op_facts& op) {
  const auto* d = op.dims;
  const double share = (tensor_cores(op.math) ? g.rates.gemm_tile_share : g.rates.gemm_cuda_core_share) *
                       alignment_share(g.profile, op.math, op.row_alignment) * layout_share(g.profile, op.math, d[4]);
  return gemm(g, op.math, std::max<int64_t>(d[0], 1), d[1], d[2], d[3], op.bytes, share, g.rates.gemm_tile_overhead_k,
              g.rates.memory_share);
}

// The library calls a convolution operator makes: its forward, or each gradient it computes.
int conv_pass_count(const fakegpu_op_facts& op) {
  const int64_t passes = op.dims[7];
  return passes == 0 ? 1 : static_cast<int>((passes & 1) + (passes >> 1 & 1));
}

// A convolution as implicit matrix products, one per group: the forward over every output pixel,
// the input's gradient (its transpose) over every input pixel, the weight's gradient over the
// filter with the pixels as its long inner dimension. Tensor cores take channels in 16-byte
// groups, so 3 RGB channels cost as many as 8 in bf16.
Priced convolution(const Gpu& g, const fakegpu_op_facts& op) {
  const auto* d = op.dims;
  const double batch = d[0], groups = std::max<int64_t>(d[6], 1), taps = std::max<int64_t>(d[4], 1);
  const double in_pixels = d[2], out_pixels = d[5];
  const double in_channels = d[1] / groups, out_channels = d[3] / groups;
  const int passes = static_cast<int>(d[7]);  // 0: forward; bit 0: input gradient, bit 1: weight gradient
  const bool tc = tensor_cores(op.math);
  const double lanes = tc ? std::max(1, 16 / std::max(op.element_bytes, 1)) : 1;
  const double padded_in = std::ceil(in_channels / lanes) * lanes;
  const double share = tc ? g.rates.conv_tile_share : g.rates.gemm_cuda_core_share;
  const double memory_share = g.rates.conv_memory_share;
  // Each gradient reads and writes about two thirds of what the backward's tensors hold.
  const double bytes = passes == 3 ? op.bytes * 2 / 3 : op.bytes;
  Priced total{0, 0, FAKEGPU_BOUND_COMPUTE};
  auto add = [&](const Priced& p) {
    total.us += p.us;
    total.kernels += p.kernels;
    if (p.bound != FAKEGPU_BOUND_COMPUTE) total.bound = p.bound;
  };
  if (passes == 0) {
    Priced forward =
        gemm(g, op.math, groups, batch * out_pixels, out_channels, padded_in * taps, bytes, share, 0, memory_share);
    // Channels too few to fill a 16-byte load are gathered one element at a time (grouped and
    // depthwise convolutions run kernels of their own).
    if (groups == 1 && in_channels * std::max(op.element_bytes, 1) < 16) {
      const double gathering = batch * out_pixels * in_channels * taps / (g.rates.conv_gather_per_us * g.sms);
      if (g.rates.kernel_us + gathering > forward.us)
        forward = {g.rates.kernel_us + gathering, forward.kernels, FAKEGPU_BOUND_COMPUTE};
    }
    add(forward);
  }
  if (passes & 1) add(gemm(g, op.math, groups, batch * in_pixels, in_channels, out_channels * taps, bytes, share, 0, memory_share));
  if (passes & 2) add(gemm(g, op.math, groups, out_channels, padded_in * taps, batch * out_pixels, bytes, share, 0, memory_share));
  // Tensor-core kernels take NHWC: for NCHW tensors cuDNN transposes each pass's two operands
  // into its workspace and its result back out (forward x, w -> y; input gradient dy, w -> dx;
  // weight gradient x, dy -> dw), three kernels a pass, each reading and writing its tensor once.
  // Every pass thus moves the input, weight and output once, and holds them in its workspace.
  // A 1x1 convolution of stride 1 is a plain product in NCHW.
  const bool pointwise = taps == 1 && in_pixels == out_pixels;
  if (tc && !(op.flags & FAKEGPU_OP_CHANNELS_LAST) && !pointwise) {
    const double element = std::max(op.element_bytes, 1);
    const double moved = element * (batch * d[1] * in_pixels + d[3] * in_channels * taps + batch * d[3] * out_pixels);
    const int pass_count = conv_pass_count(op);
    total.us += pass_count * (3 * g.rates.kernel_us + memory_us(g, 2 * moved, g.rates.layout_transform_share));
    total.kernels += 3 * pass_count;
    total.workspace_bytes = moved;
    total.workspace_calls = pass_count;
  }
  return total;
}

// The share of the attention peak at head dim `dim`, between the measured 64 and 128.
double attention_share(const GpuRates& r, int math, double dim) {
  const bool half = math != FAKEGPU_MATH_FP32;
  const double at64 = half ? r.attention_share_d64 : r.attention_fp32_share_d64;
  const double at128 = half ? r.attention_share_d128 : r.attention_fp32_share_d128;
  const double t = std::clamp((dim - 64) / 64, 0.0, 1.0);
  return at64 + t * (at128 - at64);
}

// FlexAttention's Triton kernels reach about 90% of FlashAttention-2's rate forward and 85%
// backward (PyTorch's FlexAttention announcement). The attention shares are those of the cuDNN
// kernels PyTorch's SDPA runs on Hopper, which FlashAttention-2 does not reach: on an H100 SXM at
// 8k tokens, 322 against 412 TFLOP/s forward at head dim 64 and 333 against 529 causal at 128;
// backward 264 against 395 (2k tokens) and 318 against 518 (the FlashAttention-3 paper's figures).
constexpr double kFlexForwardShare = 0.90, kFlexBackwardShare = 0.85;
constexpr double kFlash2ForwardD64 = 0.78, kFlash2ForwardD128 = 0.63;
constexpr double kFlash2BackwardD64 = 0.67, kFlash2BackwardD128 = 0.61;

// FlexAttention's share of the fused attention rate at head dim `dim` (interpolated as the
// shares are).
double flex_share(double dim, bool backward) {
  const double t = std::clamp((dim - 64) / 64, 0.0, 1.0);
  const double flash2 = backward ? kFlash2BackwardD64 + t * (kFlash2BackwardD128 - kFlash2BackwardD64)
                                 : kFlash2ForwardD64 + t * (kFlash2ForwardD128 - kFlash2ForwardD64);
  return flash2 * (backward ? kFlexBackwardShare : kFlexForwardShare);
}

// Fused attention: each CTA takes a block of 128 queries (64 beyond a head dim of 128) and walks
// the keys in blocks of the same size, two products per block; with a causal mask it stops at the
// diagonal. CTAs run in waves over the SMs.
Priced attention(const Gpu& g, const fakegpu_op_facts& op, bool backward) {
  const auto* d = op.dims;
  const double heads = std::max<int64_t>(d[0], 1) * std::max<int64_t>(d[1], 1), queries = d[2], keys = d[3], dim = d[4];
  const double block = dim <= 128 ? 128 : 64;
  const double query_blocks = ceil_div(queries, block), key_blocks = ceil_div(keys, block);
  const bool causal = op.flags & FAKEGPU_OP_CAUSAL;
  // With a causal mask the i-th query block sees the key blocks up to the diagonal; a block mask
  // (FlexAttention's) says which share of the pairs it keeps.
  double blocks_per_cta = causal ? (std::min(query_blocks, key_blocks) + 1) / 2 : key_blocks;
  if (d[5] > 0) blocks_per_cta = std::max(1.0, key_blocks * double(d[5]) / FAKEGPU_OP_SHARE_UNITS);
  const double ctas = heads * query_blocks;
  const double products = backward ? 5 : 2;  // the backward recomputes the scores, then four more products
  const double flop_per_cta = blocks_per_cta * products * 2 * block * block * dim;
  double share = attention_share(g.rates, op.math, dim);
  if (backward) share *= g.rates.attention_backward_share;
  if (op.flags & FAKEGPU_OP_FLEX) share *= flex_share(dim, backward);
  const int math = op.math == FAKEGPU_MATH_FP32 ? FAKEGPU_MATH_FP32 : FAKEGPU_MATH_HALF;
  const double sm_flop_per_us = peak_tflops(g.profile, math) * 1e6 / g.sms;
  const double computing = ceil_div(ctas, g.sms) * flop_per_cta / (sm_flop_per_us * share);
  const double reading = memory_us(g, op.bytes, g.rates.memory_share);
  // The backward also runs a pass over the output and its gradient first, and converts the
  // query gradient it summed in fp32.
  const int kernels = backward ? 3 : 1;
  return {kernels * g.rates.kernel_us + std::max(computing, reading), kernels,
          computing >= reading ? FAKEGPU_BOUND_COMPUTE : FAKEGPU_BOUND_MEMORY};
}

// Bytes of one rows x width tensor of the operator's element type.
double tensor_bytes(const fakegpu_op_facts& op) { return double(op.dims[0]) * op.dims[1] * std::max(op.element_bytes, 1); }

// Softmax keeps a row on chip up to a few KB; a longer row is read again for each pass (maximum,
// sum, output), up to twice as much in all for rows far beyond.
double reread_share(const fakegpu_op_facts& op) {
  const double row = double(op.dims[1]) * std::max(op.element_bytes, 1);
  return std::clamp((row - 4096) / 65536, 0.0, 1.0);
}

// Multi-tensor apply: one launch takes up to so many tensors per list (by the number of lists) and
// 320 chunks of 65536 elements.
Priced foreach_kernels(const Gpu& g, const fakegpu_op_facts& op) {
  static constexpr int kTensorsPerLaunch[] = {110, 64, 48, 36, 30};
  const double tensors = std::max<int64_t>(op.dims[0], 1);
  const int lists = static_cast<int>(std::clamp<int64_t>(op.dims[1], 1, 5));
  const double chunks = tensors + op.dims[2] / 65536.0;
  const int launches = static_cast<int>(std::max(ceil_div(tensors, kTensorsPerLaunch[lists - 1]), ceil_div(chunks, 320)));
  return streaming(g, op.bytes, launches);
}

// Batch norm: per channel, one block reduces the batch's pixels (its statistics, or the two sums
// of the backward), then an elementwise pass. cuDNN's kernels and PyTorch's own (for bf16) reduce
// at rates of their own.
Priced batch_norm(const Gpu& g, const fakegpu_op_facts& op, bool backward) {
  const double pixels = op.dims[0], channels = std::max<int64_t>(op.dims[1], 1);
  const bool statistics = backward || op.dims[2];
  Priced p = streaming(g, op.bytes, statistics ? 2 : 1);
  if (!statistics) return p;
  const GpuRates& r = g.rates;
  const double rate = op.dims[3] ? (backward ? r.native_channel_reduce_backward_per_us : r.native_channel_reduce_per_us)
                                 : (backward ? r.channel_reduce_backward_per_us : r.channel_reduce_per_us);
  const double reducing = ceil_div(channels, g.sms) * pixels / rate;
  bound_by_work(p, memory_us(g, tensor_bytes(op) * (backward ? 2 : 1), g.rates.memory_share), reducing,
                FAKEGPU_BOUND_LAUNCH);
  return p;
}

// Max pooling walks every window of the input, comparing and (backward) gathering through the
// indices: bound by the SMs' work per input element, not by its bytes (an H200 took as long as
// an H100), unless its bytes take longer.
Priced max_pooling(const Gpu& g, const fakegpu_op_facts& op) {
  const double rate = op.dims[0] ? g.rates.pool_backward_per_us : g.rates.pool_forward_per_us;
  const double working = op.dims[1] / (rate * g.sms);
  const double reading = memory_us(g, op.bytes, g.rates.memory_share);
  return {g.rates.kernel_us + std::max(working, reading), 1, working > reading ? FAKEGPU_BOUND_COMPUTE : FAKEGPU_BOUND_MEMORY};
}

// Layer and RMS norm's backward: the input gradient reads the output's gradient and the input
// and writes its gradient, row by row; the weight's gradient reads the first two again and sums
// them down the columns (then a small kernel adds the partial sums), bound by its SMs' sums
// rather than its bytes: an H200 ran it within 6% of an H100's time.
Priced norm_backward(const Gpu& g, const fakegpu_op_facts& op) {
  Priced p = streaming(g, 3 * tensor_bytes(op), 1, g.rates.row_memory_share);
  if (!op.dims[2]) return p;
  const double summing = 2.0 * op.dims[0] * op.dims[1] / (g.rates.norm_weight_grad_per_us * g.sms);
  const double reading = memory_us(g, 2 * tensor_bytes(op), g.rates.memory_share);
  p.us += 2 * g.rates.kernel_us + std::max(summing, reading);
  p.kernels += 2;
  if (summing > reading) p.bound = FAKEGPU_BOUND_COMPUTE;
  return p;
}

// Work that streams its bytes in PyTorch's elementwise kernels, which take one element at a time
// where they cannot vectorize (dims: op_facts.h): the longer of its bytes and the SMs' work.
Priced elementwise(const Gpu& g, const fakegpu_op_facts& op) {
  const int kernels = static_cast<int>(std::max<int64_t>(op.dims[0], 1));
  Priced p = streaming(g, op.bytes, kernels);
  const GpuRates& r = g.rates;
  const double strided = op.dims[3] ? 1 / r.strided_element_per_us + op.dims[3] / r.strided_dim_per_us : 0;
  const double per_element =
      op.dims[2] / r.unrolled_operand_per_us + strided + (op.dims[4] ? 1 / r.strided_cat_per_us : 0);
  bound_by_work(p, memory_us(g, op.bytes, r.memory_share), double(op.dims[1]) * per_element / g.sms,
                FAKEGPU_BOUND_COMPUTE);
  return p;
}

Priced gpu_time(const Gpu& g, const fakegpu_op_facts& op) {
  switch (op.kind) {
    case FAKEGPU_OP_GEMM: return matrix_product(g, op);
    case FAKEGPU_OP_CONV: return convolution(g, op);
    case FAKEGPU_OP_ATTENTION: return attention(g, op, false);
    case FAKEGPU_OP_ATTENTION_BACKWARD: return attention(g, op, true);
    case FAKEGPU_OP_REDUCTION: return streaming(g, op.bytes);
    // Layer norm reads its rows twice (statistics, then the output), the second time partly
    // from cache: three passes of the tensor in all.
    // Row-wise kernels (norms, softmax) reduce within each row before they write: their own share.
    case FAKEGPU_OP_NORM: return streaming(g, std::max(op.bytes, 3 * tensor_bytes(op)), 1, g.rates.row_memory_share);
    case FAKEGPU_OP_NORM_BACKWARD: return norm_backward(g, op);
    case FAKEGPU_OP_SOFTMAX:
      return streaming(g, 2 * tensor_bytes(op) * (1 + reread_share(op)), 1, g.rates.row_memory_share);
    case FAKEGPU_OP_SOFTMAX_BACKWARD:
      return streaming(g, 3 * tensor_bytes(op) * (1 + reread_share(op) / 2), 1, g.rates.row_memory_share);
    case FAKEGPU_OP_FOREACH: return foreach_kernels(g, op);
    // Sorts the token ids, sums each id's gradients, writes them into a zeroed table: about eight
    // kernels, the table written once and the gradients read twice.
    case FAKEGPU_OP_EMBEDDING_BACKWARD: {
      const double width_bytes = double(op.dims[1]) * std::max(op.element_bytes, 1);
      return streaming(g, op.dims[2] * width_bytes + 2 * op.dims[0] * width_bytes, 8);
    }
    case FAKEGPU_OP_BATCH_NORM: return batch_norm(g, op, false);
    case FAKEGPU_OP_BATCH_NORM_BACKWARD: return batch_norm(g, op, true);
    case FAKEGPU_OP_HOST_COPY:
      return {op.bytes / (pcie_copy_gbytes(g.profile) * 1e3), 1, FAKEGPU_BOUND_MEMORY};
    case FAKEGPU_OP_NO_KERNEL: return {0, 0, FAKEGPU_BOUND_LAUNCH};
    case FAKEGPU_OP_POOL: return max_pooling(g, op);
    default: return elementwise(g, op);
  }
}

double host_time(const fakegpu_op_facts& op, const HostRates& h) {
  const bool backward = op.flags & FAKEGPU_OP_IN_BACKWARD;
  double us = backward ? h.backward_op_us : h.op_us;
  if (!backward && (op.flags & FAKEGPU_OP_RECORDS_GRAD)) us += h.autograd_node_us;
  switch (op.kind) {
    case FAKEGPU_OP_GEMM: us += h.gemm_extra_us; break;
    case FAKEGPU_OP_REDUCTION: us += h.reduction_extra_us; break;
    case FAKEGPU_OP_CONV: us += h.conv_extra_us * conv_pass_count(op); break;
    // Python's work before the kernel: scaled_dot_product_attention's backend choice, layer norm's
    // checks, BatchNorm2d's running statistics.
    case FAKEGPU_OP_ATTENTION: us += backward ? 0 : h.attention_extra_us; break;
    case FAKEGPU_OP_NORM: us += backward ? 0 : h.norm_extra_us; break;
    case FAKEGPU_OP_BATCH_NORM: us += backward ? 0 : h.batch_norm_extra_us; break;
    default: break;
  }
  return us;
}

}  // namespace

// Hopper and later load tensor-core operands with TMA, whose row strides must be multiples of 16
// bytes; cuBLAS otherwise falls back to older kernels (for 2-byte rows, an odd number of bf16
// columns as GPT-2's vocabulary of 50257 gives its output layer, an H100 ran a Turing-generation
// one). Measured on an H100 and an H200 for bf16, fp16 and tf32 products: about a third of the
// rate with 4- or 8-byte rows, a sixth with 2-byte rows. Earlier GPUs: not measured, not modeled.
double alignment_share(const GpuProfile& p, int math, int row_alignment) {
  if (!tensor_cores(math) || p.cc_major < 9 || row_alignment >= 16) return 1;
  return row_alignment >= 4 ? 1.0 / 3 : 1.0 / 6;
}

fakegpu_op_cost estimate(const GpuProfile& profile, const fakegpu_op_facts& op, double host_speed) {
  const Gpu g{profile, gpu_rates(profile), memory_gbytes_per_s(profile) * 1e3, std::max(profile.sm_count, 1)};
  const Priced p = gpu_time(g, op);
  fakegpu_op_cost cost{};
  cost.gpu_us = p.us;
  cost.kernels = p.kernels;
  cost.bound = p.bound;
  cost.workspace_bytes = p.workspace_bytes;
  cost.workspace_calls = p.workspace_calls;
  cost.host_us = host_time(op, default_host_rates()) / host_speed;
  return cost;
}

double host_event_us(HostEvent event, long count, double host_speed) {
  const HostRates& h = default_host_rates();
  switch (event) {
    case HostEvent::kBackwardCall: return h.backward_call_us / host_speed;
    case HostEvent::kModuleCall: return h.module_call_us * count / host_speed;
    case HostEvent::kOptimizerStep: return (h.optimizer_step_us + h.optimizer_state_us * count) / host_speed;
  }
  return 0;
}

}  // namespace fakegpu::kernels
