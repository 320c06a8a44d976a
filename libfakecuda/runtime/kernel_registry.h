// What nvcc-generated code registers at start-up: kernels (by their host stub's address) and
// __device__ variables (whose storage, in fakegpu, is their host shadow).
#pragma once

#include <cstddef>
#include <cstdint>

namespace fakegpu::cuda {

bool registered_function(const void* host_fun);
// Whether `host_var` is a registered __device__ variable; its size in *size.
bool registered_variable(const void* host_var, size_t* size);
uint64_t kernel_launches();

}  // namespace fakegpu::cuda
