// Queues collective calls on a CUDA stream, with the copies that staging needs around them.
#include "enqueue.h"

#include "batch.h"
#include "cuda_bridge.h"
#include "queued_batch.h"
#include "staging.h"

namespace fakegpu::stub {

// With staging, copies to and from host buffers are queued around the collective, so the host
// function itself never calls CUDA (which real CUDA forbids). A failure while running becomes
// the communicators' asynchronous error.
void enqueue(cudaStream_t stream, const Batch& calls, bool* submitted) {
  const CudaBridge& cu = cuda();
  if (cu.capturing(stream)) {
    *submitted = true;  // captured calls give their numbers back first thing
    return enqueue_captured(stream, *calls);
  }
  auto hold = std::make_shared<InflightHold>(*calls);
  std::shared_ptr<StagingSet> staging;
  if (staging_needed()) {
    staging = std::make_shared<StagingSet>(*calls);
    stage_inputs(*calls, *staging, stream);
  }
  // The operation is over once its results are in the caller's buffers: after the collective,
  // or after the copies back when staging, where the last function keeps the host buffers.
  cu.enqueue(stream, [calls, staging, hold](StreamClock clock) { run_queued(*calls, staging.get(), clock); });
  *submitted = true;
  if (staging) {
    unstage_outputs(*calls, *staging, stream);
    cu.enqueue(stream, [staging, hold](StreamClock) {});
  }
}

}  // namespace fakegpu::stub
