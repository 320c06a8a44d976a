// The device memory NCCL takes for a communicator, by NCCL's rules (2.22 and later, cuMem on):
// every allocation rounded up to 2 MiB; at init the communicator's device structures and three
// per channel, and NVLS's per-channel structures; the first time an algorithm runs, the
// connections it needs on every channel (runtime connection, NCCL_RUNTIME_CONNECT's default);
// the first send or receive between two ranks, their connections on the peer's channels.
//   A connection inside a node (P2P transport): the receiver holds the LL, LL128 and Simple
//   buffers (Simple on the sender in P2P read mode, NCCL's default between A100s over NVLink)
//   and 4 KiB of connection state each side; across nodes (NET transport with GPUDirect RDMA)
//   the receiver holds all three, the sender LL128 and Simple.
//   NVLS: per rank, heads x channels x 2 x 8 chunks of NCCL_NVLS_CHUNKSIZE.
// With NCCL_RUNTIME_CONNECT=0 every algorithm's pieces come at init instead.
#pragma once

#include <cstdint>

#include "comm_model.h"

namespace fakegpu::planner {

// Pieces of a communicator's memory that its algorithms connect the first time they run.
enum NcclPiece : uint8_t { kRingConnections = 1, kTreeConnections = 2, kNvlsBuffers = 4 };
// The pieces an algorithm (Algo) needs.
uint8_t nccl_pieces(int algo);

// At ncclCommInitRank / ncclCommSplit (init), and per piece: ring (kRingConnections), tree
// (kTreeConnections: those the rings have not made), nvls (kNvlsBuffers). The wire's own struct:
// the coordinator hands it to the rank as is.
using NcclMemoryPlan = wire::NcclMemory;
// What comm rank `rank` of the model's communicator holds.
NcclMemoryPlan nccl_memory_plan(const CommModel& model, int rank);

// One rank's side of the send/recv connections from `from` to `to`, on all the channels a peer
// gets; across nodes the first also brings the proxy's shared pool for that direction.
struct NcclP2pMemory {
  uint64_t send = 0;  // at `from`
  uint64_t recv = 0;  // at `to`
  uint64_t pool = 0;  // across nodes: each side's shared buffer pool, once per communicator
};
NcclP2pMemory nccl_p2p_memory(const CommModel& model, int from, int to);

}  // namespace fakegpu::planner
