// Streams, events, host functions and copies. Work on a created stream (or the per-thread
// default stream) runs in order on that stream's worker thread. Work on the legacy default
// stream runs inline, after the device's blocking streams have drained: that is CUDA's implicit
// synchronisation between the legacy stream and blocking streams.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "runtime_state.h"
#include "streams.h"

using fakegpu::cuda::Event;
using fakegpu::cuda::Stream;
using fakegpu::cuda::fail;

namespace {

struct Registry {
  std::mutex mu;
  std::set<Stream*> streams;  // every live stream, per-thread default streams included
  std::set<Event*> events;
};
Registry& registry() {
  static auto* r = new Registry;  // never destroyed: CUDA calls may come from static destructors
  return *r;
}

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

// The calling thread's default stream for the current device (cudaStreamPerThread).
Stream* per_thread_stream() {
  struct Owned {
    std::map<int, std::unique_ptr<Stream>> by_device;
    ~Owned() {
      std::lock_guard<std::mutex> lock(registry().mu);
      for (auto& [dev, s] : by_device) registry().streams.erase(s.get());
    }
  };
  thread_local Owned owned;
  auto& slot = owned.by_device[fakegpu::cuda::current_device()];
  if (!slot) {
    slot = std::make_unique<Stream>(fakegpu::cuda::current_device(), true);
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().streams.insert(slot.get());
  }
  return slot.get();
}

// nullptr for the legacy stream; throws cudaErrorInvalidResourceHandle for an unknown handle.
Stream* resolve(cudaStream_t s) {
  if (is_legacy(s)) return nullptr;
  if (s == cudaStreamPerThread) return per_thread_stream();
  auto* stream = reinterpret_cast<Stream*>(s);
  std::lock_guard<std::mutex> lock(registry().mu);
  if (!registry().streams.count(stream)) throw cudaErrorInvalidResourceHandle;
  return stream;
}

Event* resolve(cudaEvent_t e) {
  auto* event = reinterpret_cast<Event*>(e);
  std::lock_guard<std::mutex> lock(registry().mu);
  if (!event || !registry().events.count(event)) throw cudaErrorInvalidResourceHandle;
  return event;
}

// Waits for the streams of a device; only the blocking ones when `blocking_only`.
void drain_device(int device, bool blocking_only) {
  std::vector<Stream*> streams;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    for (Stream* s : registry().streams)
      if (s->device() == device && (!blocking_only || s->blocking())) streams.push_back(s);
  }
  for (Stream* s : streams) s->synchronize();
}

// Queues work on a stream, or runs it now on the legacy stream.
void submit(cudaStream_t s, std::function<void()> work, bool marker = false) {
  Stream* stream = resolve(s);
  if (stream) return marker ? stream->enqueue_marker(std::move(work)) : stream->enqueue(std::move(work));
  drain_device(fakegpu::cuda::current_device(), /*blocking_only=*/true);
  work();
}

// Runs an API body; a thrown cudaError_t becomes its result (and the last error).
template <typename Body>
cudaError_t guarded(Body&& body) {
  try {
    body();
    return cudaSuccess;
  } catch (cudaError_t e) {
    return fail(e);
  } catch (const std::bad_alloc&) {
    return fail(cudaErrorMemoryAllocation);
  }
}

void check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) throw cudaErrorInvalidMemcpyDirection;
  if (count && (!dst || !src)) throw cudaErrorInvalidValue;
}

}  // namespace

FAKECUDA_API cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  return guarded([&] {
    if (!stream) throw cudaErrorInvalidValue;
    auto* s = new Stream(fakegpu::cuda::current_device(), !(flags & cudaStreamNonBlocking));
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().streams.insert(s);
    *stream = reinterpret_cast<cudaStream_t>(s);
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

FAKECUDA_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return guarded([&] {
    if (is_legacy(stream) || stream == cudaStreamPerThread) throw cudaErrorInvalidResourceHandle;
    Stream* s = resolve(stream);
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      registry().streams.erase(s);
    }
    delete s;  // CUDA lets queued work finish; the destructor drains the queue first
  });
}

