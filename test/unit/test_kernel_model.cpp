// The kernel model's rules, each checked against what it claims to capture: fixed costs, waves,
// layouts, attention's masking, the host's costs and the carrying of shares to other GPUs.
#include <gtest/gtest.h>

#include "gpu_profiles.h"
#include "kernel_model.h"

namespace fakegpu::kernels {
namespace {

const GpuProfile& h100() { return *find_gpu_profile("h100"); }

fakegpu_op_facts memory_op(double bytes) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_MEMORY;
  op.bytes = bytes;
  op.row_alignment = 16;
  return op;
}

fakegpu_op_facts gemm(double m, double n, double k, int math = FAKEGPU_MATH_HALF, int elem = 2, int alignment = 16) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_GEMM;
  op.math = math;
  op.element_bytes = elem;
  op.row_alignment = alignment;
  op.flops = 2 * m * n * k;
  op.bytes = (m * k + k * n + m * n) * elem;
  op.dims[0] = 1;
  op.dims[1] = static_cast<int64_t>(m);
  op.dims[2] = static_cast<int64_t>(n);
  op.dims[3] = static_cast<int64_t>(k);
  return op;
}

double gpu_us(const fakegpu_op_facts& op, const GpuProfile& gpu = h100()) { return estimate(gpu, op).gpu_us; }

TEST(KernelModel, MemoryBoundKernelsPayAFixedCostAndTheirBytes) {
  const GpuRates& r = gpu_rates(h100());
  const double bandwidth_us = memory_gbytes_per_s(h100()) * 1e3;  // bytes per microsecond
  const double big = 1e9;  // far beyond L2
  EXPECT_NEAR(gpu_us(memory_op(big)), r.kernel_us + big / (bandwidth_us * r.memory_share), 0.01);
  EXPECT_EQ(estimate(h100(), memory_op(big)).bound, FAKEGPU_BOUND_MEMORY);
  // A tiny kernel costs its fixed part, and is bound by it.
  EXPECT_NEAR(gpu_us(memory_op(4096)), r.kernel_us, 0.01);
  EXPECT_EQ(estimate(h100(), memory_op(4096)).bound, FAKEGPU_BOUND_LAUNCH);
  // Just inside L2 moves faster per byte than just outside it.
  const double l2 = h100().l2_mib * double(1 << 20);
  EXPECT_LT(gpu_us(memory_op(l2)) - r.kernel_us, (gpu_us(memory_op(l2 * 1.01)) - r.kernel_us) / 1.5);
}

TEST(KernelModel, LargeHalfProductsReachMostOfThePeakAndWavesQuantise) {
  const double us = gpu_us(gemm(8192, 8192, 8192));
  const double tflops = 2.0 * 8192 * 8192 * 8192 / us / 1e6;
  EXPECT_GT(tflops, 0.7 * h100().half_tflops);
  EXPECT_LT(tflops, 0.85 * h100().half_tflops);
  // 132 tiles of 128 x 256 fill the SMs once; one row of tiles more needs a second wave.
  const double one_wave = gpu_us(gemm(128 * 12, 256 * 11, 4096));
  const double two_waves = gpu_us(gemm(128 * 13, 256 * 11, 4096));
  EXPECT_GT(two_waves, 1.5 * one_wave);
}

TEST(KernelModel, ShortInnerDimensionsAndMisalignedRowsCost) {
  // The same FLOPs with an inner dimension of 256 instead of 4096 run at a lower rate.
  const double long_k = gpu_us(gemm(4096, 4096, 4096));
  const double short_k = gpu_us(gemm(4096 * 4, 4096 * 4, 256));
  EXPECT_GT(short_k, 1.2 * long_k);
  // Rows aligned to 2 bytes on Hopper: a sixth of the rate.
  const double aligned = gpu_us(gemm(8192, 8192, 8192));
  const double misaligned = gpu_us(gemm(8192, 8192, 8192, FAKEGPU_MATH_HALF, 2, 2));
  EXPECT_NEAR(misaligned / aligned, 6.0, 0.5);
  EXPECT_DOUBLE_EQ(alignment_share(*find_gpu_profile("a100"), FAKEGPU_MATH_HALF, 2), 1.0);  // not measured there
}

