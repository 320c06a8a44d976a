// Stream capture and graphs: while a stream captures, its work goes into a graph instead
// (graph.h), replayed by cudaGraphLaunch; and the user objects graphs keep alive.
#include <algorithm>
#include <vector>

#include "stream_registry.h"

using namespace fakegpu::cuda;
using namespace fakegpu::cuda::live;

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
