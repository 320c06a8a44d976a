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
// Work in two parts, `start` then `finish`, as one piece of work. On a created or per-thread
// stream with nothing queued or running, `start` runs now on the calling thread and `finish`
// waits at the head of the stream for whoever needs it first (Stream::start_or_enqueue); `ready`
// (optional) says whether `finish` would run without waiting.
void submit_started(cudaStream_t stream, std::function<void()> start, std::function<void()> finish,
                    std::function<bool()> ready);
// Hands work parked on any stream to the streams' workers (Stream::kick).
void kick_streams();
// Looks at every stream as cudaStreamQuery does (Stream::idle): parked work that would not wait
// runs on the calling thread.
void poll_streams();
// The current device's legacy stream's clock, raised to the host's modeled time.
ModelClock& legacy_stream_clock();
// Throws cudaErrorInvalidResourceHandle for a stream that does not exist.
void check_stream(cudaStream_t stream);
// Whether the stream is capturing into a graph (then synchronous calls on it are errors).
bool is_capturing(cudaStream_t stream);

}  // namespace fakegpu::cuda