TEST(KernelModel, Tf32ProductsWithBothMatricesHoldingKApartSlowOnHopper) {
  fakegpu_op_facts packed = gemm(8192, 8192, 8192, FAKEGPU_MATH_TF32, 4), apart = packed, one = packed;
  apart.dims[4] = 2;  // a Linear layer's weight gradient: both matrices transposed
  one.dims[4] = 1;
  EXPECT_NEAR(gpu_us(apart) / gpu_us(packed), 1 / 0.66, 0.05);
  EXPECT_DOUBLE_EQ(gpu_us(one), gpu_us(packed));
  // 16-bit types load either way; an A100's TF32 is not measured so, nor modeled.
  fakegpu_op_facts half = gemm(8192, 8192, 8192), half_apart = half;
  half_apart.dims[4] = 2;
  EXPECT_DOUBLE_EQ(gpu_us(half_apart), gpu_us(half));
  const GpuProfile& a100 = *find_gpu_profile("a100");
  EXPECT_DOUBLE_EQ(gpu_us(apart, a100), gpu_us(packed, a100));
}

TEST(KernelModel, MatrixVectorProductsAreReadBound) {
  const fakegpu_op_facts op = gemm(1, 4096, 4096);
  const fakegpu_op_cost c = estimate(h100(), op);
  EXPECT_EQ(c.bound, FAKEGPU_BOUND_MEMORY);
  EXPECT_GT(c.gpu_us, op.bytes / (memory_gbytes_per_s(h100()) * 1e3));
}

fakegpu_op_facts attention(int64_t length, int64_t dim, bool causal, bool backward = false) {
  fakegpu_op_facts op{};
  op.kind = backward ? FAKEGPU_OP_ATTENTION_BACKWARD : FAKEGPU_OP_ATTENTION;
  op.math = FAKEGPU_MATH_HALF;
  op.flags = causal ? FAKEGPU_OP_CAUSAL : 0;
  op.element_bytes = 2;
  op.row_alignment = 16;
  const int64_t dims[] = {4, 16, length, length, dim};
  for (int i = 0; i < 5; ++i) op.dims[i] = dims[i];
  op.bytes = 4.0 * 4 * 16 * length * dim * 2;
  return op;
}

TEST(KernelModel, AttentionFollowsItsMaskHeadDimAndBackward) {
  // A causal mask skips the blocks above the diagonal: about half the time on long sequences.
  const double full = gpu_us(attention(8192, 128, false)), causal = gpu_us(attention(8192, 128, true));
  EXPECT_NEAR(causal / full, 0.5, 0.05);
  // Twice the head dim is twice the FLOPs, done at a better rate.
  EXPECT_LT(gpu_us(attention(8192, 128, false)), 2 * gpu_us(attention(8192, 64, false)));
  // The backward's five products at a lower rate than the forward's two.
  EXPECT_GT(gpu_us(attention(8192, 128, true, true)), 2.5 * causal);
}

TEST(KernelModel, FlexAttentionVisitsTheBlocksItsMaskKeepsAtItsOwnRate) {
  // A block mask keeping a quarter of the pairs: a quarter of the full mask's math.
  fakegpu_op_facts quarter = attention(8192, 128, false);
  quarter.dims[5] = FAKEGPU_OP_SHARE_UNITS / 4;
  const double full = gpu_us(attention(8192, 128, false));
  EXPECT_NEAR(gpu_us(quarter) / full, 0.25, 0.03);
  // Inductor's kernel runs at 90% of FlashAttention-2's rate forward and 85% backward, which on
  // Hopper is about 60% of the cuDNN kernels' at head dim 128: so the same mask takes 1.7 times
  // as long forward, and longer still backward.
  fakegpu_op_facts flex = attention(8192, 128, true), flex_backward = attention(8192, 128, true, true);
  flex.flags |= FAKEGPU_OP_FLEX;
  flex_backward.flags |= FAKEGPU_OP_FLEX;
  const double forward_ratio = gpu_us(flex) / gpu_us(attention(8192, 128, true));
  const double backward_ratio = gpu_us(flex_backward) / gpu_us(attention(8192, 128, true, true));
  EXPECT_NEAR(forward_ratio, 1 / (0.90 * 0.63), 0.05);
  EXPECT_GT(backward_ratio, forward_ratio);
}

