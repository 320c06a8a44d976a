// Events: recorded on a stream (or into a capture), waited for by streams and the host, timed on
// the modeled clock, and shared between processes.
#include <cstring>

#include "stream_registry.h"

using namespace fakegpu::cuda;
using namespace fakegpu::cuda::live;

FAKECUDA_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  return guarded([&] {
    if (!event || (flags & ~0x7u)) throw cudaErrorInvalidValue;
    auto e = std::make_shared<Event>(!(flags & cudaEventDisableTiming));
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().events[e.get()] = e;
    *event = reinterpret_cast<cudaEvent_t>(e.get());
  });
}

FAKECUDA_API cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

FAKECUDA_API cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return guarded([&] {
    Event* e = resolve(event).get();
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().recorded_in.erase(e);
    registry().events.erase(e);  // freed once no queued work holds it
  });
}

FAKECUDA_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return guarded([&] {
    std::shared_ptr<Event> e = resolve(event);
    Stream* s = resolve(stream);
    if (Graph* g = s ? capture_of(s) : nullptr) {
      // Inside a capture an event only orders streams of the capture (see cudaStreamWaitEvent).
      std::lock_guard<std::mutex> lock(registry().mu);
      registry().recorded_in[e.get()] = g;
      return;
    }
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      registry().recorded_in.erase(e.get());
    }
    uint64_t generation = e->record();
    submit_impl(stream, [e, generation] { e->complete(generation, fakegpu::cuda::running_clock()->now_ns()); }, 0,
                Placement::kMarker);
  });
}

FAKECUDA_API cudaError_t cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream, unsigned int flags) {
  if (flags & ~0x1u) return fail(cudaErrorInvalidValue);
  return cudaEventRecord(event, stream);
}

FAKECUDA_API cudaError_t cudaEventQuery(cudaEvent_t event) {
  bool done = true;
  cudaError_t err = guarded([&] { done = resolve(event)->query(); });
  return err != cudaSuccess ? err : done ? cudaSuccess : cudaErrorNotReady;
}

FAKECUDA_API cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return guarded([&] {
    std::shared_ptr<Event> e = resolve(event);
    const uint64_t generation = e->last_recorded();
    e->wait_for(generation);
    fakegpu::cuda::host_clock().raise_to(e->modeled_at(generation));
  });
}

// Events shared between processes, as torch.multiprocessing shares CUDA tensors: the exporter
// records, hands out the handle and the importer waits on it. The exporter's work is waited for
// when the handle is made (without counting as the program's synchronisation), so the event the
// importer opens is one whose work is done; fakegpu's streams cannot see another process's.
namespace {
constexpr uint64_t kIpcEventMagic = 0x6670677569706576;  // "fpguipev"
}  // namespace

FAKECUDA_API cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t* handle, cudaEvent_t event) {
  return guarded([&] {
    if (!handle) throw cudaErrorInvalidValue;
    std::shared_ptr<Event> e = resolve(event);
    e->wait_for(e->last_recorded());
    std::memset(handle->reserved, 0, sizeof handle->reserved);
    std::memcpy(handle->reserved, &kIpcEventMagic, sizeof kIpcEventMagic);
  });
}

FAKECUDA_API cudaError_t cudaIpcOpenEventHandle(cudaEvent_t* event, cudaIpcEventHandle_t handle) {
  uint64_t magic;
  std::memcpy(&magic, handle.reserved, sizeof magic);
  if (!event || magic != kIpcEventMagic) return fail(cudaErrorInvalidResourceHandle);
  return cudaEventCreateWithFlags(event, cudaEventDisableTiming | cudaEventInterprocess);
}

FAKECUDA_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  return guarded([&] {
    std::shared_ptr<Event> e = resolve(event);
    Stream* s = resolve(stream);
    {
      // Waiting on an event recorded in a capture makes this stream join that capture.
      std::lock_guard<std::mutex> lock(registry().mu);
      auto it = registry().recorded_in.find(e.get());
      if (it != registry().recorded_in.end()) {
        if (!s) throw cudaErrorStreamCaptureImplicit;
        registry().capturing[s] = it->second;
        return;
      }
    }
    uint64_t generation = e->last_recorded();  // the recording current at the call, as in CUDA
    auto wait = [e, generation] {
      e->wait_for(generation);
      fakegpu::cuda::running_clock()->raise_to(e->modeled_at(generation));
    };
    // A recording already complete cannot block: as a marker the wait then costs a drained
    // stream no wakeup of its worker (PyTorch makes its NCCL stream wait so before each
    // collective, which then finds the stream idle).
    submit_impl(stream, std::move(wait), 0, e->completed(generation) ? Placement::kMarker : Placement::kQueue);
  });
}

FAKECUDA_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return guarded([&] {
    if (!ms) throw cudaErrorInvalidValue;
    std::shared_ptr<Event> a = resolve(start);
    std::shared_ptr<Event> b = resolve(end);
    if (!a->query() || !b->query()) throw cudaErrorNotReady;
    if (!a->ever_completed() || !b->ever_completed() || !a->timing() || !b->timing())
      throw cudaErrorInvalidResourceHandle;
    if (fakegpu::cuda::time_mode() == fakegpu::cuda::TimeMode::kWall)
      *ms = std::chrono::duration<float, std::milli>(b->completed_at() - a->completed_at()).count();
    else
      *ms = static_cast<float>(b->modeled_at() - a->modeled_at()) / 1e6f;
  });
}
