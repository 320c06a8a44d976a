// Queuing collective calls on CUDA streams, and recording them into the graph a stream
// captures, instead of running them from the calling thread.
#pragma once

#include <memory>
#include <vector>

#include "group.h"

namespace fakegpu::stub {

using Batch = std::shared_ptr<const std::vector<CollectiveCall>>;

// Queues calls that share a stream: the collective runs when the stream reaches it, and the call
// returns at once. `*submitted` turns true once the calls' sequence numbers are spoken for (the
// collective is queued, or captured calls gave theirs back): a failure before that leaves them
// for the caller to give back. On an idle stream the calls are posted to the coordinator before
// this returns (see enqueue.cpp).
void enqueue(cudaStream_t stream, const Batch& calls, bool* submitted);

// Records calls into the graph the stream is capturing (capture.cpp); each replay runs them as
// new operations.
void enqueue_captured(cudaStream_t stream, std::vector<CollectiveCall> batch);

}  // namespace fakegpu::stub
