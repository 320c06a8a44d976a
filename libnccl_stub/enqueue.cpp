// Queues collective calls on a CUDA stream, with the copies that staging needs around them.
#include "enqueue.h"

#include <algorithm>

#include "batch.h"
#include "cuda_bridge.h"
#include "env.h"
#include "flag_wait.h"
#include "queued_batch.h"
#include "staging.h"

namespace fakegpu::stub {
namespace {

// Posting at once suits a post that is only a message: the data in shared memory, or none.
// Where the data travels in the frames (tcp), posting it would keep the caller for as long as
// the bytes take, so the stream's worker does it.
bool eager(const std::vector<CollectiveCall>& calls) {
  static const bool on = env::get(env::kEagerCollectives);  // checked at init
  return on && !staging_needed() &&
         (payload_free() ||
          std::all_of(calls.begin(), calls.end(), [](const CollectiveCall& c) { return c.comm->client->shares_segments(); }));
}

// Staged calls whose end the stream waits for on a host flag (flag_wait.h): the host function
// only posts them, the watcher raises the flag once the replies are in, and a second host
// function, after the wait, settles the batch (its modeled end, its errors) without waiting.
void enqueue_flagged(cudaStream_t stream, const Batch& calls, std::shared_ptr<StagingSet> staging,
                     std::shared_ptr<InflightHold> hold, const HostFlag& flag, bool* submitted) {
  const CudaBridge& cu = cuda();
  auto posted = std::make_shared<PostedBatch>();
  try {
    cu.enqueue(stream, [calls, staging, posted, flag](StreamClock clock) {
      start_queued(*calls, staging.get(), clock, posted.get());
      raise_when_done(posted, flag);
    });
  } catch (...) {
    give_back_flag(flag);  // nothing will wait on it
    throw;
  }
  *submitted = true;
  // From here a failure leaves the flag in use: the posting function may still raise it.
  cu.wait_on_flag(stream, flag.host, flag.device, flag.value);
  cu.enqueue(stream, [calls, posted, flag](StreamClock clock) {
    finish_queued(*calls, clock, posted.get());
    give_back_flag(flag);
  });
  unstage_outputs(*calls, *staging, stream);
  cu.enqueue(stream, [staging, hold](StreamClock) {});
}

}  // namespace

// Without staging the collective goes in two parts: posting it, and waiting for its end. On an
// idle stream the calling thread posts it at once, as a GPU starts a kernel on an idle stream,
// so the peers can finish it while this rank goes on; only the wait stays queued, and the
// thread that synchronises with the stream usually does it itself (see enqueue_started).
// Posting never waits for the peers, so the call still returns before they arrive, as NCCL's
// does. With staging, copies to and from host buffers are queued around the collective, so
// the host function itself never calls CUDA (which real CUDA forbids), and the stream waits for
// the collective's end on a host flag where it can (enqueue_flagged). A failure while running
// becomes the communicators' asynchronous error.
void enqueue(cudaStream_t stream, const Batch& calls, bool* submitted) {
  const CudaBridge& cu = cuda();
  if (cu.capturing(stream)) {
    *submitted = true;  // captured calls give their numbers back first thing
    return enqueue_captured(stream, *calls);
  }
  auto hold = std::make_shared<InflightHold>(*calls);
  if (eager(*calls)) {
    auto posted = std::make_shared<PostedBatch>();
    cu.enqueue_started(
        stream, [calls, posted](StreamClock clock) { start_queued(*calls, nullptr, clock, posted.get()); },
        [calls, posted, hold](StreamClock clock) { finish_queued(*calls, clock, posted.get()); },
        [posted] { return posted->ready(); });
    *submitted = true;
    return;
  }
  std::shared_ptr<StagingSet> staging;
  if (staging_needed()) {
    staging = std::make_shared<StagingSet>(*calls);
    stage_inputs(*calls, *staging, stream);
    if (auto flag = take_flag()) return enqueue_flagged(stream, calls, staging, hold, *flag, submitted);
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
