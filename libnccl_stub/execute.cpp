// Executes a group's collective calls: sorts them by stream, queues each stream's share and
// runs the legacy stream's share now.
#include "execute.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "batch.h"
#include "cuda_bridge.h"
#include "enqueue.h"
#include "staging.h"

namespace fakegpu::stub {
namespace {

// Runs calls now, from the calling thread: for the legacy stream, or without a runtime that can
// queue work. A failure is returned by the call and, as on a queued stream, also becomes the
// communicators' asynchronous error, which watchdogs such as torch's poll.
void run_now(const std::vector<CollectiveCall>& calls) {
  const CudaBridge& cu = cuda();
  for (const auto& c : calls) cu.sync_stream(c.stream);  // their inputs are complete once this is done
  const StreamClock clock = cu.legacy_clock();  // the calls run in the legacy stream's place
  try {
    if (!staging_needed()) return run_batch(calls, nullptr, clock);
    StagingSet staging(calls);
    stage_inputs(calls, staging, std::nullopt);
    run_batch(calls, &staging, clock);
    unstage_outputs(calls, staging, std::nullopt);
  } catch (const NcclError& e) {
    for (const auto& c : calls) set_async_error(c.comm, e.code(), e.what());
    throw;
  }
}

// The calls that execute() could not submit, in the order they took their numbers.
std::vector<CollectiveCall> unsubmitted(const std::vector<CollectiveCall>& calls, const std::vector<bool>& submitted) {
  std::vector<CollectiveCall> left;
  for (size_t i = 0; i < calls.size(); ++i)
    if (!submitted[i]) left.push_back(calls[i]);
  return left;
}

}  // namespace

void execute(std::vector<CollectiveCall> calls) {
  const CudaBridge& cu = cuda();
  std::vector<CollectiveCall> now;
  std::vector<std::pair<cudaStream_t, std::vector<size_t>>> by_stream;  // indices into calls
  for (size_t i = 0; i < calls.size(); ++i) {
    const cudaStream_t stream = calls[i].stream;
    if (CudaBridge::is_legacy(stream) || !cu.can_enqueue()) continue;
    auto it = std::find_if(by_stream.begin(), by_stream.end(), [&](const auto& b) { return b.first == stream; });
    if (it == by_stream.end()) it = by_stream.insert(by_stream.end(), {stream, {}});
    it->second.push_back(i);
  }
  std::vector<bool> submitted(calls.size(), false);
  try {
    for (const auto& [stream, indices] : by_stream) {
      auto batch = std::make_shared<std::vector<CollectiveCall>>();
      for (size_t i : indices) batch->push_back(calls[i]);
      bool queued = false;
      try {
        enqueue(stream, batch, &queued);
      } catch (...) {
        if (queued)
          for (size_t i : indices) submitted[i] = true;
        throw;
      }
      for (size_t i : indices) submitted[i] = true;
    }
    for (size_t i = 0; i < calls.size(); ++i)
      if (!submitted[i]) now.push_back(calls[i]);
  } catch (...) {
    release_sequence_numbers(unsubmitted(calls, submitted));
    throw;
  }
  if (!now.empty()) run_now(now);  // these count as submitted: a failure fails their communicators
}

}  // namespace fakegpu::stub
