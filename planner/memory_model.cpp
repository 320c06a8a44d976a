#include "memory_model.h"

namespace fakegpu::memory {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kKiB = uint64_t{1} << 10;

// The context's fixed part: the driver's structures, the 8 MiB device malloc heap and the 1 MiB
// printf FIFO. Read off public figures for CUDA 12/13 contexts (a bare PyTorch context of 426
// MiB on a 142-SM Ada part with 1536 threads per SM, of which 213 MiB is stack), the rest of the
// context being the stack reservation below.
constexpr uint64_t kContextFixed = 200 * kMiB;
constexpr uint64_t kStackPerThread = 1 * kKiB;  // cudaLimitStackSize's default

// Kernels loaded into the context after it is made. Lazily: what a training or inference step
// of a typical model touches (PyTorch's elementwise, reduction, norm and optimizer kernels;
// cuBLAS's GEMM kernels for the shapes it meets; NCCL's collective kernels). Eagerly: the whole
// library's code for the GPU's architecture (PyTorch's: a context of 666 MB eagerly against 287
// MB lazily, pytorch/pytorch#86509). Together with the context, lazily about 0.8 GB on an H100
// after a training step, as measured there.
struct ModuleFigures {
  uint64_t lazy;
  uint64_t eager;
};
constexpr ModuleFigures kPyTorchModules{160 * kMiB, 380 * kMiB};
constexpr ModuleFigures kCublasModules{80 * kMiB, 400 * kMiB};
constexpr ModuleFigures kNcclModules{40 * kMiB, 120 * kMiB};

}  // namespace

uint64_t context_bytes(const GpuProfile& gpu) {
  return kContextFixed + kStackPerThread * static_cast<uint64_t>(gpu.max_threads_per_sm) * gpu.sm_count;
}

uint64_t module_bytes(Library library, bool lazy_loading) {
  const ModuleFigures& f = library == Library::kPyTorch  ? kPyTorchModules
                           : library == Library::kCublas ? kCublasModules
                                                         : kNcclModules;
  return lazy_loading ? f.lazy : f.eager;
}

}  // namespace fakegpu::memory
