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
// for the caller to give back.
// With `alone` (these are all the calls the group submits), the collective may run at once from
// the calling thread when the stream is idle, as if the stream had reached it straight away:
// the stream's order and clock are the same, and two thread switches are saved (see
// may_run_inline in enqueue.cpp for when). With more than one batch it must not: a later batch
// may hold the other ranks this one waits for.
void enqueue(cudaStream_t stream, const Batch& calls, bool alone, bool* submitted);

// Records calls into the graph the stream is capturing (capture.cpp); each replay runs them as
// new operations.
void enqueue_captured(cudaStream_t stream, std::vector<CollectiveCall> batch);

}  // namespace fakegpu::stub
