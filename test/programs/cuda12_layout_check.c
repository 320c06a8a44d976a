/* fakegpu's libcudart.so.12 fills CUDA 12's structs, not the CUDA 13 ones in our header. A
 * CUDA 12 program's header maps cudaGetDeviceProperties to cudaGetDeviceProperties_v2 (the
 * 1032-byte layout); old binaries calling the unversioned symbol get the 728-byte CUDA 11
 * prefix, and cudaPointerAttributes is 24 bytes. Writing more would corrupt the caller's stack,
 * so this checks raw byte offsets and sentinels rather than trusting any header.
 * Prints "cuda12 layout: OK" or names each failed check. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

cudaError_t cudaGetDeviceProperties_v2(void* prop, int device);

#include "expect.h"

enum { kProp12 = 1032, kProp11 = 728, kPtrAttr12 = 24, kSlack = 256 };

static int i32(const unsigned char* b, size_t off) {
  int v;
  memcpy(&v, b + off, sizeof v);
  return v;
}
static size_t u64(const unsigned char* b, size_t off) {
  size_t v;
  memcpy(&v, b + off, sizeof v);
  return v;
}
static int attr(enum cudaDeviceAttr a) {
  int v = -1;
  EXPECT(cudaDeviceGetAttribute(&v, a, 1) == cudaSuccess, "attribute %d", (int)a);
  return v;
}
static void untouched(const unsigned char* b, size_t from, size_t to, const char* what) {
  for (size_t i = from; i < to; ++i)
    if (b[i] != 0xAB) {
      EXPECT(0, "%s wrote byte %zu (limit %zu)", what, i, from);
      return;
    }
}

int main(void) {
  int version = 0;
  EXPECT(cudaRuntimeGetVersion(&version) == cudaSuccess && version == 12000, "runtime version %d", version);

  /* Device 1, so that pciBusID (2) is not a value a zeroed or stale buffer could hold. */
  static unsigned char buf[kProp12 + kSlack];
  memset(buf, 0xAB, sizeof buf);
  EXPECT(cudaGetDeviceProperties_v2(buf, 1) == cudaSuccess, "cudaGetDeviceProperties_v2 failed");
  EXPECT(strncmp((const char*)buf, "NVIDIA", 6) == 0, "name @0: \"%.32s\"", (const char*)buf);
  size_t mem = 0;
  EXPECT(cudaSetDevice(1) == cudaSuccess && cudaMemGetInfo(NULL, &mem) == cudaSuccess, "cudaMemGetInfo");
  EXPECT(u64(buf, 288) == mem && mem > 0, "totalGlobalMem @288: %zu, expected %zu", u64(buf, 288), mem);
  EXPECT(i32(buf, 348) == attr(cudaDevAttrClockRate) && i32(buf, 348) > 0, "clockRate @348: %d", i32(buf, 348));
  EXPECT(i32(buf, 360) == attr(cudaDevAttrComputeCapabilityMajor), "major @360: %d", i32(buf, 360));
  EXPECT(i32(buf, 364) == attr(cudaDevAttrComputeCapabilityMinor), "minor @364: %d", i32(buf, 364));
  EXPECT(i32(buf, 388) == attr(cudaDevAttrMultiProcessorCount), "multiProcessorCount @388: %d", i32(buf, 388));
  EXPECT(i32(buf, 584) == 2 && i32(buf, 584) == attr(cudaDevAttrPciBusId), "pciBusID @584: %d", i32(buf, 584));
  EXPECT(i32(buf, 592) == attr(cudaDevAttrPciDomainId), "pciDomainID @592: %d", i32(buf, 592));
  untouched(buf, kProp12, sizeof buf, "cudaGetDeviceProperties_v2");

  /* The unversioned export: the CUDA 11 prefix only. */
  memset(buf, 0xAB, sizeof buf);
  EXPECT(cudaGetDeviceProperties((struct cudaDeviceProp*)buf, 1) == cudaSuccess, "cudaGetDeviceProperties failed");
  EXPECT(u64(buf, 288) == mem, "unversioned totalGlobalMem @288: %zu", u64(buf, 288));
  EXPECT(i32(buf, 388) == attr(cudaDevAttrMultiProcessorCount), "unversioned multiProcessorCount @388");
  untouched(buf, kProp11, sizeof buf, "unversioned cudaGetDeviceProperties");

  /* cudaPointerGetAttributes: type, device, devicePointer, hostPointer, nothing after. */
  void* d = NULL;
  EXPECT(cudaMalloc(&d, 64) == cudaSuccess, "cudaMalloc");
  memset(buf, 0xAB, sizeof buf);
  EXPECT(cudaPointerGetAttributes((struct cudaPointerAttributes*)buf, d) == cudaSuccess, "cudaPointerGetAttributes");
  EXPECT(i32(buf, 0) == cudaMemoryTypeDevice, "type @0: %d", i32(buf, 0));
  EXPECT(i32(buf, 4) == 1, "device @4: %d", i32(buf, 4));
  EXPECT(u64(buf, 8) == (size_t)(uintptr_t)d, "devicePointer @8");
  untouched(buf, kPtrAttr12, sizeof buf, "cudaPointerGetAttributes");
  cudaFree(d);

  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("cuda12 layout: OK\n");
  return 0;
}
