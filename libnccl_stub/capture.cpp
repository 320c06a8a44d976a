// Records collective calls into the CUDA graph a stream is capturing, to run at each replay.
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "batch.h"
#include "cuda_bridge.h"
#include "enqueue.h"
#include "errors.h"
#include "flag_wait.h"
#include "queued_batch.h"
#include "staging.h"

namespace fakegpu::stub {
namespace {

using Calls = std::shared_ptr<const std::vector<CollectiveCall>>;

// Each replay numbers its calls anew: they take their sequence numbers when they run.
std::vector<CollectiveCall> numbered(const std::vector<CollectiveCall>& calls) {
  std::vector<CollectiveCall> run = calls;
  for (auto& c : run) take_sequence_number(c);
  return run;
}

// A host flag the graph keeps for its replays (flag_wait.h). The graph's wait is recorded once,
// for one value, so each replay first lowers the word below it and the watcher raises it again
// once the replay's replies are in. Replays of one graph run one after another, so the batch
// posted by the one under way is the one its closing function settles. The flag goes back to
// the pool with the graph.
struct GraphFlag {
  HostFlag flag;
  std::shared_ptr<PostedBatch> posted;
  std::vector<CollectiveCall> run;      // the replay's calls, numbered
  std::unique_ptr<InflightHold> hold;  // the replay is in flight from its posting to its end
  explicit GraphFlag(const HostFlag& f) : flag(f) {}
  ~GraphFlag() { give_back_flag(flag); }
};

// Where the stream's wait cannot be captured, the settling host function waits for the flag
// itself, as captured collectives did before (they may then wait on each other across streams).
void wait_on_host(const HostFlag& flag) {
  while (static_cast<int32_t>(__atomic_load_n(flag.host, __ATOMIC_ACQUIRE) - flag.value) < 0)
    std::this_thread::sleep_for(std::chrono::microseconds(20));
}

// Staged calls whose end the replay waits for on the graph's flag: the recorded host function
// only posts them, as in enqueue_flagged, so collectives of graphs replayed on two streams never
// wait on each other through NVIDIA's one thread of host functions.
void capture_flagged(cudaStream_t stream, const Calls& calls, const std::shared_ptr<StagingSet>& staging,
                     const HostFlag& flag) {
  const CudaBridge& cu = cuda();
  auto owned = std::make_shared<GraphFlag>(flag);
  cu.enqueue_captured(stream, [calls, staging, owned](StreamClock clock) {
    __atomic_store_n(owned->flag.host, owned->flag.value - 1, __ATOMIC_RELEASE);
    owned->posted = std::make_shared<PostedBatch>();
    try {
      owned->run = numbered(*calls);
      owned->hold = std::make_unique<InflightHold>(owned->run);
    } catch (const std::exception& e) {  // copying the calls or numbering them ran out of memory
      fail_batch(*calls, ncclSystemError, std::string("a graph replay could not start its collectives: ") + e.what());
      owned->run.clear();  // nothing to settle
      __atomic_store_n(owned->flag.host, owned->flag.value, __ATOMIC_RELEASE);  // nothing was posted
      return;
    }
    start_queued(owned->run, staging.get(), clock, owned->posted.get());
    raise_when_done(owned->posted, owned->flag);
  });
  bool stream_waits = true;
  try {
    cu.wait_on_flag(stream, flag.host, flag.device, flag.value);
  } catch (const NcclError& e) {
    stream_waits = false;
    static std::once_flag said;
    std::call_once(said, [&] {
      info(wire::kSubsysGraph, std::string("a CUDA graph here cannot hold a stream's wait on a host flag (") +
                                   e.what() + "): captured collectives wait in their host functions");
    });
  }
  cu.enqueue_captured(stream, [owned, stream_waits](StreamClock clock) {
    if (!stream_waits) wait_on_host(owned->flag);
    if (!owned->run.empty()) finish_queued(owned->run, clock, owned->posted.get());
    owned->hold.reset();
  });
}

}  // namespace

// Each replay of the graph runs the calls again, as new operations: they take their sequence
// numbers when they run, not now. The recorded function (and any staging buffers) belong to the
// graph: the runtime frees them when the graph and its instances are destroyed. (Giving the
// numbers back assumes the captured calls took the newest ones: a group that mixes captured and
// uncaptured streams on one communicator is not supported.)
void enqueue_captured(cudaStream_t stream, std::vector<CollectiveCall> batch) {
  const CudaBridge& cu = cuda();
  release_sequence_numbers(batch);
  auto calls = std::make_shared<const std::vector<CollectiveCall>>(std::move(batch));
  std::shared_ptr<StagingSet> staging;
  if (staging_needed()) {
    staging = std::make_shared<StagingSet>(*calls);
    stage_inputs(*calls, *staging, stream);
    if (auto flag = take_flag()) {
      capture_flagged(stream, calls, staging, *flag);
      unstage_outputs(*calls, *staging, stream);
      return;
    }
  }
  cu.enqueue_captured(stream, [calls, staging](StreamClock clock) {
    try {
      std::vector<CollectiveCall> run = numbered(*calls);
      InflightHold hold(run);  // each replay is in flight until it has run
      run_queued(run, staging.get(), clock);
    } catch (const std::exception& e) {  // copying the calls or numbering them ran out of memory
      fail_batch(*calls, ncclSystemError, std::string("a graph replay could not start its collectives: ") + e.what());
    }
  });
  if (staging) unstage_outputs(*calls, *staging, stream);
}

}  // namespace fakegpu::stub
