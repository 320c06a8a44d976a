// The CUDA context's share of a device's memory (memory_model.h's rules): charged when the
// device's primary context becomes active, and again as libraries' kernels load into it.
#pragma once

namespace fakegpu::cuda {

// Charges the context's own memory: mark_context_active calls it once per device, when the
// device's primary context becomes active.
void charge_context(int device);
// Charges a fakegpu_library's kernels, with lazy or eager loading as CUDA_MODULE_LOADING says;
// once per device and library. Returns a cudaError_t.
int load_library(int device, int library);

}  // namespace fakegpu::cuda
