// The runtime's side of the bridge to fakegpu's other libraries (fake_cuda_bridge.h): the
// functions its table hands out, each defined beside the state it reads. bridge.cpp fills the
// table and exports fakegpu_cuda_bridge, the only name those libraries look up.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "runtime_state.h"

namespace fakegpu::cuda {

// runtime.cpp
cudaError_t device_identity(int device, char name[256], unsigned char uuid[16], uint64_t* memory_bytes);
bool primary_context_active(int device);
// memory_api.cpp
int find_segment(const void* ptr, size_t len, uint64_t* segment_id, uint64_t* offset, int* fd, uint64_t* segment_size);
int allocation_of(const void* ptr, void** base, size_t* bytes, int* kind, int* device);
// virtual_memory.cpp
void* vmm_reserve(size_t bytes);
int vmm_free(void* base);
int vmm_create(size_t bytes, int device, uint64_t* handle);
int vmm_release(uint64_t handle);
int vmm_map(void* at, size_t bytes, uint64_t handle);
int vmm_unmap(void* at, size_t bytes);
size_t vmm_granularity();
uint64_t device_memory_used(int device);

}  // namespace fakegpu::cuda

// stream_api.cpp; also in the PyTorch hook's table (compute_time.cpp).
FAKECUDA_API cudaError_t fakegpu_cuda_drain_stream(cudaStream_t stream);
// Marks where a training step begins or ends on the stream (the PyTorch hook's table).
FAKECUDA_API cudaError_t fakegpu_cuda_mark_step(cudaStream_t stream, int begin);
