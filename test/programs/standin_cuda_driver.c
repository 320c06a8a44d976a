/* A stand-in for NVIDIA's driver library, libcuda.so.1, that reports one GPU. The hybrid-mode
 * test puts it on fgpu's library path, so that fgpu's GPU check passes on a machine without
 * one; fakegpu's runtime then stands in for NVIDIA's. It answers only the calls fgpu makes. */

#define EXPORT __attribute__((visibility("default")))

EXPORT int cuInit(unsigned int flags) {
  (void)flags;
  return 0; /* CUDA_SUCCESS */
}

EXPORT int cuDeviceGetCount(int* count) {
  *count = 1;
  return 0;
}
