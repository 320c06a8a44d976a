#include "memory_model.h"

namespace fakegpu::memory {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kKiB = uint64_t{1} << 10;

// The context's fixed part: the driver's structures, the 8 MiB device malloc heap and the 1 MiB
// printf FIFO. Measured on an H100 and an H200 (132 SMs of 2048 threads; driver 580, CUDA 13.0,
// PyTorch 2.11: verification/steps/): 527 MiB in use once PyTorch has made its context, before
// any kernel ran, of which the stack reservation below is 264 MiB.
constexpr uint64_t kContextFixed = 263 * kMiB;
constexpr uint64_t kStackPerThread = 1 * kKiB;  // cudaLimitStackSize's default

// Kernels loaded into the context after it is made, measured on the same GPUs as the memory in
// use after the steps of verification/steps/, less the context and PyTorch's pool. Lazily (CUDA's
// default): PyTorch's forward kernels about 24 MiB (inference with cuBLAS 158 to 168 MiB in all);
// its backward and optimizer kernels 68 more (a stack of norms trained without a product: 92);
// cuBLAS's about 140 at its first product, however few shapes follow (training with products:
// 224 to 240 in all). Eagerly (CUDA_MODULE_LOADING=EAGER), the whole library's code for the GPU:
// PyTorch's 732 MiB more as its context is made, cuBLAS's about 480 at its first product. NCCL's
// not measured: its collective kernels' share of its library's size.
struct ModuleFigures {
  uint64_t lazy;
  uint64_t eager;
};
// By Library, in its order.
constexpr ModuleFigures kModules[] = {
    {24 * kMiB, 732 * kMiB},  // PyTorch
    {68 * kMiB, 0},           // PyTorch's backward and optimizer kernels: eagerly, loaded with the rest
    {140 * kMiB, 480 * kMiB}, // cuBLAS
    {40 * kMiB, 120 * kMiB},  // NCCL
};

}  // namespace

uint64_t context_bytes(const GpuProfile& gpu) {
  return kContextFixed + kStackPerThread * static_cast<uint64_t>(gpu.max_threads_per_sm) * gpu.sm_count;
}

uint64_t module_bytes(Library library, bool lazy_loading) {
  const ModuleFigures& f = kModules[static_cast<int>(library)];
  return lazy_loading ? f.lazy : f.eager;
}

}  // namespace fakegpu::memory
