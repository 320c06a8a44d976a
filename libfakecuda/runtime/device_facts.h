// Everything the runtime reports about a virtual device, computed in one place, so that
// cudaGetDeviceProperties and cudaDeviceGetAttribute can never disagree.
#pragma once

#include <cuda_runtime.h>

#include <optional>

#include "devices.h"

namespace fakegpu::cuda {

// The value of an attribute for a device; nullopt for an attribute fakegpu does not know.
std::optional<int> device_attribute(const VirtualDevice& d, int attr);
// Fills the CUDA 13 layout (the one in our header).
void fill_properties(const VirtualDevice& d, cudaDeviceProp* out);
// Fills the CUDA 12 layout (cudaGetDeviceProperties_v2 of CUDA 12), or its first `bytes`:
// CUDA 12's unversioned cudaGetDeviceProperties fills the 728-byte CUDA 11 prefix.
void fill_properties_cuda12(const VirtualDevice& d, void* out, size_t bytes);
constexpr size_t kCuda12PropertiesBytes = 1032;
constexpr size_t kCuda11PropertiesBytes = 728;

}  // namespace fakegpu::cuda
