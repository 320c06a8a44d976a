// Streams, events, host functions and graph capture. Work on a created stream (or the
// per-thread default stream) runs in order on that stream's worker thread. Work on the legacy
// default stream runs inline, after the device's blocking streams have drained: that is CUDA's
// implicit synchronisation between the legacy stream and blocking streams. While a stream
// captures, its work goes into a graph instead (graph.h), replayed by cudaGraphLaunch.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "bridge.h"
#include "graph.h"
#include "runtime_state.h"
#include "stream_ops.h"
#include "streams.h"

using fakegpu::cuda::Event;
using fakegpu::cuda::fail;
using fakegpu::cuda::Graph;
using fakegpu::cuda::guarded;
using fakegpu::cuda::ModelClock;
using fakegpu::cuda::Stream;
using fakegpu::cuda::UserObject;
using fakegpu::cuda::UserObjectRefs;

namespace {

struct Registry {
  std::mutex mu;
  // Every live stream, per-thread default streams included. Shared with drain_device, which
  // waits for streams outside the lock while cudaStreamDestroy may come.
  std::map<Stream*, std::shared_ptr<Stream>> streams;
  // Shared with the work queued on streams (and graphs) that records or waits for an event:
  // cudaEventDestroy may come while such work is pending, and CUDA allows it.
  std::map<Event*, std::shared_ptr<Event>> events;
  std::set<Graph*> graphs;
  std::set<Graph*> execs;                  // instantiated graphs
  std::map<Stream*, Graph*> capturing;     // streams capturing, and into which graph
  std::map<Stream*, Graph*> capture_origin;  // the stream that began each capture
  std::map<Event*, Graph*> recorded_in;      // events recorded inside a capture
  std::map<UserObject*, UserObjectRefs> user_objects;  // the program's references
};
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

template <typename T>
T* resolve_in(std::set<T*>& live, void* handle) {
  auto* p = static_cast<T*>(handle);
  std::lock_guard<std::mutex> lock(registry().mu);
  if (!p || !live.count(p)) throw cudaErrorInvalidResourceHandle;
  return p;
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
int64_t drain_device(int device, bool blocking_only, cudaError_t* error = nullptr) {
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

// How submit_impl puts work on a created or per-thread stream.
enum class Placement { kQueue, kMarker };

void submit_impl(cudaStream_t s, std::function<void()> work, int64_t cost_ns, Placement placement,
                 fakegpu::cuda::WorkKind kind = fakegpu::cuda::kUntracked) {
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

// Every live stream, kept alive while the caller looks at them outside the registry's lock.
std::vector<std::shared_ptr<Stream>> all_streams() {
  std::vector<std::shared_ptr<Stream>> streams;
  std::lock_guard<std::mutex> lock(registry().mu);
  for (const auto& [key, s] : registry().streams) streams.push_back(s);
  return streams;
}

}  // namespace

namespace fakegpu::cuda {

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
    fakegpu::cuda::submit(stream, [fn, data] { fn(data); });
  });
}

FAKECUDA_API cudaError_t cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback, void* data,
                                               unsigned int flags) {
  return guarded([&] {
    if (!callback || flags != 0) throw cudaErrorInvalidValue;
    fakegpu::cuda::submit(stream, [stream, callback, data] { callback(stream, cudaSuccess, data); });
  });
}

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

// ---- graphs ----

FAKECUDA_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode /*mode*/) {
  return guarded([&] {
    Stream* s = resolve(stream);
    if (!s) throw cudaErrorStreamCaptureUnsupported;  // the legacy stream cannot capture
    std::lock_guard<std::mutex> lock(registry().mu);
    if (registry().capturing.count(s)) throw cudaErrorIllegalState;
    static unsigned long long next_capture_id = 1;
    auto* g = new Graph;
    g->capture_id = next_capture_id++;
    registry().graphs.insert(g);
    registry().capturing[s] = g;
    registry().capture_origin[s] = g;
  });
}

FAKECUDA_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  return guarded([&] {
    if (!graph) throw cudaErrorInvalidValue;
    Stream* s = resolve(stream);
    std::unique_ptr<Graph> dropped;  // freed after the lock is released: its user objects may go
    std::lock_guard<std::mutex> lock(registry().mu);
    auto origin = registry().capture_origin.find(s);
    if (!s || origin == registry().capture_origin.end()) throw cudaErrorStreamCaptureUnmatched;
    Graph* g = origin->second;
    registry().capture_origin.erase(origin);
    for (auto it = registry().capturing.begin(); it != registry().capturing.end();)
      it = it->second == g ? registry().capturing.erase(it) : std::next(it);
    for (auto it = registry().recorded_in.begin(); it != registry().recorded_in.end();)
      it = it->second == g ? registry().recorded_in.erase(it) : std::next(it);
    if (g->invalidated) {
      registry().graphs.erase(g);
      dropped.reset(g);
      *graph = nullptr;
      throw cudaErrorStreamCaptureInvalidated;
    }
    *graph = reinterpret_cast<cudaGraph_t>(g);
  });
}

