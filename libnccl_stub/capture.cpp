// Records collective calls into the CUDA graph a stream is capturing, to run at each replay.
#include <memory>
#include <string>

#include "batch.h"
#include "cuda_bridge.h"
#include "enqueue.h"
#include "queued_batch.h"
#include "staging.h"

namespace fakegpu::stub {

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
  }
  cu.enqueue_captured(stream, [calls, staging](StreamClock clock) {
    try {
      std::vector<CollectiveCall> run = *calls;
      for (auto& c : run) take_sequence_number(c);
      InflightHold hold(run);  // each replay is in flight until it has run
      run_queued(run, staging.get(), clock);
    } catch (const std::exception& e) {  // copying the calls or numbering them ran out of memory
      fail_batch(*calls, ncclSystemError, std::string("a graph replay could not start its collectives: ") + e.what());
    }
  });
  if (staging) unstage_outputs(*calls, *staging, stream);
}

}  // namespace fakegpu::stub
