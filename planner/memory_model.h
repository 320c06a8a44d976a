// The memory model: what the CUDA context takes on a GPU, by the driver's rules, and the
// kernels that load into it as PyTorch, cuBLAS and NCCL are first used. Pure: a GPU profile and
// a setting in, bytes out; the fake runtime charges the context with it. (cuBLAS's workspaces
// are PyTorch's allocations, which its hook makes: fakegpu/torch_hook/memory.py. NCCL's buffers follow
// NCCL's rules over a communicator's channels: nccl_memory.h.)
#pragma once

#include <cstdint>

#include "gpu_profiles.h"

namespace fakegpu::memory {

// ---- the CUDA context ----
// What the context takes when it is made: the driver's own structures, the device heap and
// printf buffer, and local memory for the stack of every thread the GPU can hold at once
// (cudaLimitStackSize, 1 KiB by default, times threads per SM times SMs).
uint64_t context_bytes(const GpuProfile& gpu);
// Kernels the context loads later, as a program first uses them: with lazy loading (CUDA's
// default, and what PyTorch sets) only the kernels a job runs, otherwise every kernel of the
// library at once. PyTorch's backward and optimizer kernels load apart, when a backward pass first
// runs (eagerly, with the rest of PyTorch's).
enum class Library { kPyTorch, kPyTorchTraining, kCublas, kNccl };
uint64_t module_bytes(Library library, bool lazy_loading);

}  // namespace fakegpu::memory
