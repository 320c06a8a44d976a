// State shared by the fake runtime's API files.
#pragma once

#include <cuda_runtime.h>

#define FAKECUDA_API extern "C" __attribute__((visibility("default")))

namespace fakegpu::cuda {

int device_count();
int& current_device();  // per thread, as in CUDA
// Records an error for cudaGetLastError, as the real runtime does, and returns it.
cudaError_t fail(cudaError_t e);

}  // namespace fakegpu::cuda
