// State and helpers shared by the fake runtime's API files.
#pragma once

#include <cuda_runtime.h>

#include <new>

#include "log_once.h"

#define FAKECUDA_API extern "C" __attribute__((visibility("default")))

namespace fakegpu::cuda {

struct VirtualDevice;

int device_count();
int& current_device();  // per thread, as in CUDA
// The device with this ordinal; throws cudaErrorInvalidDevice, or cudaErrorNoDevice when there
// are none.
const VirtualDevice& device_or_throw(int ordinal);
// The calling thread's current device, likewise.
const VirtualDevice& current();
// A device's primary context becomes active the first time the process uses the device (sets
// it current or allocates on it), as with NVIDIA's runtime; the driver API reports it.
void mark_context_active(int device);
// Records an error for cudaGetLastError, as the real runtime does, and returns it.
cudaError_t fail(cudaError_t e);
using fakegpu::log_once;  // "fakegpu: <api>: <what>" once per api name, on stderr

// Runs an API body; a thrown cudaError_t becomes its result (and the last error). This and
// the stub's guarded() are the only places errors cross the C boundary.
template <typename Body>
cudaError_t guarded(Body&& body) {
  try {
    body();
    return cudaSuccess;
  } catch (cudaError_t e) {
    return fail(e);
  } catch (const std::bad_alloc&) {
    return fail(cudaErrorMemoryAllocation);
  } catch (...) {
    return fail(cudaErrorUnknown);
  }
}

}  // namespace fakegpu::cuda
