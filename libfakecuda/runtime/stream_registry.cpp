// The registry of live streams, events and graphs (stream_registry.h), and the runtime's own
// ways onto streams (stream_ops.h).
#include "stream_registry.h"

#include <algorithm>
#include <vector>

#include "bridge.h"

namespace fakegpu::cuda::live {
namespace {

// The calling thread's default stream for the current device (cudaStreamPerThread).
Stream* per_thread_stream() {
  struct Owned {
    std::map<int, std::shared_ptr<Stream>> by_device;
    ~Owned() {
      std::lock_guard<std::mutex> lock(registry().mu);
      for (auto& [dev, s] : by_device) registry().streams.erase(s.get());
    }
  };
  thread_local Owned owned;
  auto& slot = owned.by_device[fakegpu::cuda::current_device()];
  if (!slot) {
    slot = std::make_shared<Stream>(fakegpu::cuda::current_device(), true);
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().streams.emplace(slot.get(), slot);
  }
  return slot.get();
}

// Every live stream, kept alive while the caller looks at them outside the registry's lock.
std::vector<std::shared_ptr<Stream>> all_streams() {
  std::vector<std::shared_ptr<Stream>> streams;
  std::lock_guard<std::mutex> lock(registry().mu);
  for (const auto& [key, s] : registry().streams) streams.push_back(s);
  return streams;
}

}  // namespace

Registry& registry() {
  static auto* r = new Registry;  // never destroyed: CUDA calls may come from static destructors
  return *r;
}

bool is_legacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy; }

ModelClock& legacy_clock(int device) {
  static auto* clocks = new std::map<int, ModelClock>;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return (*clocks)[device];
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

std::shared_ptr<Event> resolve(cudaEvent_t e) {
  std::lock_guard<std::mutex> lock(registry().mu);
  auto it = registry().events.find(reinterpret_cast<Event*>(e));
  if (!e || it == registry().events.end()) throw cudaErrorInvalidResourceHandle;
  return it->second;
}

Graph* capture_of(Stream* s) {
  std::lock_guard<std::mutex> lock(registry().mu);
  auto it = registry().capturing.find(s);
  return it == registry().capturing.end() ? nullptr : it->second;
}

// Synchronous calls on a capturing stream are errors, and spoil the capture, as in CUDA.
void refuse_if_capturing(Stream* s) {
  if (!s) return;
  std::lock_guard<std::mutex> lock(registry().mu);
  auto it = registry().capturing.find(s);
  if (it == registry().capturing.end()) return;
  it->second->invalidated = true;
  throw cudaErrorStreamCaptureUnsupported;
}

// Waits for the streams of a device; only the blocking ones when `blocking_only`. Returns the
// latest modeled time among them, and in *error (when given) the first error one of them holds.
// A stream destroyed meanwhile stays alive until this is done with it.
int64_t drain_device(int device, bool blocking_only, cudaError_t* error) {
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    for (const auto& [key, s] : registry().streams)
      if (s->device() == device && (!blocking_only || s->blocking())) streams.push_back(s);
  }
  int64_t latest = 0;
  for (const auto& s : streams) {
    s->synchronize();
    latest = std::max(latest, s->clock().now_ns());
    if (error && *error == cudaSuccess) *error = static_cast<cudaError_t>(s->error());
  }
  return latest;
}

// A stream's work failed: synchronising with it reports the error.
void throw_stream_error(Stream* s) {
  if (int e = s ? s->error() : 0) throw static_cast<cudaError_t>(e);
}

// Puts work on a created or per-thread stream (queued, or as a marker that takes no time),
// into the graph the stream captures, or runs it on the legacy stream.
void submit_impl(cudaStream_t s, std::function<void()> work, int64_t cost_ns, Placement placement,
                 fakegpu::cuda::WorkKind kind) {
  Stream* stream = resolve(s);
  if (Graph* g = stream ? capture_of(stream) : nullptr) {
    std::lock_guard<std::mutex> lock(registry().mu);
    g->nodes.push_back({std::move(work), cost_ns, kind});
    return;
  }
  if (stream) {
    if (placement == Placement::kMarker) return stream->enqueue_marker(std::move(work));
    return stream->enqueue(std::move(work), cost_ns, kind);
  }
  int device = fakegpu::cuda::current_device();
  ModelClock& clock = legacy_clock(device);
  clock.raise_to(drain_device(device, /*blocking_only=*/true));
  fakegpu::cuda::run_timed(clock, work, cost_ns, kind, fakegpu::cuda::host_clock().now_ns());
}

}  // namespace fakegpu::cuda::live

namespace fakegpu::cuda {

using namespace live;

void submit(cudaStream_t stream, std::function<void()> work, int64_t cost_ns, WorkKind kind) {
  submit_impl(stream, std::move(work), cost_ns, Placement::kQueue, kind);
}

void submit_started(cudaStream_t stream, std::function<void()> start, std::function<void()> finish,
                    std::function<bool()> ready) {
  Stream* s = resolve(stream);
  if (s && !capture_of(s)) return s->start_or_enqueue(std::move(start), std::move(finish), std::move(ready));
  submit(stream, in_sequence(std::move(start), std::move(finish)));
}

void kick_streams() {
  for (const auto& s : all_streams()) s->kick();
}

void poll_streams() {
  for (const auto& s : all_streams()) s->idle();
}

ModelClock& legacy_stream_clock() {
  ModelClock& clock = legacy_clock(current_device());
  clock.raise_to(host_clock().now_ns());
  return clock;
}

void check_stream(cudaStream_t stream) { resolve(stream); }

bool is_capturing(cudaStream_t stream) {
  Stream* s = resolve(stream);
  return s && capture_of(s);
}

}  // namespace fakegpu::cuda
