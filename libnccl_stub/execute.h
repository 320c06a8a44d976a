// Executing a set of collective calls: queued per stream, or run now from the calling thread.
#pragma once

#include <vector>

#include "group.h"

namespace fakegpu::stub {

// Runs or queues calls given in the order they took their sequence numbers: those on streams
// are queued per stream (first), those on the legacy stream run now. When queuing fails, the
// calls not yet submitted give their numbers back, so that the ranks' next calls still match.
void execute(std::vector<CollectiveCall> calls);

}  // namespace fakegpu::stub
