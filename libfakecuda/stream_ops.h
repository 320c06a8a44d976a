// How API files put work on streams: queued on a created or per-thread stream, run inline
// on the legacy stream, or recorded into a graph while the stream is capturing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

#include "streams.h"

namespace fakegpu::cuda {

// `cost_ns` is the work's modeled duration, added to the stream's modeled clock; `kind` says
// whether the activity log records it as a kernel or a copy.
void submit(cudaStream_t stream, std::function<void()> work, int64_t cost_ns = 0, WorkKind kind = kUntracked);
// As submit(), but on a created or per-thread stream with nothing queued or running, the work
// runs now on the calling thread (Stream::run_or_enqueue), still in the stream's order and on
// its clock.
void submit_or_run(cudaStream_t stream, std::function<void()> work);
// The current device's legacy stream's clock, raised to the host's modeled time.
ModelClock& legacy_stream_clock();
// Throws cudaErrorInvalidResourceHandle for a stream that does not exist.
void check_stream(cudaStream_t stream);
// Whether the stream is capturing into a graph (then synchronous calls on it are errors).
bool is_capturing(cudaStream_t stream);

}  // namespace fakegpu::cuda
