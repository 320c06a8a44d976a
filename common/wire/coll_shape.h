// What each collective moves, rank by rank. The stub uses it to size the data it sends and
// the buffer it receives into; the coordinator uses it to check what arrives.
#pragma once

#include <cstdint>

#include "wire.h"

namespace fakegpu {

struct CollShape {
  uint64_t send_elems = 0;  // elements this rank contributes
  uint64_t recv_elems = 0;  // elements this rank gets back
};

// count is the count argument of the NCCL call (sendcount for AllGather, recvcount for
// ReduceScatter, the per-peer count for AlltoAll). root is the root, or the peer for
// Send/Recv. Returns false when count * nranks overflows.
bool coll_shape(wire::CollType type, uint64_t count, int rank, int root, int nranks, CollShape* out);

// Reductions combine contributions; the others only move them.
bool is_reduction(wire::CollType type);
bool has_root(wire::CollType type);
bool is_point_to_point(wire::CollType type);

}  // namespace fakegpu
