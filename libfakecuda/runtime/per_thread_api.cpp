// The per-thread default stream forms that nvcc --default-stream per-thread compiles calls to:
// `_ptsz` calls take stream 0 to mean the calling thread's default stream, and `_ptds` calls
// (synchronous ones) run on that stream and wait for it.
#include "runtime_state.h"

namespace {

cudaStream_t per_thread(cudaStream_t s) { return s ? s : cudaStreamPerThread; }

// A synchronous call on the per-thread stream: queue the asynchronous form, then wait.
cudaError_t then_wait(cudaError_t queued) {
  return queued != cudaSuccess ? queued : cudaStreamSynchronize(cudaStreamPerThread);
}

}  // namespace

FAKECUDA_API cudaError_t cudaMemcpy_ptds(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  return then_wait(cudaMemcpyAsync(dst, src, n, kind, cudaStreamPerThread));
}
FAKECUDA_API cudaError_t cudaMemcpyAsync_ptsz(void* dst, const void* src, size_t n, cudaMemcpyKind kind, cudaStream_t s) {
  return cudaMemcpyAsync(dst, src, n, kind, per_thread(s));
}
FAKECUDA_API cudaError_t cudaMemcpy2D_ptds(void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h,
                                           cudaMemcpyKind kind) {
  return then_wait(cudaMemcpy2DAsync(dst, dp, src, sp, w, h, kind, cudaStreamPerThread));
}
FAKECUDA_API cudaError_t cudaMemcpy2DAsync_ptsz(void* dst, size_t dp, const void* src, size_t sp, size_t w, size_t h,
                                                cudaMemcpyKind kind, cudaStream_t s) {
  return cudaMemcpy2DAsync(dst, dp, src, sp, w, h, kind, per_thread(s));
}
FAKECUDA_API cudaError_t cudaMemcpyToSymbol_ptds(const void* sym, const void* src, size_t n, size_t off,
                                                 cudaMemcpyKind kind) {
  return then_wait(cudaMemcpyToSymbolAsync(sym, src, n, off, kind, cudaStreamPerThread));
}
FAKECUDA_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void* sym, const void* src, size_t n, size_t off,
                                                      cudaMemcpyKind kind, cudaStream_t s) {
  return cudaMemcpyToSymbolAsync(sym, src, n, off, kind, per_thread(s));
}
FAKECUDA_API cudaError_t cudaMemcpyFromSymbol_ptds(void* dst, const void* sym, size_t n, size_t off,
                                                   cudaMemcpyKind kind) {
  return then_wait(cudaMemcpyFromSymbolAsync(dst, sym, n, off, kind, cudaStreamPerThread));
}
FAKECUDA_API cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void* dst, const void* sym, size_t n, size_t off,
                                                        cudaMemcpyKind kind, cudaStream_t s) {
  return cudaMemcpyFromSymbolAsync(dst, sym, n, off, kind, per_thread(s));
}
FAKECUDA_API cudaError_t cudaMemset_ptds(void* p, int v, size_t n) {
  return then_wait(cudaMemsetAsync(p, v, n, cudaStreamPerThread));
}
FAKECUDA_API cudaError_t cudaMemsetAsync_ptsz(void* p, int v, size_t n, cudaStream_t s) {
  return cudaMemsetAsync(p, v, n, per_thread(s));
}
FAKECUDA_API cudaError_t cudaMemset2D_ptds(void* p, size_t pitch, int v, size_t w, size_t h) {
  return then_wait(cudaMemset2DAsync(p, pitch, v, w, h, cudaStreamPerThread));
}
FAKECUDA_API cudaError_t cudaMemset2DAsync_ptsz(void* p, size_t pitch, int v, size_t w, size_t h, cudaStream_t s) {
  return cudaMemset2DAsync(p, pitch, v, w, h, per_thread(s));
}
FAKECUDA_API cudaError_t cudaMallocAsync_ptsz(void** p, size_t n, cudaStream_t s) { return cudaMallocAsync(p, n, per_thread(s)); }
FAKECUDA_API cudaError_t cudaFreeAsync_ptsz(void* p, cudaStream_t s) { return cudaFreeAsync(p, per_thread(s)); }
FAKECUDA_API cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) { return cudaEventRecord(e, per_thread(s)); }
FAKECUDA_API cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  return cudaEventRecordWithFlags(e, per_thread(s), flags);
}
FAKECUDA_API cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  return cudaStreamWaitEvent(per_thread(s), e, flags);
}
FAKECUDA_API cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return cudaStreamSynchronize(per_thread(s)); }
FAKECUDA_API cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) { return cudaStreamQuery(per_thread(s)); }
FAKECUDA_API cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int* f) { return cudaStreamGetFlags(per_thread(s), f); }
FAKECUDA_API cudaError_t cudaStreamGetPriority_ptsz(cudaStream_t s, int* p) { return cudaStreamGetPriority(per_thread(s), p); }
FAKECUDA_API cudaError_t cudaStreamGetDevice_ptsz(cudaStream_t s, int* d) { return cudaStreamGetDevice(per_thread(s), d); }
FAKECUDA_API cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void* data) {
  return cudaLaunchHostFunc(per_thread(s), fn, data);
}
FAKECUDA_API cudaError_t cudaStreamAddCallback_ptsz(cudaStream_t s, cudaStreamCallback_t cb, void* data, unsigned int f) {
  return cudaStreamAddCallback(per_thread(s), cb, data, f);
}
FAKECUDA_API cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, cudaStreamCaptureMode mode) {
  return cudaStreamBeginCapture(per_thread(s), mode);
}
FAKECUDA_API cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t* g) { return cudaStreamEndCapture(per_thread(s), g); }
FAKECUDA_API cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, cudaStreamCaptureStatus* st) {
  return cudaStreamIsCapturing(per_thread(s), st);
}
FAKECUDA_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t g, cudaStream_t s) { return cudaGraphLaunch(g, per_thread(s)); }
FAKECUDA_API cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* f, dim3 grid, dim3 block, void** args, size_t smem,
                                                          cudaStream_t s) {
  return cudaLaunchCooperativeKernel(f, grid, block, args, smem, per_thread(s));
}
