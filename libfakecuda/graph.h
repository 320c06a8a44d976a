// A CUDA graph as fakegpu records it: the work captured from a stream (and from streams that
// joined the capture through events), in capture order. Replaying runs the nodes in that order
// on the launch stream, which is a valid order for any dependencies the capture expressed.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "streams.h"

namespace fakegpu::cuda {

struct GraphNode {
  std::function<void()> work;
  int64_t cost_ns = 0;
  WorkKind kind = kUntracked;
};

struct Graph {
  std::vector<GraphNode> nodes;
  bool invalidated = false;  // a capture that hit an unsupported call
  unsigned long long capture_id = 0;
};

}  // namespace fakegpu::cuda