fakegpu_op_facts conv3x3(bool channels_last, int passes = 0) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_CONV;
  op.math = FAKEGPU_MATH_HALF;
  op.flags = channels_last ? FAKEGPU_OP_CHANNELS_LAST : 0;
  op.element_bytes = 2;
  op.row_alignment = 16;
  const int64_t dims[] = {64, 128, 28 * 28, 128, 9, 28 * 28, 1, passes};
  for (int i = 0; i < 8; ++i) op.dims[i] = dims[i];
  op.flops = 2.0 * 64 * 128 * 784 * 128 * 9;
  op.bytes = 2.0 * (2 * 64 * 128 * 784 + 128 * 128 * 9);
  return op;
}

TEST(KernelModel, ConvolutionsPayForNchwAndBothGradients) {
  const fakegpu_op_cost nchw = estimate(h100(), conv3x3(false)), nhwc = estimate(h100(), conv3x3(true));
  EXPECT_GT(nchw.gpu_us, nhwc.gpu_us);
  EXPECT_EQ(nchw.kernels, nhwc.kernels + 3);  // x and w into NHWC, y back
  EXPECT_GT(gpu_us(conv3x3(true, 3)), 1.8 * gpu_us(conv3x3(true, 1)));
}

fakegpu_op_facts stem(bool grouped = false) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_CONV;
  op.math = FAKEGPU_MATH_HALF;
  op.flags = FAKEGPU_OP_CHANNELS_LAST;
  op.element_bytes = 2;
  op.row_alignment = 16;
  // 64 x 3 x 224 x 224 into 64 channels of 112 x 112, 7 x 7 taps (grouped: 63 channels, 21 from
  // each input channel).
  const int64_t out = grouped ? 63 : 64, groups = grouped ? 3 : 1;
  const int64_t dims[] = {64, 3, 224 * 224, out, 49, 112 * 112, groups, 0};
  for (int i = 0; i < 8; ++i) op.dims[i] = dims[i];
  op.flops = 2.0 * 64 * out * 12544 * (3 / groups) * 49;
  op.bytes = 2.0 * (64 * 3 * 50176 + out * (3 / groups) * 49 + 64 * out * 12544);
  return op;
}

TEST(KernelModel, AStemOfThreeChannelsIsBoundByGatheringItsInput) {
  // Its 6-byte pixels fill no 16-byte load: each of the 118 M input elements its windows read is
  // gathered on its own, at the GPU's rate per SM.
  const double gathered = 64.0 * 12544 * 3 * 49;
  const GpuRates& r = gpu_rates(h100());
  EXPECT_NEAR(gpu_us(stem()), r.kernel_us + gathered / (r.conv_gather_per_us * h100().sm_count), 1e-6);
  // Grouped convolutions run kernels of their own: priced as products.
  EXPECT_LT(gpu_us(stem(true)), gpu_us(stem()) / 2);
}

TEST(KernelModel, NchwConvolutionsHoldTheirTransposedTensorsInCudnnWorkspaces) {
  // Each pass holds its NHWC copies of x (64x128x28x28), w (128x128x3x3) and y in bf16.
  const double tensors = 2.0 * (64 * 128 * 784 + 128 * 128 * 9 + 64 * 128 * 784);
  const fakegpu_op_cost forward = estimate(h100(), conv3x3(false)), backward = estimate(h100(), conv3x3(false, 3));
  EXPECT_DOUBLE_EQ(forward.workspace_bytes, tensors);
  EXPECT_EQ(forward.workspace_calls, 1);
  EXPECT_DOUBLE_EQ(backward.workspace_bytes, tensors);
  EXPECT_EQ(backward.workspace_calls, 2);  // the input's gradient, then the weight's
  EXPECT_EQ(estimate(h100(), conv3x3(false, 2)).workspace_calls, 1);
  // NHWC tensors need no copies.
  EXPECT_EQ(estimate(h100(), conv3x3(true, 3)).workspace_calls, 0);
  EXPECT_EQ(estimate(h100(), conv3x3(true, 3)).workspace_bytes, 0);
}

