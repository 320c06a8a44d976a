// The runtime's live streams, events and graphs, by the handles the program holds, shared by the
// calls on them (stream_api.cpp, event_api.cpp, graph_api.cpp): handles resolve here, and work
// goes here to a stream, to the graph it captures, or onto the legacy stream.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "graph.h"
#include "runtime_state.h"
#include "stream_ops.h"
#include "streams.h"

namespace fakegpu::cuda::live {

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
Registry& registry();

bool is_legacy(cudaStream_t s);
// The modeled clock of a device's legacy default stream.
ModelClock& legacy_clock(int device);
// nullptr for the legacy stream; throws cudaErrorInvalidResourceHandle for an unknown handle.
Stream* resolve(cudaStream_t s);
std::shared_ptr<Event> resolve(cudaEvent_t e);
// A graph (or instance) among the live ones; throws cudaErrorInvalidResourceHandle otherwise.
template <typename T>
T* resolve_in(std::set<T*>& handles, void* handle) {
  auto* p = static_cast<T*>(handle);
  std::lock_guard<std::mutex> lock(registry().mu);
  if (!p || !handles.count(p)) throw cudaErrorInvalidResourceHandle;
  return p;
}
// The graph the stream captures into; nullptr when it does not capture.
Graph* capture_of(Stream* s);
// Synchronous calls on a capturing stream are errors, and spoil the capture, as in CUDA.
void refuse_if_capturing(Stream* s);
// Waits for the streams of a device; only the blocking ones when `blocking_only`. Returns the
// latest modeled time among them, and in *error (when given) the first error one of them holds.
int64_t drain_device(int device, bool blocking_only, cudaError_t* error = nullptr);
// A stream's work failed: synchronising with it reports the error.
void throw_stream_error(Stream* s);

enum class Placement { kQueue, kMarker };
void submit_impl(cudaStream_t s, std::function<void()> work, int64_t cost_ns, Placement placement,
                 WorkKind kind = kUntracked);

}  // namespace fakegpu::cuda::live
