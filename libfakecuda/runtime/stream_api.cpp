// Streams and host functions. Work on a created stream (or the per-thread default stream) runs
// in order on that stream's worker thread. Work on the legacy default stream runs inline, after
// the device's blocking streams have drained: that is CUDA's implicit synchronisation between
// the legacy stream and blocking streams. Events are in event_api.cpp, capture and graphs in
// graph_api.cpp.
#include "stream_registry.h"

using namespace fakegpu::cuda;
using namespace fakegpu::cuda::live;

FAKECUDA_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return guarded([&] {
    if (!stream) throw cudaErrorInvalidValue;
    fakegpu::cuda::current();  // there must be a device
    auto s = std::make_shared<Stream>(fakegpu::cuda::current_device(), !(flags & cudaStreamNonBlocking));
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().streams.emplace(s.get(), s);
    *stream = reinterpret_cast<cudaStream_t>(s.get());
  });
}

FAKECUDA_API cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }

FAKECUDA_API cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int flags, int /*priority*/) {
  return cudaStreamCreateWithFlags(stream, flags);
}

FAKECUDA_API cudaError_t cudaStreamGetFlags(cudaStream_t stream, unsigned int* flags) {
  return guarded([&] {
    if (!flags) throw cudaErrorInvalidValue;
    Stream* s = resolve(stream);
    *flags = s && !s->blocking() ? cudaStreamNonBlocking : cudaStreamDefault;
  });
}

FAKECUDA_API cudaError_t cudaStreamGetPriority(cudaStream_t stream, int* priority) {
  return guarded([&] {
    if (!priority) throw cudaErrorInvalidValue;
    resolve(stream);
    *priority = 0;
  });
}

FAKECUDA_API cudaError_t cudaStreamGetDevice(cudaStream_t stream, int* device) {
  return guarded([&] {
    if (!device) throw cudaErrorInvalidValue;
    Stream* s = resolve(stream);
    *device = s ? s->device() : fakegpu::cuda::current_device();
  });
}

FAKECUDA_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return guarded([&] {
    if (is_legacy(stream) || stream == cudaStreamPerThread) throw cudaErrorInvalidResourceHandle;
    Stream* s = resolve(stream);
    std::shared_ptr<Stream> owned;
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      auto it = registry().streams.find(s);
      if (it == registry().streams.end()) throw cudaErrorInvalidResourceHandle;  // destroyed meanwhile
      owned = std::move(it->second);
      registry().streams.erase(it);
      registry().capturing.erase(s);
      registry().capture_origin.erase(s);
    }
    // CUDA lets queued work finish: the last owner's release (here, or in a drain_device still
    // waiting on the stream) drains the queue first.
    owned.reset();
  });
}

namespace {
// Waits for the stream's work; returns its clock.
ModelClock& drain_stream(cudaStream_t stream) {
  Stream* s = resolve(stream);
  refuse_if_capturing(s);
  if (s) {
    s->synchronize();
    throw_stream_error(s);
    return s->clock();
  }
  ModelClock& clock = legacy_clock(fakegpu::cuda::current_device());
  clock.raise_to(drain_device(fakegpu::cuda::current_device(), /*blocking_only=*/true));
  return clock;
}
}  // namespace

FAKECUDA_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return guarded([&] { fakegpu::cuda::host_clock().raise_to(drain_stream(stream).now_ns()); });
}

// For fakegpu's NCCL and Python hook, which must wait for a stream's data before reading it on
// the CPU: the program did not synchronize, so the host's modeled time stays where it was
// (raising it would delay, on the modeled clock, the work the program queues next).
FAKECUDA_API cudaError_t fakegpu_cuda_drain_stream(cudaStream_t stream) {
  return guarded([&] { drain_stream(stream); });
}

FAKECUDA_API cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaError_t result = cudaSuccess;
  cudaError_t err = guarded([&] {
    Stream* s = resolve(stream);
    refuse_if_capturing(s);
    throw_stream_error(s);
    if (s && !s->idle()) result = cudaErrorNotReady;
  });
  return err != cudaSuccess ? err : result;  // NotReady is not an error: it is not recorded
}

FAKECUDA_API cudaError_t cudaDeviceSynchronize(void) {
  return guarded([] {
    int device = fakegpu::cuda::current_device();
    ModelClock& clock = legacy_clock(device);
    cudaError_t error = cudaSuccess;
    clock.raise_to(drain_device(device, /*blocking_only=*/false, &error));
    fakegpu::cuda::host_clock().raise_to(clock.now_ns());
    if (error != cudaSuccess) throw error;
  });
}

FAKECUDA_API cudaError_t cudaDeviceReset(void) { return cudaDeviceSynchronize(); }

FAKECUDA_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  return guarded([&] {
    if (!fn) throw cudaErrorInvalidValue;
    fakegpu::cuda::submit(stream, fakegpu::cuda::as_host_function([fn, data] { fn(data); }));
  });
}

FAKECUDA_API cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* data,
                                               unsigned int flags) {
  return guarded([&] {
    if (!callback || flags != 0) throw cudaErrorInvalidValue;
    fakegpu::cuda::submit(stream, fakegpu::cuda::as_host_function(
                                      [stream, callback, data] { callback(stream, cudaSuccess, data); }));
  });
}
