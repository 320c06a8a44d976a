#include "device_facts.h"

#include <cstddef>
#include <algorithm>
#include <cstring>

namespace fakegpu::cuda {

namespace {

// Limits every GPU since Volta shares.
constexpr int kMaxThreadsPerBlock = 1024;
constexpr int kMaxBlockDim[3] = {1024, 1024, 64};
constexpr int kMaxGridDim[3] = {2147483647, 65535, 65535};
constexpr int kSharedPerBlock = 48 << 10;
constexpr int kConstMemory = 64 << 10;
constexpr int kRegisters = 64 << 10;
constexpr int kWarpSize = 32;
constexpr int kMaxPitch = 2147483647;
constexpr int kTextureAlignment = 512;
constexpr int kTexturePitchAlignment = 32;

bool hopper_or_newer(const GpuProfile& p) { return p.cc_major >= 9; }
bool ampere_or_newer(const GpuProfile& p) { return p.cc_major >= 8; }

int max_blocks_per_sm(const GpuProfile& p) {
  return p.cc_major == 8 && p.cc_minor == 9 ? 24 : 32;
}

int persisting_l2(const GpuProfile& p) { return ampere_or_newer(p) ? (p.l2_mib << 20) / 4 * 3 : 0; }

// Texture and surface limits (the same on every GPU fakegpu models).
struct TextureLimits {
  int tex1d = 131072, tex1d_mipmap = 32768, tex2d[2] = {131072, 65536}, tex2d_mipmap[2] = {32768, 32768};
  int tex2d_linear[3] = {131072, 65000, 2097120}, tex2d_gather[2] = {32768, 32768};
  int tex3d[3] = {16384, 16384, 16384}, tex3d_alt[3] = {8192, 8192, 32768}, cubemap = 32768;
  int tex1d_layered[2] = {32768, 2048}, tex2d_layered[3] = {32768, 32768, 2048}, cubemap_layered[2] = {32768, 2046};
  int surf1d = 32768, surf2d[2] = {131072, 65536}, surf3d[3] = {16384, 16384, 16384};
  int surf1d_layered[2] = {32768, 2048}, surf2d_layered[3] = {32768, 32768, 2048};
  int surf_cubemap = 32768, surf_cubemap_layered[2] = {32768, 2046};
};
const TextureLimits kTex;

}  // namespace

std::optional<int> device_attribute(const VirtualDevice& d, int attr) {
  const GpuProfile& p = *d.profile;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: return kMaxThreadsPerBlock;
    case cudaDevAttrMaxBlockDimX: return kMaxBlockDim[0];
    case cudaDevAttrMaxBlockDimY: return kMaxBlockDim[1];
    case cudaDevAttrMaxBlockDimZ: return kMaxBlockDim[2];
    case cudaDevAttrMaxGridDimX: return kMaxGridDim[0];
    case cudaDevAttrMaxGridDimY: return kMaxGridDim[1];
    case cudaDevAttrMaxGridDimZ: return kMaxGridDim[2];
    case cudaDevAttrMaxSharedMemoryPerBlock: return kSharedPerBlock;
    case cudaDevAttrTotalConstantMemory: return kConstMemory;
    case cudaDevAttrWarpSize: return kWarpSize;
    case cudaDevAttrMaxPitch: return kMaxPitch;
    case cudaDevAttrMaxRegistersPerBlock: return kRegisters;
    case cudaDevAttrClockRate: return p.clock_mhz * 1000;  // kHz
    case cudaDevAttrTextureAlignment: return kTextureAlignment;
    case cudaDevAttrGpuOverlap: return 1;
    case cudaDevAttrMultiProcessorCount: return p.sm_count;
    case cudaDevAttrKernelExecTimeout: return 0;
    case cudaDevAttrIntegrated: return 0;
    case cudaDevAttrCanMapHostMemory: return 1;
    case cudaDevAttrComputeMode: return 0;  // default
    case 21: return kTex.tex1d;
    case 22: return kTex.tex2d[0];
    case 23: return kTex.tex2d[1];
    case 24: return kTex.tex3d[0];
    case 25: return kTex.tex3d[1];
    case 26: return kTex.tex3d[2];
    case 27: return kTex.tex2d_layered[0];
    case 28: return kTex.tex2d_layered[1];
    case 29: return kTex.tex2d_layered[2];
    case 30: return kTextureAlignment;  // surface alignment
    case cudaDevAttrConcurrentKernels: return 1;
    case cudaDevAttrEccEnabled: return 1;
    case cudaDevAttrPciBusId: return d.pci_bus;
    case cudaDevAttrPciDeviceId: return 0;
    case cudaDevAttrTccDriver: return 0;
    case cudaDevAttrMemoryClockRate: return p.memory_clock_mhz * 1000;  // kHz
    case cudaDevAttrGlobalMemoryBusWidth: return p.memory_bus_bits;
    case cudaDevAttrL2CacheSize: return p.l2_mib << 20;
    case cudaDevAttrMaxThreadsPerMultiProcessor: return p.max_threads_per_sm;
    case cudaDevAttrAsyncEngineCount: return 2;
    case cudaDevAttrUnifiedAddressing: return 1;
    case 42: return kTex.tex1d_layered[0];
    case 43: return kTex.tex1d_layered[1];
    case 45: return kTex.tex2d_gather[0];
    case 46: return kTex.tex2d_gather[1];
    case 47: return kTex.tex3d_alt[0];
    case 48: return kTex.tex3d_alt[1];
    case 49: return kTex.tex3d_alt[2];
    case cudaDevAttrPciDomainId: return d.pci_domain;
    case cudaDevAttrTexturePitchAlignment: return kTexturePitchAlignment;
    case 52: return kTex.cubemap;
    case 53: return kTex.cubemap_layered[0];
    case 54: return kTex.cubemap_layered[1];
    case 55: return kTex.surf1d;
    case 56: return kTex.surf2d[0];
    case 57: return kTex.surf2d[1];
    case 58: return kTex.surf3d[0];
    case 59: return kTex.surf3d[1];
    case 60: return kTex.surf3d[2];
    case 61: return kTex.surf1d_layered[0];
    case 62: return kTex.surf1d_layered[1];
    case 63: return kTex.surf2d_layered[0];
    case 64: return kTex.surf2d_layered[1];
    case 65: return kTex.surf2d_layered[2];
    case 66: return kTex.surf_cubemap;
    case 67: return kTex.surf_cubemap_layered[0];
    case 68: return kTex.surf_cubemap_layered[1];
    case 69: return kTex.tex1d;  // 1D linear: reported for compatibility
    case 70: return kTex.tex2d_linear[0];
    case 71: return kTex.tex2d_linear[1];
    case 72: return kTex.tex2d_linear[2];
    case 73: return kTex.tex2d_mipmap[0];
    case 74: return kTex.tex2d_mipmap[1];
    case cudaDevAttrComputeCapabilityMajor: return p.cc_major;
    case cudaDevAttrComputeCapabilityMinor: return p.cc_minor;
    case 77: return kTex.tex1d_mipmap;
    case cudaDevAttrStreamPrioritiesSupported: return 1;
    case cudaDevAttrGlobalL1CacheSupported: return 1;
    case cudaDevAttrLocalL1CacheSupported: return 1;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: return p.smem_per_sm_kib << 10;
    case cudaDevAttrMaxRegistersPerMultiprocessor: return kRegisters;
    case cudaDevAttrManagedMemory: return 1;
    case cudaDevAttrIsMultiGpuBoard: return 0;
    case cudaDevAttrMultiGpuBoardGroupID: return d.local;
    case cudaDevAttrHostNativeAtomicSupported: return 0;
    case cudaDevAttrSingleToDoublePrecisionPerfRatio: return p.cc_major == 8 && p.cc_minor == 9 ? 64 : 2;
    case cudaDevAttrPageableMemoryAccess: return 0;
    case cudaDevAttrConcurrentManagedAccess: return 1;
    case cudaDevAttrComputePreemptionSupported: return 1;
    case cudaDevAttrCanUseHostPointerForRegisteredMem: return 1;
    case cudaDevAttrCooperativeLaunch: return 1;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: return p.smem_optin_kib << 10;
    case cudaDevAttrCanFlushRemoteWrites: return 0;
    case cudaDevAttrHostRegisterSupported: return 1;
    case cudaDevAttrPageableMemoryAccessUsesHostPageTables: return 0;
    case cudaDevAttrDirectManagedMemAccessFromHost: return 0;
    case cudaDevAttrMaxBlocksPerMultiprocessor: return max_blocks_per_sm(p);
    case cudaDevAttrMaxPersistingL2CacheSize: return persisting_l2(p);
    case cudaDevAttrMaxAccessPolicyWindowSize: return ampere_or_newer(p) ? 134213632 : 0;
    case cudaDevAttrReservedSharedMemoryPerBlock: return ampere_or_newer(p) ? 1024 : 0;
    case cudaDevAttrSparseCudaArraySupported: return 1;
    case cudaDevAttrHostRegisterReadOnlySupported: return 1;
    case cudaDevAttrTimelineSemaphoreInteropSupported: return 1;
    case cudaDevAttrMemoryPoolsSupported: return 1;
    case cudaDevAttrGPUDirectRDMASupported: return 1;
    case cudaDevAttrGPUDirectRDMAFlushWritesOptions: return 1;
    case cudaDevAttrGPUDirectRDMAWritesOrdering: return 0;
    case cudaDevAttrMemoryPoolSupportedHandleTypes: return 1;  // POSIX file descriptors
    case cudaDevAttrClusterLaunch: return hopper_or_newer(p) ? 1 : 0;
    case cudaDevAttrDeferredMappingCudaArraySupported: return hopper_or_newer(p) ? 1 : 0;
    case cudaDevAttrIpcEventSupport: return 0;
    case cudaDevAttrMemSyncDomainCount: return hopper_or_newer(p) ? 4 : 1;
    case cudaDevAttrNumaConfig: return 0;
    case cudaDevAttrNumaId: return -1;
    case cudaDevAttrMpsEnabled: return 0;
    case cudaDevAttrHostNumaId: return -1;
    default: return std::nullopt;
  }
}

