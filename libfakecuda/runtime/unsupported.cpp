// Every CUDA runtime entry point fakegpu does not implement, so that any program linked against
// NVIDIA's runtime still loads. Each returns cudaErrorNotSupported and logs one line naming
// itself, the first time it is called. The names are CUDA's; the list is the CUDA 13 export
// list less what fakegpu implements, plus the CUDA 12 names that 13 renamed or dropped.
#include "runtime_state.h"

#define FAKEGPU_UNSUPPORTED_CUDA13(X) \
    X(__cudaGetProcAddress) X(__cudaRegisterHostVar) X(__cudaRegisterUnifiedTable) X(cudaArrayGetInfo) \
    X(cudaArrayGetMemoryRequirements) X(cudaArrayGetPlane) X(cudaArrayGetSparseProperties) X(cudaChooseDevice) \
    X(cudaCreateSurfaceObject) X(cudaCreateTextureObject) X(cudaCtxResetPersistingL2Cache) \
    X(cudaDestroyExternalMemory) X(cudaDestroyExternalSemaphore) X(cudaDestroySurfaceObject) \
    X(cudaDestroyTextureObject) X(cudaDeviceFlushGPUDirectRDMAWrites) X(cudaDeviceGetCacheConfig) \
    X(cudaDeviceGetDefaultMemPool) X(cudaDeviceGetGraphMemAttribute) X(cudaDeviceGetHostAtomicCapabilities) \
    X(cudaDeviceGetMemPool) X(cudaDeviceGetNvSciSyncAttributes) X(cudaDeviceGetP2PAtomicCapabilities) \
    X(cudaDeviceGetSharedMemConfig) X(cudaDeviceGetTexture1DLinearMaxWidth) X(cudaDeviceGraphMemTrim) \
    X(cudaDeviceRegisterAsyncNotification) X(cudaDeviceSetCacheConfig) X(cudaDeviceSetGraphMemAttribute) \
    X(cudaDeviceSetMemPool) X(cudaDeviceSetSharedMemConfig) X(cudaDeviceUnregisterAsyncNotification) \
    X(cudaEGLStreamConsumerAcquireFrame) X(cudaEGLStreamConsumerConnect) X(cudaEGLStreamConsumerConnectWithFlags) \
    X(cudaEGLStreamConsumerDisconnect) X(cudaEGLStreamConsumerReleaseFrame) X(cudaEGLStreamProducerConnect) \
    X(cudaEGLStreamProducerDisconnect) X(cudaEGLStreamProducerPresentFrame) X(cudaEGLStreamProducerReturnFrame) \
    X(cudaEventCreateFromEGLSync) \
    X(cudaExternalMemoryGetMappedBuffer) X(cudaExternalMemoryGetMappedMipmappedArray) X(cudaFreeArray) \
    X(cudaFreeMipmappedArray) X(cudaFuncGetName) X(cudaFuncGetParamInfo) \
    X(cudaFuncSetSharedMemConfig) X(cudaGLGetDevices) X(cudaGLMapBufferObject) X(cudaGLMapBufferObjectAsync) \
    X(cudaGLRegisterBufferObject) X(cudaGLSetBufferObjectMapFlags) X(cudaGLSetGLDevice) X(cudaGLUnmapBufferObject) \
    X(cudaGLUnmapBufferObjectAsync) X(cudaGLUnregisterBufferObject) X(cudaGetChannelDesc) \
    X(cudaGetExportTable) X(cudaGetFuncBySymbol) X(cudaGetKernel) X(cudaGetMipmappedArrayLevel) \
    X(cudaGetSurfaceObjectResourceDesc) X(cudaGetTextureObjectResourceDesc) X(cudaGetTextureObjectResourceViewDesc) \
    X(cudaGetTextureObjectTextureDesc) X(cudaGraphAddChildGraphNode) X(cudaGraphAddDependencies) \
    X(cudaGraphAddEmptyNode) X(cudaGraphAddEventRecordNode) X(cudaGraphAddEventWaitNode) \
    X(cudaGraphAddExternalSemaphoresSignalNode) X(cudaGraphAddExternalSemaphoresWaitNode) X(cudaGraphAddHostNode) \
    X(cudaGraphAddKernelNode) X(cudaGraphAddMemAllocNode) X(cudaGraphAddMemFreeNode) X(cudaGraphAddMemcpyNode) \
    X(cudaGraphAddMemcpyNode1D) X(cudaGraphAddMemcpyNodeFromSymbol) X(cudaGraphAddMemcpyNodeToSymbol) \
    X(cudaGraphAddMemsetNode) X(cudaGraphAddNode) X(cudaGraphChildGraphNodeGetGraph) X(cudaGraphClone) \
    X(cudaGraphConditionalHandleCreate) X(cudaGraphDebugDotPrint) X(cudaGraphDestroyNode) \
    X(cudaGraphEventRecordNodeGetEvent) X(cudaGraphEventRecordNodeSetEvent) X(cudaGraphEventWaitNodeGetEvent) \
    X(cudaGraphEventWaitNodeSetEvent) X(cudaGraphExecChildGraphNodeSetParams) X(cudaGraphExecEventRecordNodeSetEvent) \
    X(cudaGraphExecEventWaitNodeSetEvent) X(cudaGraphExecExternalSemaphoresSignalNodeSetParams) \
    X(cudaGraphExecExternalSemaphoresWaitNodeSetParams) X(cudaGraphExecGetFlags) X(cudaGraphExecHostNodeSetParams) \
    X(cudaGraphExecKernelNodeSetParams) X(cudaGraphExecMemcpyNodeSetParams) X(cudaGraphExecMemcpyNodeSetParams1D) \
    X(cudaGraphExecMemcpyNodeSetParamsFromSymbol) X(cudaGraphExecMemcpyNodeSetParamsToSymbol) \
    X(cudaGraphExecMemsetNodeSetParams) X(cudaGraphExecNodeSetParams) X(cudaGraphExecUpdate) \
    X(cudaGraphExternalSemaphoresSignalNodeGetParams) X(cudaGraphExternalSemaphoresSignalNodeSetParams) \
    X(cudaGraphExternalSemaphoresWaitNodeGetParams) X(cudaGraphExternalSemaphoresWaitNodeSetParams) \
    X(cudaGraphGetEdges) X(cudaGraphGetRootNodes) X(cudaGraphHostNodeGetParams) X(cudaGraphHostNodeSetParams) \
    X(cudaGraphInstantiateWithParams) X(cudaGraphInstantiateWithParams_ptsz) X(cudaGraphKernelNodeCopyAttributes) \
    X(cudaGraphKernelNodeGetAttribute) X(cudaGraphKernelNodeGetParams) X(cudaGraphKernelNodeSetAttribute) \
    X(cudaGraphKernelNodeSetParams) X(cudaGraphMemAllocNodeGetParams) \
    X(cudaGraphMemFreeNodeGetParams) X(cudaGraphMemcpyNodeGetParams) X(cudaGraphMemcpyNodeSetParams) \
    X(cudaGraphMemcpyNodeSetParams1D) X(cudaGraphMemcpyNodeSetParamsFromSymbol) \
    X(cudaGraphMemcpyNodeSetParamsToSymbol) X(cudaGraphMemsetNodeGetParams) X(cudaGraphMemsetNodeSetParams) \
    X(cudaGraphNodeFindInClone) X(cudaGraphNodeGetDependencies) X(cudaGraphNodeGetDependentNodes) \
    X(cudaGraphNodeGetEnabled) X(cudaGraphNodeGetType) X(cudaGraphNodeSetEnabled) X(cudaGraphNodeSetParams) \
    X(cudaGraphRemoveDependencies) X(cudaGraphUpload_ptsz) \
    X(cudaGraphicsEGLRegisterImage) X(cudaGraphicsGLRegisterBuffer) X(cudaGraphicsGLRegisterImage) \
    X(cudaGraphicsMapResources) X(cudaGraphicsResourceGetMappedEglFrame) \
    X(cudaGraphicsResourceGetMappedMipmappedArray) X(cudaGraphicsResourceGetMappedPointer) \
    X(cudaGraphicsResourceSetMapFlags) X(cudaGraphicsSubResourceGetMappedArray) X(cudaGraphicsUnmapResources) \
    X(cudaGraphicsUnregisterResource) X(cudaGraphicsVDPAURegisterOutputSurface) \
    X(cudaGraphicsVDPAURegisterVideoSurface) X(cudaHostGetFlags) X(cudaImportExternalMemory) \
    X(cudaImportExternalSemaphore) \
    X(cudaKernelSetAttributeForDevice) \
    X(cudaLaunchKernelExC_ptsz) X(cudaLibraryEnumerateKernels) X(cudaLibraryGetGlobal) X(cudaLibraryGetKernel) \
    X(cudaLibraryGetKernelCount) X(cudaLibraryGetManaged) X(cudaLibraryGetUnifiedFunction) X(cudaLibraryLoadData) \
    X(cudaLibraryLoadFromFile) X(cudaLibraryUnload) X(cudaLogsCurrent) X(cudaLogsDumpToFile) X(cudaLogsDumpToMemory) \
    X(cudaLogsRegisterCallback) X(cudaLogsUnregisterCallback) X(cudaMalloc3D) X(cudaMalloc3DArray) X(cudaMallocArray) \
    X(cudaMallocFromPoolAsync) X(cudaMallocFromPoolAsync_ptsz) X(cudaMallocMipmappedArray) \
    X(cudaMemAdvise) X(cudaMemDiscardAndPrefetchBatchAsync) X(cudaMemDiscardAndPrefetchBatchAsync_ptsz) \
    X(cudaMemDiscardBatchAsync) X(cudaMemDiscardBatchAsync_ptsz) X(cudaMemGetDefaultMemPool) X(cudaMemGetMemPool) \
    X(cudaMemPoolCreate) X(cudaMemPoolDestroy) X(cudaMemPoolExportPointer) X(cudaMemPoolExportToShareableHandle) \
    X(cudaMemPoolGetAccess) X(cudaMemPoolGetAttribute) X(cudaMemPoolImportFromShareableHandle) \
    X(cudaMemPoolImportPointer) X(cudaMemPoolSetAccess) X(cudaMemPoolSetAttribute) X(cudaMemPoolTrimTo) \
    X(cudaMemPrefetchAsync) X(cudaMemPrefetchAsync_ptsz) X(cudaMemPrefetchBatchAsync) \
    X(cudaMemPrefetchBatchAsync_ptsz) X(cudaMemRangeGetAttribute) X(cudaMemRangeGetAttributes) X(cudaMemSetMemPool) \
    X(cudaMemcpy2DArrayToArray) X(cudaMemcpy2DArrayToArray_ptds) X(cudaMemcpy2DFromArray) \
    X(cudaMemcpy2DFromArrayAsync) X(cudaMemcpy2DFromArrayAsync_ptsz) X(cudaMemcpy2DFromArray_ptds) \
    X(cudaMemcpy2DToArray) X(cudaMemcpy2DToArrayAsync) X(cudaMemcpy2DToArrayAsync_ptsz) X(cudaMemcpy2DToArray_ptds) \
    X(cudaMemcpy3D) X(cudaMemcpy3DAsync) X(cudaMemcpy3DAsync_ptsz) X(cudaMemcpy3DBatchAsync) \
    X(cudaMemcpy3DBatchAsync_ptsz) X(cudaMemcpy3DPeer) X(cudaMemcpy3DPeerAsync) X(cudaMemcpy3DPeerAsync_ptsz) \
    X(cudaMemcpy3DPeer_ptds) X(cudaMemcpy3D_ptds) X(cudaMemcpyArrayToArray) X(cudaMemcpyArrayToArray_ptds) \
    X(cudaMemcpyBatchAsync) X(cudaMemcpyBatchAsync_ptsz) X(cudaMemcpyFromArray) \
    X(cudaMemcpyFromArrayAsync) X(cudaMemcpyFromArrayAsync_ptsz) X(cudaMemcpyFromArray_ptds) \
    X(cudaMemcpyToArray) X(cudaMemcpyToArrayAsync) \
    X(cudaMemcpyToArrayAsync_ptsz) X(cudaMemcpyToArray_ptds) \
    X(cudaMemset3D) \
    X(cudaMemset3DAsync) X(cudaMemset3DAsync_ptsz) X(cudaMemset3D_ptds) \
    X(cudaMipmappedArrayGetMemoryRequirements) X(cudaMipmappedArrayGetSparseProperties) \
    X(cudaOccupancyAvailableDynamicSMemPerBlock) X(cudaOccupancyMaxActiveClusters) \
    X(cudaOccupancyMaxPotentialClusterSize) X(cudaProfilerStart) X(cudaProfilerStop) X(cudaSetValidDevices) \
    X(cudaSignalExternalSemaphoresAsync) X(cudaSignalExternalSemaphoresAsync_ptsz) \
    X(cudaStreamAttachMemAsync) X(cudaStreamAttachMemAsync_ptsz) X(cudaStreamBeginCaptureToGraph) \
    X(cudaStreamBeginCaptureToGraph_ptsz) X(cudaStreamCopyAttributes) \
    X(cudaStreamCopyAttributes_ptsz) X(cudaStreamGetAttribute) \
    X(cudaStreamGetAttribute_ptsz) X(cudaStreamGetCaptureInfo_ptsz) \
    X(cudaStreamGetId) X(cudaStreamGetId_ptsz) \
    X(cudaStreamSetAttribute) X(cudaStreamSetAttribute_ptsz) \
    X(cudaStreamUpdateCaptureDependencies) X(cudaStreamUpdateCaptureDependencies_ptsz) \
    X(cudaVDPAUGetDevice) X(cudaVDPAUSetVDPAUDevice) X(cudaWaitExternalSemaphoresAsync) \
    X(cudaWaitExternalSemaphoresAsync_ptsz)

