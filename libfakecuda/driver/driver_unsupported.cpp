// Driver calls that fakegpu does not simulate, present so that programs and PyTorch resolve
// them: each returns CUDA_ERROR_NOT_SUPPORTED and logs one line naming itself. Sharing virtual
// memory handles between processes and multicast are here (driver_vmm.cpp has the rest), as
// are modules, linking and kernel launches through the driver (there is no GPU code to run),
// and the driver's private tables (cuGetExportTable), which NVRTC calls unchecked once it finds
// a libcuda.so.1.
#include "driver.h"

using namespace fakegpu::driver;

#define FAKEGPU_DRIVER_UNSUPPORTED(X)                                                                       \
  X(cuMemExportToShareableHandle)                                                                          \
  X(cuMemImportFromShareableHandle) X(cuMemRetainAllocationHandle) X(cuMemGetAllocationPropertiesFromHandle) \
  X(cuMulticastCreate) X(cuMulticastAddDevice) X(cuMulticastBindMem) X(cuMulticastBindAddr)                 \
  X(cuMulticastUnbind) X(cuMulticastGetGranularity)                                                         \
  X(cuCtxFromGreenCtx) X(cuGreenCtxCreate) X(cuGreenCtxDestroy) X(cuGreenCtxStreamCreate)                  \
  X(cuDevSmResourceSplitByCount) X(cuDeviceGetDevResource) X(cuDevResourceGenerateDesc)                    \
  X(cuModuleLoad) X(cuModuleLoadData) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)       \
  X(cuModuleGetGlobal_v2) X(cuLinkCreate_v2) X(cuLinkAddData_v2) X(cuLinkAddFile_v2) X(cuLinkComplete)      \
  X(cuLinkDestroy) X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuLaunchCooperativeKernel)                       \
  X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuFuncSetCacheConfig)                                       \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)    \
  X(cuTensorMapEncodeTiled) X(cuTensorMapEncodeIm2col) X(cuLibraryLoadData) X(cuLibraryUnload)              \
  X(cuLibraryGetKernel) X(cuKernelGetFunction) X(cuCtxCreate_v4) X(cuCtxDestroy_v2) X(cuGetExportTable)

#define FAKEGPU_DEFINE_UNSUPPORTED(name)                                   \
  FAKECU_API CUresult name() {                                             \
    log_once(#name, "not simulated by fakegpu's CUDA driver");             \
    return kNotSupported;                                                  \
  }
FAKEGPU_DRIVER_UNSUPPORTED(FAKEGPU_DEFINE_UNSUPPORTED)