TEST(KernelModel, MultiTensorKernelsLaunchByTensorsAndChunks) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_FOREACH;
  op.row_alignment = 16;
  op.dims[0] = 200;  // tensors in each list
  op.dims[1] = 1;    // one list: 110 tensors a launch
  op.dims[2] = 200 * 16;
  op.bytes = 200 * 16 * 4;
  EXPECT_EQ(estimate(h100(), op).kernels, 2);
  op.dims[1] = 4;  // four lists: 36 a launch
  EXPECT_EQ(estimate(h100(), op).kernels, 6);
}

TEST(KernelModel, BatchNormStatisticsAreReducedOneChannelPerBlock) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_BATCH_NORM;
  op.element_bytes = 4;
  op.row_alignment = 16;
  op.dims[0] = 64 * 224 * 224;
  op.dims[1] = 3;
  op.dims[2] = 1;  // training: batch statistics
  op.bytes = 2.0 * 64 * 3 * 224 * 224 * 4;
  const double training = gpu_us(op);
  op.dims[2] = 0;  // inference: running statistics, one elementwise pass
  EXPECT_GT(training, 10 * gpu_us(op));
  EXPECT_NEAR(training, 64.0 * 224 * 224 / gpu_rates(h100()).channel_reduce_per_us, 0.2 * training);
  // In bf16 PyTorch's own kernels reduce, at their own rate.
  op.dims[2] = 1;
  op.dims[3] = 1;
  op.element_bytes = 2;
  op.bytes /= 2;
  EXPECT_NEAR(gpu_us(op), 64.0 * 224 * 224 / gpu_rates(h100()).native_channel_reduce_per_us, 0.2 * gpu_us(op));
}

// An fp32 matrix times a vector streams the matrix: no 32-row tiles of work for one row (an H100
// measured 23.6 us for [1, 4096] x [4096, 4096]); sixteen rows are a tiled product again.
TEST(KernelModel, Fp32MatrixVectorProductsStreamTheMatrix) {
  const fakegpu_op_facts vector = gemm(1, 4096, 4096, FAKEGPU_MATH_FP32, 4);
  EXPECT_EQ(estimate(h100(), vector).bound, FAKEGPU_BOUND_MEMORY);
  EXPECT_NEAR(gpu_us(vector), 23.6, 0.25 * 23.6);
  EXPECT_EQ(estimate(h100(), gemm(16, 4096, 4096, FAKEGPU_MATH_FP32, 4)).bound, FAKEGPU_BOUND_COMPUTE);
  // Memory-bound: a GPU with faster memory runs it faster.
  EXPECT_LT(gpu_us(vector, *find_gpu_profile("h200")), 0.8 * gpu_us(vector));
}

fakegpu_op_facts max_pool(double n, double c, double h, double w, bool backward) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_POOL;
  op.element_bytes = 4;
  op.row_alignment = 16;
  op.dims[0] = backward;
  op.dims[1] = static_cast<int64_t>(n * c * h * w);
  // Input, a quarter of it out, and the output's int64 indices (backward: the same, and a
  // gradient of the input's size).
  op.bytes = n * c * h * w * 4 * (backward ? 2 : 1) + n * c * h * w / 4 * (4 + 8);
  return op;
}

// ResNet's max pooling (3x3, stride 2) of 64 x 64 x 112 x 112 fp32: 205 us forward on an H100 and
// 202 on an H200; its backward about 577 us. Bound by the SMs, so faster memory gains nothing.
TEST(KernelModel, MaxPoolingIsBoundByItsWindowsNotItsBytes) {
  const fakegpu_op_facts forward = max_pool(64, 64, 112, 112, false), backward = max_pool(64, 64, 112, 112, true);
  EXPECT_NEAR(gpu_us(forward), 205, 0.1 * 205);
  EXPECT_NEAR(gpu_us(backward), 577, 0.1 * 577);
  EXPECT_EQ(estimate(h100(), forward).bound, FAKEGPU_BOUND_COMPUTE);
  EXPECT_DOUBLE_EQ(gpu_us(forward, *find_gpu_profile("h200")), gpu_us(forward));
  // A GPU of fewer SMs takes longer.
  EXPECT_GT(gpu_us(forward, *find_gpu_profile("a100")), gpu_us(forward));
}

