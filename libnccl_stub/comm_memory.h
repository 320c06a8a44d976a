// A communicator's device memory, as NCCL would take it on the rank's GPU (the coordinator's
// planner/nccl_memory.h figures): charged to the GPU through fakegpu's runtime when the
// communicator is made, when each algorithm first connects, and when two ranks first exchange
// messages; given back when it is destroyed. So cudaMemGetInfo, NVML, PyTorch and the report
// see NCCL's share of the GPU. Nothing over NVIDIA's runtime, which has the real thing.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <utility>

#include "wire.h"

struct ncclComm;

namespace fakegpu::stub {

struct CommMemory {
  std::mutex mu;
  wire::NcclMemory plan;
  // planner::NcclPiece bits charged so far; read without the lock, so that a collective whose
  // pieces are connected (all but a communicator's first few) takes no lock here.
  std::atomic<uint8_t> connected{0};
  std::set<std::pair<int, bool>> peers;     // (peer, sending) connections charged so far
  bool pool_sent = false, pool_received = false;
  uint64_t charged = 0;
};

// The communicator's init memory; an ncclSystemError naming the sizes when the GPU is full.
void charge_comm_init(ncclComm* comm, const wire::NcclMemory& plan);
// What an operation's reply says its algorithm or its pair of ranks connected first.
void charge_connections(ncclComm* comm, const wire::Collective& call, const wire::CollectiveDone& done);
void release_comm_memory(ncclComm* comm);

}  // namespace fakegpu::stub
