// Running one batch of collective calls against the coordinator: posting them, naming buffers
// that live in shared memory, waiting for the replies and moving the stream's modeled clock.
#pragma once

#include <vector>

#include "cuda_bridge.h"
#include "group.h"
#include "staging.h"

namespace fakegpu::stub {

// FAKEGPU_PAYLOAD=none: operations are matched, checked and modeled, but no data moves.
bool payload_free();
// Whether the calls' buffers must go through host copies (staging.h) before the coordinator
// can work on them.
bool staging_needed();

// Posts every call before waiting on any, then waits for all. With staging, the calls read and
// write the host copies in *staging instead of the device buffers. The calls become ready at
// the clock's time and the clock waits for the last to end (nullptr: no modeled time). Throws
// the first failure, after waiting for what was posted.
void run_batch(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock);

}  // namespace fakegpu::stub