// dims of an elementwise kernel that cannot vectorize: elements, operands converted, loop
// dimensions, strided concatenation (op_facts.h).
fakegpu_op_facts unvectorized(double elements, double bytes_per_element, int converted, int dims, int cat = 0) {
  fakegpu_op_facts op = memory_op(elements * bytes_per_element);
  op.dims[0] = 1;
  op.dims[1] = static_cast<int64_t>(elements);
  op.dims[2] = converted;
  op.dims[3] = dims;
  op.dims[4] = cat;
  return op;
}

TEST(KernelModel, ElementwiseKernelsThatCannotVectorizeAreBoundByTheSms) {
  const GpuRates& r = gpu_rates(h100());
  const double sms = h100().sm_count, n = 262144000;  // a Llama model's logits
  // bf16 into fp32: six bytes an element would stream in about 520 us; converting two operands an
  // element at a time takes longer, and an H200's faster memory gains it nothing.
  const fakegpu_op_facts upcast = unvectorized(n, 6, 2, 0);
  EXPECT_NEAR(gpu_us(upcast), r.kernel_us + n * 2 / r.unrolled_operand_per_us / sms, 0.01);
  EXPECT_GT(gpu_us(upcast), 1.4 * gpu_us(memory_op(n * 6)));
  EXPECT_EQ(estimate(h100(), upcast).bound, FAKEGPU_BOUND_COMPUTE);
  EXPECT_DOUBLE_EQ(gpu_us(upcast, *find_gpu_profile("h200")), gpu_us(upcast));
  // Strided loops (a broadcast operand times a tensor written in fp32) pay per element and per
  // dimension; more dimensions cost more.
  const double one = gpu_us(unvectorized(n, 4, 0, 1)), five = gpu_us(unvectorized(n, 4, 0, 5));
  EXPECT_NEAR(one, r.kernel_us + n * (1 / r.strided_element_per_us + 1 / r.strided_dim_per_us) / sms, 0.01);
  EXPECT_GT(five, one);
  EXPECT_NEAR(gpu_us(unvectorized(n, 4, 0, 0, 1)), r.kernel_us + n / r.strided_cat_per_us / sms, 0.01);
  // Where the bytes take longer than the SMs' work, the bytes set the time, as before.
  const double wide = 64;  // bytes an element: far more than the SMs' work
  EXPECT_DOUBLE_EQ(gpu_us(unvectorized(n, wide, 2, 0)), gpu_us(memory_op(n * wide)));
}

TEST(KernelModel, ANormsWeightGradientIsBoundByItsSumsNotItsBytes) {
  const GpuRates& r = gpu_rates(h100());
  fakegpu_op_facts backward{};
  backward.kind = FAKEGPU_OP_NORM_BACKWARD;
  backward.element_bytes = 4;
  backward.dims[0] = 32768;  // rows
  backward.dims[1] = 1024;   // width
  const double input_gradient = gpu_us(backward);
  backward.dims[2] = 1;  // and the weight's gradient
  const double both = gpu_us(backward);
  const double elements = 32768.0 * 1024;
  EXPECT_NEAR(both - input_gradient, 2 * r.kernel_us + 2 * elements / (r.norm_weight_grad_per_us * h100().sm_count),
              0.01);
  EXPECT_EQ(estimate(h100(), backward).kernels, 3);
  // The H200's faster memory speeds up the input gradient, not the sums.
  const GpuProfile& h200 = *find_gpu_profile("h200");
  fakegpu_op_facts input_only = backward;
  input_only.dims[2] = 0;
  EXPECT_LT(gpu_us(input_only, h200), 0.8 * input_gradient);
  EXPECT_NEAR(gpu_us(backward, h200) - gpu_us(input_only, h200), both - input_gradient, 0.01);
}