// Fields both layouts share, by name.
template <typename Prop>
void fill_common(const VirtualDevice& d, Prop* out) {
  const GpuProfile& p = *d.profile;
  auto a = [&](int attr) { return *device_attribute(d, attr); };
  std::memset(out, 0, sizeof *out);
  std::strncpy(out->name, p.product_name, sizeof out->name - 1);
  // A stable uuid, unique across the cluster: "fgpu", then node and local index.
  const unsigned char uuid[16] = {'f', 'g', 'p', 'u', static_cast<unsigned char>(d.node >> 8),
                                  static_cast<unsigned char>(d.node), static_cast<unsigned char>(d.local)};
  std::memcpy(out->uuid.bytes, uuid, sizeof uuid);
  out->totalGlobalMem = d.memory_bytes;
  out->sharedMemPerBlock = a(cudaDevAttrMaxSharedMemoryPerBlock);
  out->regsPerBlock = a(cudaDevAttrMaxRegistersPerBlock);
  out->warpSize = a(cudaDevAttrWarpSize);
  out->memPitch = a(cudaDevAttrMaxPitch);
  out->maxThreadsPerBlock = a(cudaDevAttrMaxThreadsPerBlock);
  for (int i = 0; i < 3; ++i) {
    out->maxThreadsDim[i] = kMaxBlockDim[i];
    out->maxGridSize[i] = kMaxGridDim[i];
  }
  out->totalConstMem = a(cudaDevAttrTotalConstantMemory);
  out->major = p.cc_major;
  out->minor = p.cc_minor;
  out->textureAlignment = a(cudaDevAttrTextureAlignment);
  out->texturePitchAlignment = a(cudaDevAttrTexturePitchAlignment);
  out->multiProcessorCount = p.sm_count;
  out->integrated = a(cudaDevAttrIntegrated);
  out->canMapHostMemory = a(cudaDevAttrCanMapHostMemory);
  out->maxTexture1D = kTex.tex1d;
  out->maxTexture1DMipmap = kTex.tex1d_mipmap;
  std::memcpy(out->maxTexture2D, kTex.tex2d, sizeof kTex.tex2d);
  std::memcpy(out->maxTexture2DMipmap, kTex.tex2d_mipmap, sizeof kTex.tex2d_mipmap);
  std::memcpy(out->maxTexture2DLinear, kTex.tex2d_linear, sizeof kTex.tex2d_linear);
  std::memcpy(out->maxTexture2DGather, kTex.tex2d_gather, sizeof kTex.tex2d_gather);
  std::memcpy(out->maxTexture3D, kTex.tex3d, sizeof kTex.tex3d);
  std::memcpy(out->maxTexture3DAlt, kTex.tex3d_alt, sizeof kTex.tex3d_alt);
  out->maxTextureCubemap = kTex.cubemap;
  std::memcpy(out->maxTexture1DLayered, kTex.tex1d_layered, sizeof kTex.tex1d_layered);
  std::memcpy(out->maxTexture2DLayered, kTex.tex2d_layered, sizeof kTex.tex2d_layered);
  std::memcpy(out->maxTextureCubemapLayered, kTex.cubemap_layered, sizeof kTex.cubemap_layered);
  out->maxSurface1D = kTex.surf1d;
  std::memcpy(out->maxSurface2D, kTex.surf2d, sizeof kTex.surf2d);
  std::memcpy(out->maxSurface3D, kTex.surf3d, sizeof kTex.surf3d);
  std::memcpy(out->maxSurface1DLayered, kTex.surf1d_layered, sizeof kTex.surf1d_layered);
  std::memcpy(out->maxSurface2DLayered, kTex.surf2d_layered, sizeof kTex.surf2d_layered);
  out->maxSurfaceCubemap = kTex.surf_cubemap;
  std::memcpy(out->maxSurfaceCubemapLayered, kTex.surf_cubemap_layered, sizeof kTex.surf_cubemap_layered);
  out->surfaceAlignment = kTextureAlignment;
  out->concurrentKernels = a(cudaDevAttrConcurrentKernels);
  out->ECCEnabled = a(cudaDevAttrEccEnabled);
  out->pciBusID = d.pci_bus;
  out->pciDeviceID = a(cudaDevAttrPciDeviceId);
  out->pciDomainID = d.pci_domain;
  out->tccDriver = a(cudaDevAttrTccDriver);
  out->asyncEngineCount = a(cudaDevAttrAsyncEngineCount);
  out->unifiedAddressing = a(cudaDevAttrUnifiedAddressing);
  out->memoryBusWidth = p.memory_bus_bits;
  out->l2CacheSize = a(cudaDevAttrL2CacheSize);
  out->persistingL2CacheMaxSize = a(cudaDevAttrMaxPersistingL2CacheSize);
  out->maxThreadsPerMultiProcessor = p.max_threads_per_sm;
  out->streamPrioritiesSupported = a(cudaDevAttrStreamPrioritiesSupported);
  out->globalL1CacheSupported = a(cudaDevAttrGlobalL1CacheSupported);
  out->localL1CacheSupported = a(cudaDevAttrLocalL1CacheSupported);
  out->sharedMemPerMultiprocessor = a(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
  out->regsPerMultiprocessor = a(cudaDevAttrMaxRegistersPerMultiprocessor);
  out->managedMemory = a(cudaDevAttrManagedMemory);
  out->isMultiGpuBoard = a(cudaDevAttrIsMultiGpuBoard);
  out->multiGpuBoardGroupID = a(cudaDevAttrMultiGpuBoardGroupID);
  out->hostNativeAtomicSupported = a(cudaDevAttrHostNativeAtomicSupported);
  out->pageableMemoryAccess = a(cudaDevAttrPageableMemoryAccess);
  out->concurrentManagedAccess = a(cudaDevAttrConcurrentManagedAccess);
  out->computePreemptionSupported = a(cudaDevAttrComputePreemptionSupported);
  out->canUseHostPointerForRegisteredMem = a(cudaDevAttrCanUseHostPointerForRegisteredMem);
  out->cooperativeLaunch = a(cudaDevAttrCooperativeLaunch);
  out->sharedMemPerBlockOptin = a(cudaDevAttrMaxSharedMemoryPerBlockOptin);
  out->pageableMemoryAccessUsesHostPageTables = a(cudaDevAttrPageableMemoryAccessUsesHostPageTables);
  out->directManagedMemAccessFromHost = a(cudaDevAttrDirectManagedMemAccessFromHost);
  out->maxBlocksPerMultiProcessor = a(cudaDevAttrMaxBlocksPerMultiprocessor);
  out->accessPolicyMaxWindowSize = a(cudaDevAttrMaxAccessPolicyWindowSize);
  out->reservedSharedMemPerBlock = a(cudaDevAttrReservedSharedMemoryPerBlock);
  out->hostRegisterSupported = a(cudaDevAttrHostRegisterSupported);
  out->sparseCudaArraySupported = a(cudaDevAttrSparseCudaArraySupported);
  out->hostRegisterReadOnlySupported = a(cudaDevAttrHostRegisterReadOnlySupported);
  out->timelineSemaphoreInteropSupported = a(cudaDevAttrTimelineSemaphoreInteropSupported);
  out->memoryPoolsSupported = a(cudaDevAttrMemoryPoolsSupported);
  out->gpuDirectRDMASupported = a(cudaDevAttrGPUDirectRDMASupported);
  out->gpuDirectRDMAFlushWritesOptions = a(cudaDevAttrGPUDirectRDMAFlushWritesOptions);
  out->gpuDirectRDMAWritesOrdering = a(cudaDevAttrGPUDirectRDMAWritesOrdering);
  out->memoryPoolSupportedHandleTypes = a(cudaDevAttrMemoryPoolSupportedHandleTypes);
  out->deferredMappingCudaArraySupported = a(cudaDevAttrDeferredMappingCudaArraySupported);
  out->ipcEventSupported = a(cudaDevAttrIpcEventSupport);
  out->clusterLaunch = a(cudaDevAttrClusterLaunch);
  out->unifiedFunctionPointers = 0;
}

}  // namespace fakegpu::cuda

