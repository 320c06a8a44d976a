// Queues collective calls on a CUDA stream, with the copies that staging needs around them.
#include "enqueue.h"

#include <algorithm>

#include "batch.h"
#include "comm.h"
#include "cuda_bridge.h"
#include "env.h"
#include "queued_batch.h"
#include "staging.h"

namespace fakegpu::stub {
namespace {

// Running a collective from the calling thread makes the call return only once the peers have
// joined. That is harmless when this thread is the only one here that the peers wait for, and
// the program expects nothing else: a nonblocking communicator's calls must return at once,
// and one thread that drives several ranks of a communicator (ncclCommInitAll) calls them one
// after the other.
bool may_run_inline(const std::vector<CollectiveCall>& calls) {
  static const bool enabled = env::get(env::kInlineCollectives);  // checked at init
  return enabled && std::all_of(calls.begin(), calls.end(), [](const CollectiveCall& c) {
           return c.comm->blocking && only_local_rank(c.comm);
         });
}

}  // namespace

// With staging, copies to and from host buffers are queued around the collective, so the host
// function itself never calls CUDA (which real CUDA forbids). A failure while running becomes
// the communicators' asynchronous error.
void enqueue(cudaStream_t stream, const Batch& calls, bool alone, bool* submitted) {
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
  const bool now_if_idle = alone && may_run_inline(*calls);
  cu.enqueue(stream, [calls, staging, hold](StreamClock clock) { run_queued(*calls, staging.get(), clock); },
             now_if_idle);
  *submitted = true;
  if (staging) {
    unstage_outputs(*calls, *staging, stream);
    cu.enqueue(stream, [staging, hold](StreamClock) {});
  }
}

}  // namespace fakegpu::stub