TEST(KernelModel, TheHostPaysForEveryLaunchAndMoreWithAutograd) {
  const HostRates& h = default_host_rates();
  fakegpu_op_facts op = memory_op(1e6);
  EXPECT_DOUBLE_EQ(estimate(h100(), op).host_us, h.op_us);
  op.flags = FAKEGPU_OP_RECORDS_GRAD;
  EXPECT_DOUBLE_EQ(estimate(h100(), op).host_us, h.op_us + h.autograd_node_us);
  op.flags = FAKEGPU_OP_IN_BACKWARD;
  EXPECT_DOUBLE_EQ(estimate(h100(), op).host_us, h.backward_op_us);
  EXPECT_DOUBLE_EQ(estimate(h100(), gemm(64, 64, 64)).host_us, h.op_us + h.gemm_extra_us);
  EXPECT_DOUBLE_EQ(host_event_us(HostEvent::kOptimizerStep, 30), h.optimizer_step_us + 30 * h.optimizer_state_us);
  EXPECT_DOUBLE_EQ(host_event_us(HostEvent::kBackwardCall, 0), h.backward_call_us);
  // The host's cost does not depend on the GPU, only on how fast the node's CPUs are.
  EXPECT_DOUBLE_EQ(estimate(*find_gpu_profile("a100"), op).host_us, estimate(h100(), op).host_us);
  EXPECT_DOUBLE_EQ(estimate(h100(), op, 2.0).host_us, h.backward_op_us / 2);
  EXPECT_DOUBLE_EQ(host_event_us(HostEvent::kBackwardCall, 0, 0.5), 2 * h.backward_call_us);
  EXPECT_DOUBLE_EQ(estimate(h100(), op, 2.0).gpu_us, estimate(h100(), op).gpu_us);
}

TEST(KernelModel, SharesCarryToOtherGpusByTheirPeaks) {
  // The same chip with faster memory: a large memory-bound kernel speeds up by the bandwidth.
  const GpuProfile& h200 = *find_gpu_profile("h200");
  const double fixed = gpu_rates(h100()).kernel_us;
  const double ratio = (gpu_us(memory_op(4e9)) - fixed) / (gpu_us(memory_op(4e9), h200) - fixed);
  EXPECT_NEAR(ratio, memory_gbytes_per_s(h200) / memory_gbytes_per_s(h100()), 1e-6);
  // A GPU with half the tensor-core peak takes about twice as long on a large product.
  const GpuProfile& a100 = *find_gpu_profile("a100");
  const double compute_ratio = gpu_us(gemm(8192, 8192, 8192), a100) / gpu_us(gemm(8192, 8192, 8192));
  EXPECT_GT(compute_ratio, 0.8 * h100().half_tflops / a100.half_tflops);
}

// A GPU measured by fgpu calibrate brings its own rates: each moves the kernels it governs and
// nothing else (row-wise kernels have a share of their own, apart from elementwise ones).
TEST(KernelModel, AMeasuredGpusOwnRatesAreTheOnesUsed) {
  GpuRates measured = gpu_rates(h100());
  measured.memory_share /= 2;
  measured.row_memory_share /= 4;
  GpuProfile box = h100();
  box.name = "h100-box";
  box.rates = &measured;
  const GpuProfile& registered = *register_gpu_profile(box);
  const double fixed = measured.kernel_us;
  EXPECT_NEAR((gpu_us(memory_op(4e9), registered) - fixed) / (gpu_us(memory_op(4e9)) - fixed), 2.0, 1e-9);
  fakegpu_op_facts norm{};
  norm.kind = FAKEGPU_OP_NORM;
  norm.element_bytes = 2;
  norm.row_alignment = 16;
  norm.dims[0] = 65536;
  norm.dims[1] = 8192;
  norm.bytes = 2.0 * 2 * 65536 * 8192;
  EXPECT_NEAR((gpu_us(norm, registered) - fixed) / (gpu_us(norm) - fixed), 4.0, 1e-9);
  EXPECT_DOUBLE_EQ(gpu_us(gemm(8192, 8192, 8192), registered), gpu_us(gemm(8192, 8192, 8192)));
}

TEST(KernelModel, OperatorsThatLaunchNothingCostTheHostOnly) {
  fakegpu_op_facts op{};
  op.kind = FAKEGPU_OP_NO_KERNEL;
  op.row_alignment = 16;
  const fakegpu_op_cost c = estimate(h100(), op);
  EXPECT_EQ(c.kernels, 0);
  EXPECT_EQ(c.gpu_us, 0);
  EXPECT_GT(c.host_us, 0);
}

}  // namespace
}  // namespace fakegpu::kernels
