// ncclGroupSimulateEnd's answer: the modeled time of a group's calls, priced without running them.
#pragma once

#include <vector>

#include "group.h"

namespace fakegpu::stub {

// Asks the coordinator what the calls would take on each communicator's modeled channels, in
// microseconds; the group's time is that of its slowest communicator. Calls on a communicator
// still initialising add nothing.
double simulate(const std::vector<CollectiveCall>& calls);

}  // namespace fakegpu::stub