namespace fakegpu::cuda {
namespace {

// CUDA 12's cudaDeviceProp (1032 bytes): CUDA 13 dropped clockRate, deviceOverlap,
// kernelExecTimeoutEnabled, computeMode, maxTexture1DLinear, memoryClockRate,
// singleToDoublePrecisionPerfRatio and cooperativeMultiDeviceLaunch, and took its NUMA and
// PCI id fields out of the reserved tail.
struct DeviceProp12 {
  char name[256];
  cudaUUID_t uuid;
  char luid[8];
  unsigned int luidDeviceNodeMask;
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  size_t memPitch;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  size_t totalConstMem;
  int major;
  int minor;
  size_t textureAlignment;
  size_t texturePitchAlignment;
  int deviceOverlap;
  int multiProcessorCount;
  int kernelExecTimeoutEnabled;
  int integrated;
  int canMapHostMemory;
  int computeMode;
  int maxTexture1D;
  int maxTexture1DMipmap;
  int maxTexture1DLinear;
  int maxTexture2D[2];
  int maxTexture2DMipmap[2];
  int maxTexture2DLinear[3];
  int maxTexture2DGather[2];
  int maxTexture3D[3];
  int maxTexture3DAlt[3];
  int maxTextureCubemap;
  int maxTexture1DLayered[2];
  int maxTexture2DLayered[3];
  int maxTextureCubemapLayered[2];
  int maxSurface1D;
  int maxSurface2D[2];
  int maxSurface3D[3];
  int maxSurface1DLayered[2];
  int maxSurface2DLayered[3];
  int maxSurfaceCubemap;
  int maxSurfaceCubemapLayered[2];
  size_t surfaceAlignment;
  int concurrentKernels;
  int ECCEnabled;
  int pciBusID;
  int pciDeviceID;
  int pciDomainID;
  int tccDriver;
  int asyncEngineCount;
  int unifiedAddressing;
  int memoryClockRate;
  int memoryBusWidth;
  int l2CacheSize;
  int persistingL2CacheMaxSize;
  int maxThreadsPerMultiProcessor;
  int streamPrioritiesSupported;
  int globalL1CacheSupported;
  int localL1CacheSupported;
  size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int managedMemory;
  int isMultiGpuBoard;
  int multiGpuBoardGroupID;
  int hostNativeAtomicSupported;
  int singleToDoublePrecisionPerfRatio;
  int pageableMemoryAccess;
  int concurrentManagedAccess;
  int computePreemptionSupported;
  int canUseHostPointerForRegisteredMem;
  int cooperativeLaunch;
  int cooperativeMultiDeviceLaunch;
  size_t sharedMemPerBlockOptin;
  int pageableMemoryAccessUsesHostPageTables;
  int directManagedMemAccessFromHost;
  int maxBlocksPerMultiProcessor;
  int accessPolicyMaxWindowSize;
  size_t reservedSharedMemPerBlock;
  int hostRegisterSupported;
  int sparseCudaArraySupported;
  int hostRegisterReadOnlySupported;
  int timelineSemaphoreInteropSupported;
  int memoryPoolsSupported;
  int gpuDirectRDMASupported;
  unsigned int gpuDirectRDMAFlushWritesOptions;
  int gpuDirectRDMAWritesOrdering;
  unsigned int memoryPoolSupportedHandleTypes;
  int deferredMappingCudaArraySupported;
  int ipcEventSupported;
  int clusterLaunch;
  int unifiedFunctionPointers;
  int reserved[63];
};
static_assert(sizeof(DeviceProp12) == kCuda12PropertiesBytes, "CUDA 12 cudaDeviceProp is 1032 bytes");
static_assert(offsetof(DeviceProp12, multiProcessorCount) == 388, "CUDA 12 layout");
static_assert(offsetof(DeviceProp12, pciBusID) == 584, "CUDA 12 layout");
static_assert(offsetof(DeviceProp12, reservedSharedMemPerBlock) == 720, "CUDA 12 layout");
static_assert(sizeof(cudaDeviceProp) == 1008, "CUDA 13 cudaDeviceProp is 1008 bytes");
static_assert(offsetof(cudaDeviceProp, totalGlobalMem) == 288, "CUDA 13 layout");
static_assert(offsetof(cudaDeviceProp, pciBusID) == 568, "CUDA 13 layout");

}  // namespace

void fill_properties(const VirtualDevice& d, cudaDeviceProp* out) {
  fill_common(d, out);
  out->deviceNumaConfig = *device_attribute(d, cudaDevAttrNumaConfig);
  out->deviceNumaId = *device_attribute(d, cudaDevAttrNumaId);
  out->mpsEnabled = *device_attribute(d, cudaDevAttrMpsEnabled);
  out->hostNumaId = *device_attribute(d, cudaDevAttrHostNumaId);
}

void fill_properties_cuda12(const VirtualDevice& d, void* out, size_t bytes) {
  DeviceProp12 p;
  fill_common(d, &p);
  auto a = [&](int attr) { return *device_attribute(d, attr); };
  p.clockRate = a(cudaDevAttrClockRate);
  p.deviceOverlap = a(cudaDevAttrGpuOverlap);
  p.kernelExecTimeoutEnabled = a(cudaDevAttrKernelExecTimeout);
  p.computeMode = a(cudaDevAttrComputeMode);
  p.maxTexture1DLinear = a(69);
  p.memoryClockRate = a(cudaDevAttrMemoryClockRate);
  p.singleToDoublePrecisionPerfRatio = a(cudaDevAttrSingleToDoublePrecisionPerfRatio);
  p.cooperativeMultiDeviceLaunch = 0;
  std::memcpy(out, &p, std::min(bytes, sizeof p));
}

}  // namespace fakegpu::cuda