namespace {
// What cudaStreamGetCaptureInfo reports. fakegpu's graphs are sequences, so a capture has no
// dependency set to hand out: the dependency list is empty.
cudaError_t capture_info(cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id,
                         cudaGraph_t* graph, const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                         size_t* count) {
  return guarded([&] {
    if (!status) throw cudaErrorInvalidValue;
    Stream* s = resolve(stream);
    Graph* g = s ? capture_of(s) : nullptr;
    *status = !g ? cudaStreamCaptureStatusNone
                 : g->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
    if (id && g) *id = g->capture_id;
    if (graph) *graph = reinterpret_cast<cudaGraph_t>(g);
    if (deps) *deps = nullptr;
    if (edges) *edges = nullptr;
    if (count) *count = 0;
  });
}
}  // namespace

FAKECUDA_API cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  return capture_info(stream, status, nullptr, nullptr, nullptr, nullptr, nullptr);
}

#if FAKEGPU_CUDART_MAJOR >= 13
FAKECUDA_API cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                                  unsigned long long* id, cudaGraph_t* graph,
                                                  const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                                  size_t* count) {
  return capture_info(stream, status, id, graph, deps, edges, count);
}
#else
// CUDA 12: the unversioned name has the 3-argument form; its header maps the name to _v2.
extern "C" __attribute__((visibility("default"))) cudaError_t cudaStreamGetCaptureInfo(
    cudaStream_t stream, cudaStreamCaptureStatus* status, unsigned long long* id) {
  return capture_info(stream, status, id, nullptr, nullptr, nullptr, nullptr);
}
FAKECUDA_API cudaError_t cudaStreamGetCaptureInfo_v2(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                                     unsigned long long* id, cudaGraph_t* graph,
                                                     const cudaGraphNode_t** deps, size_t* count) {
  return capture_info(stream, status, id, graph, deps, nullptr, count);
}
FAKECUDA_API cudaError_t cudaStreamGetCaptureInfo_v3(cudaStream_t stream, cudaStreamCaptureStatus* status,
                                                     unsigned long long* id, cudaGraph_t* graph,
                                                     const cudaGraphNode_t** deps, const cudaGraphEdgeData** edges,
                                                     size_t* count) {
  return capture_info(stream, status, id, graph, deps, edges, count);
}
#endif

FAKECUDA_API cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  thread_local cudaStreamCaptureMode current = cudaStreamCaptureModeGlobal;
  if (!mode) return fail(cudaErrorInvalidValue);
  std::swap(current, *mode);
  return cudaSuccess;
}

FAKECUDA_API cudaError_t cudaGraphCreate(cudaGraph_t* graph, unsigned int flags) {
  return guarded([&] {
    if (!graph || flags != 0) throw cudaErrorInvalidValue;
    auto* g = new Graph;
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().graphs.insert(g);
    *graph = reinterpret_cast<cudaGraph_t>(g);
  });
}

namespace {
// Takes a graph or instance out of `live` and frees it, outside the lock: releasing its user
// objects runs their destructors, which are the program's code.
void destroy_graph(std::set<Graph*>& live, void* handle) {
  std::unique_ptr<Graph> owned;
  std::lock_guard<std::mutex> lock(registry().mu);
  auto* g = static_cast<Graph*>(handle);
  if (!g || !live.erase(g)) throw cudaErrorInvalidResourceHandle;
  owned.reset(g);
}
}  // namespace

FAKECUDA_API cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  return guarded([&] { destroy_graph(registry().graphs, graph); });
}

// Node handles are 1-based positions in capture order.
FAKECUDA_API cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  return guarded([&] {
    if (!count) throw cudaErrorInvalidValue;
    Graph* g = resolve_in(registry().graphs, graph);
    if (nodes) {
      for (size_t i = 0; i < *count && i < g->nodes.size(); ++i) nodes[i] = reinterpret_cast<cudaGraphNode_t>(i + 1);
      for (size_t i = g->nodes.size(); i < *count; ++i) nodes[i] = nullptr;
      *count = std::min(*count, g->nodes.size());
    } else {
      *count = g->nodes.size();
    }
  });
}

FAKECUDA_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long /*flags*/) {
  return guarded([&] {
    if (!exec) throw cudaErrorInvalidValue;
    Graph* g = resolve_in(registry().graphs, graph);
    std::lock_guard<std::mutex> lock(registry().mu);  // a capture may still add nodes to g
    auto* copy = new Graph(*g);
    registry().execs.insert(copy);
    *exec = reinterpret_cast<cudaGraphExec_t>(copy);
  });
}