#define FAKEGPU_UNSUPPORTED_CUDA12_ONLY(X) \
    X(cudaGraphAddNode_v2) X(cudaGraphGetEdges_v2) X(cudaGraphNodeGetDependencies_v2) \
    X(cudaGraphNodeGetDependentNodes_v2) X(cudaGraphAddDependencies_v2) X(cudaGraphRemoveDependencies_v2) \
    X(cudaStreamUpdateCaptureDependencies_v2) X(cudaMemPrefetchAsync_v2) X(cudaMemAdvise_v2) \
    X(cudaSignalExternalSemaphoresAsync_v2) X(cudaWaitExternalSemaphoresAsync_v2) X(__cudaRegisterTexture) \
    X(__cudaRegisterSurface) X(cudaThreadSynchronize) X(cudaThreadExit) X(cudaThreadGetLimit) X(cudaThreadSetLimit) \
    X(cudaThreadGetCacheConfig) X(cudaThreadSetCacheConfig) X(cudaGetDeviceProperties_v2_ptsz)

// The arguments are never read, so one definition serves every signature: on x86-64 and
// aarch64 the caller cleans up, and the result register carries cudaErrorNotSupported.
#define FAKEGPU_DEFINE_UNSUPPORTED(name)                                         \
  FAKECUDA_API int name() {                                                      \
    fakegpu::cuda::log_once(#name, "not supported by fakegpu's CUDA runtime");   \
    return fakegpu::cuda::fail(cudaErrorNotSupported);                           \
  }

FAKEGPU_UNSUPPORTED_CUDA13(FAKEGPU_DEFINE_UNSUPPORTED)
#if FAKEGPU_CUDART_MAJOR < 13
FAKEGPU_UNSUPPORTED_CUDA12_ONLY(FAKEGPU_DEFINE_UNSUPPORTED)
#endif
