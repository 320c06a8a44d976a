// libfakegpu-hybrid-devices.so: in hybrid mode, where a node's ranks outnumber this machine's
// GPUs, each rank sees the node's devices (FAKEGPU_HYBRID_DEVICES of them) and device d runs on
// GPU d % (GPUs here). A program that selects its LOCAL_RANK then runs unchanged, PyTorch's too.
//
// fgpu preloads it ahead of NVIDIA's runtime, so its definitions of the runtime's calls that name
// a device come first (this file); each maps the device and forwards to the runtime's own. A
// thread keeps the device it set, so cudaGetDevice answers what the program chose, not the GPU
// under it; a thread that set none is on device 0, as with CUDA. The driver's calls that name a
// device are mapped the same way (hybrid_driver.cpp).
#include "cuda_runtime.h"
#include "device_map.h"

using namespace fakegpu::hybrid;

// The runtime's definition of `fn` called with the arguments given.
#define REAL(fn, ...) CALL_NEXT(kRuntime, cudaErrorNotSupported, fn, __VA_ARGS__)

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  if (!sharing()) return REAL(cudaGetDeviceCount, count);
  if (!count) return cudaErrorInvalidValue;
  int gpus = 0;
  cudaError_t rc = REAL(cudaGetDeviceCount, &gpus);
  if (rc == cudaSuccess) *count = shown_devices();
  return rc;
}

EXPORT cudaError_t cudaSetDevice(int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  cudaError_t rc = REAL(cudaSetDevice, gpu_of(device));
  if (rc == cudaSuccess) choose(device);
  return rc;
}

EXPORT cudaError_t cudaGetDevice(int* device) {
  if (!device) return cudaErrorInvalidValue;
  int gpu = 0;
  cudaError_t rc = REAL(cudaGetDevice, &gpu);
  if (rc == cudaSuccess) *device = device_of(gpu);
  return rc;
}

EXPORT cudaError_t cudaInitDevice(int device, unsigned int device_flags, unsigned int flags) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaInitDevice, gpu_of(device), device_flags, flags);
}

// CUDA 12 binaries call the _v2 name, CUDA 13 ones the plain one; each forwards to its own.
EXPORT cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaGetDeviceProperties, prop, gpu_of(device));
}

EXPORT cudaError_t cudaGetDeviceProperties_v2(cudaDeviceProp* prop, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaGetDeviceProperties_v2, prop, gpu_of(device));
}

EXPORT cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaDeviceGetAttribute, value, attr, gpu_of(device));
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (!valid(device)) return cudaErrorInvalidDevice;
  return REAL(cudaDeviceGetPCIBusId, bus_id, len, gpu_of(device));
}

EXPORT cudaError_t cudaDeviceGetByPCIBusId(int* device, const char* bus_id) {
  if (!device) return cudaErrorInvalidValue;
  int gpu = 0;
  cudaError_t rc = REAL(cudaDeviceGetByPCIBusId, &gpu, bus_id);
  if (rc == cudaSuccess) *device = device_of(gpu);
  return rc;
}

// Two devices on one GPU share its memory: each reaches the other's, with nothing to enable.
EXPORT cudaError_t cudaDeviceCanAccessPeer(int* can, int device, int peer) {
  if (!valid(device) || !valid(peer)) return cudaErrorInvalidDevice;
  if (can && gpu_of(device) == gpu_of(peer) && device != peer) {
    *can = 1;
    return cudaSuccess;
  }
  return REAL(cudaDeviceCanAccessPeer, can, gpu_of(device), gpu_of(peer));
}

EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
  if (!valid(peer)) return cudaErrorInvalidDevice;
  int gpu = 0;
  if (cudaGetDevice(&gpu) == cudaSuccess && gpu_of(gpu) == gpu_of(peer)) return cudaSuccess;
  return REAL(cudaDeviceEnablePeerAccess, gpu_of(peer), flags);
}

EXPORT cudaError_t cudaDeviceDisablePeerAccess(int peer) {
  if (!valid(peer)) return cudaErrorInvalidDevice;
  int gpu = 0;
  if (cudaGetDevice(&gpu) == cudaSuccess && gpu_of(gpu) == gpu_of(peer)) return cudaSuccess;
  return REAL(cudaDeviceDisablePeerAccess, gpu_of(peer));
}

EXPORT cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, size_t count) {
  if (!valid(dst_device) || !valid(src_device)) return cudaErrorInvalidDevice;
  return REAL(cudaMemcpyPeer, dst, gpu_of(dst_device), src, gpu_of(src_device), count);
}

EXPORT cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device, size_t count,
                                       cudaStream_t stream) {
  if (!valid(dst_device) || !valid(src_device)) return cudaErrorInvalidDevice;
  return REAL(cudaMemcpyPeerAsync, dst, gpu_of(dst_device), src, gpu_of(src_device), count, stream);
}

EXPORT cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  cudaError_t rc = REAL(cudaPointerGetAttributes, attributes, ptr);
  if (rc == cudaSuccess && attributes && attributes->device >= 0) attributes->device = device_of(attributes->device);
  return rc;
}

EXPORT cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  cudaError_t rc = REAL(cudaStreamGetDevice, stream, device);
  if (rc == cudaSuccess && device) *device = device_of(*device);
  return rc;
}

// The GPU under a device the program names, for fakegpu's runtime where it stands in for
// NVIDIA's in tests (its runtime_device()): the NCCL stub and the PyTorch hook name the
// program's devices to it directly, through a bridge this library does not see.
EXPORT int fakegpu_hybrid_gpu_of(int device) { return valid(device) ? gpu_of(device) : device; }