FAKECUDA_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                       unsigned long long flags) {
  return cudaGraphInstantiate(exec, graph, flags);
}

FAKECUDA_API cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  return guarded([&] {
    Graph* g = resolve_in(registry().execs, exec);
    for (const auto& node : g->nodes) fakegpu::cuda::submit(stream, node.work, node.cost_ns, node.kind);
    // The instance may be destroyed before this launch has run: the launch holds the user
    // objects its nodes use until its last node is done.
    if (g->user_objects.empty()) return;
    std::vector<std::shared_ptr<UserObject>> held;
    for (const auto& [key, refs] : g->user_objects) held.push_back(refs.object);
    fakegpu::cuda::submit(stream, [held = std::move(held)] {});
  });
}

FAKECUDA_API cudaError_t cudaGraphUpload(cudaGraphExec_t exec, cudaStream_t stream) {
  return guarded([&] {
    resolve_in(registry().execs, exec);
    resolve(stream);
  });
}

FAKECUDA_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  return guarded([&] { destroy_graph(registry().execs, exec); });
}

// ---- user objects ----
// The program's references live in the registry, each graph's in the graph. The object goes
// when the last of them does; its destructor then runs outside the registry's lock.

FAKECUDA_API cudaError_t cudaUserObjectCreate(cudaUserObject_t* object_out, void* ptr, cudaHostFn_t destroy,
                                              unsigned int initialRefcount, unsigned int flags) {
  return guarded([&] {
    // CUDA requires the flag: destructors run without the program waiting for them.
    if (!object_out || !destroy || initialRefcount == 0 || flags != cudaUserObjectNoDestructorSync)
      throw cudaErrorInvalidValue;
    auto object = std::make_shared<UserObject>(ptr, destroy);
    std::lock_guard<std::mutex> lock(registry().mu);
    registry().user_objects[object.get()] = {object, initialRefcount};
    *object_out = reinterpret_cast<cudaUserObject_t>(object.get());
  });
}

namespace {
// Drops `count` of the references in `refs` (keyed by object); they must be there.
std::shared_ptr<UserObject> drop_refs(std::map<UserObject*, UserObjectRefs>& refs, UserObject* object,
                                      unsigned count) {
  auto it = refs.find(object);
  if (count == 0 || it == refs.end() || it->second.count < count) throw cudaErrorInvalidValue;
  std::shared_ptr<UserObject> last = it->second.object;
  if ((it->second.count -= count) == 0) refs.erase(it);
  return last;  // the caller lets go of it after unlocking
}
}  // namespace

FAKECUDA_API cudaError_t cudaUserObjectRetain(cudaUserObject_t object, unsigned int count) {
  return guarded([&] {
    std::lock_guard<std::mutex> lock(registry().mu);
    auto it = registry().user_objects.find(reinterpret_cast<UserObject*>(object));
    if (count == 0 || it == registry().user_objects.end()) throw cudaErrorInvalidValue;
    it->second.count += count;
  });
}

FAKECUDA_API cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  return guarded([&] {
    std::shared_ptr<UserObject> released;
    std::lock_guard<std::mutex> lock(registry().mu);
    released = drop_refs(registry().user_objects, reinterpret_cast<UserObject*>(object), count);
  });
}

FAKECUDA_API cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count,
                                                   unsigned int flags) {
  return guarded([&] {
    if (count == 0 || (flags & ~static_cast<unsigned>(cudaGraphUserObjectMove))) throw cudaErrorInvalidValue;
    Graph* g = resolve_in(registry().graphs, graph);
    std::lock_guard<std::mutex> lock(registry().mu);
    auto* key = reinterpret_cast<UserObject*>(object);
    auto it = registry().user_objects.find(key);
    const bool move = flags & cudaGraphUserObjectMove;
    if (it == registry().user_objects.end() || (move && it->second.count < count)) throw cudaErrorInvalidValue;
    UserObjectRefs& held = g->user_objects[key];
    held.object = it->second.object;
    held.count += count;
    // With Move the graph takes the program's references over, so the object lives on.
    if (move) drop_refs(registry().user_objects, key, count);
  });
}

FAKECUDA_API cudaError_t cudaGraphReleaseUserObject(cudaGraph_t graph, cudaUserObject_t object, unsigned int count) {
  return guarded([&] {
    Graph* g = resolve_in(registry().graphs, graph);
    std::shared_ptr<UserObject> released;
    std::lock_guard<std::mutex> lock(registry().mu);
    released = drop_refs(g->user_objects, reinterpret_cast<UserObject*>(object), count);
  });
}