FAKECUDA_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return guarded([&] {
    if (Stream* s = resolve(stream))
      s->synchronize();
    else
      drain_device(fakegpu::cuda::current_device(), /*blocking_only=*/true);
  });
}

FAKECUDA_API cudaError_t cudaStreamQuery(cudaStream_t stream) {
  cudaError_t result = cudaSuccess;
  cudaError_t err = guarded([&] {
    Stream* s = resolve(stream);
    if (s && !s->idle()) result = cudaErrorNotReady;
  });
  return err != cudaSuccess ? err : result;  // NotReady is not an error: it is not recorded
}

FAKECUDA_API cudaError_t cudaDeviceSynchronize(void) {
  return guarded([] { drain_device(fakegpu::cuda::current_device(), /*blocking_only=*/false); });
}

FAKECUDA_API cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* data) {
  return guarded([&] {
    if (!fn) throw cudaErrorInvalidValue;
    submit(stream, [fn, data] { fn(data); });
  });
}

FAKECUDA_API cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* data,
                                               unsigned int flags) {
  return guarded([&] {
    if (!callback || flags != 0) throw cudaErrorInvalidValue;
    submit(stream, [stream, callback, data] { callback(stream, cudaSuccess, data); });
  });
}

FAKECUDA_API cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int /*flags*/) {
  return guarded([&] {
    if (!event) throw cudaErrorInvalidValue;
    auto* e = new Event;
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().events.insert(e);
    *event = reinterpret_cast<cudaEvent_t>(e);
  });
}

FAKECUDA_API cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

FAKECUDA_API cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return guarded([&] {
    Event* e = resolve(event);
    e->synchronize();  // a recording still queued on a stream points at it
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().events.erase(e);
    delete e;
  });
}

FAKECUDA_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  return guarded([&] {
    Event* e = resolve(event);
    uint64_t generation = e->record();
    submit(stream, [e, generation] { e->complete(generation); }, /*marker=*/true);
  });
}

FAKECUDA_API cudaError_t cudaEventQuery(cudaEvent_t event) {
  bool done = true;
  cudaError_t err = guarded([&] { done = resolve(event)->query(); });
  return err != cudaSuccess ? err : done ? cudaSuccess : cudaErrorNotReady;
}

FAKECUDA_API cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return guarded([&] { resolve(event)->synchronize(); });
}

FAKECUDA_API cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int /*flags*/) {
  return guarded([&] {
    Event* e = resolve(event);
    uint64_t generation = e->last_recorded();  // the recording current at the call, as in CUDA
    submit(stream, [e, generation] { e->wait_for(generation); });
  });
}

FAKECUDA_API cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  return guarded([&] {
    if (!ms) throw cudaErrorInvalidValue;
    Event* a = resolve(start);
    Event* b = resolve(end);
    if (!a->query() || !b->query()) throw cudaErrorNotReady;
    if (!a->ever_completed() || !b->ever_completed()) throw cudaErrorInvalidResourceHandle;
    *ms = std::chrono::duration<float, std::milli>(b->completed_at() - a->completed_at()).count();
  });
}

FAKECUDA_API cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  return guarded([&] {
    check_copy(dst, src, count, kind);
    submit(nullptr, [=] { std::memmove(dst, src, count); });
  });
}

FAKECUDA_API cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                         cudaStream_t stream) {
  return guarded([&] {
    check_copy(dst, src, count, kind);
    submit(stream, [=] { std::memmove(dst, src, count); });
  });
}

FAKECUDA_API cudaError_t cudaMemset(void* ptr, int value, size_t count) {
  return guarded([&] {
    if (count && !ptr) throw cudaErrorInvalidValue;
    submit(nullptr, [=] { std::memset(ptr, value, count); });
  });
}

FAKECUDA_API cudaError_t cudaMemsetAsync(void* ptr, int value, size_t count, cudaStream_t stream) {
  return guarded([&] {
    if (count && !ptr) throw cudaErrorInvalidValue;
    submit(stream, [=] { std::memset(ptr, value, count); });
  });
}
