// ncclGroupStart/End and the execution of collectives. Inside a group, calls are collected and
// run together at the outermost ncclGroupEnd, so one thread can drive several ranks.
#pragma once

#include "comm.h"
#include "wire.h"

namespace fakegpu::stub {

struct CollectiveCall {
  ncclComm* comm = nullptr;
  wire::Collective desc;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t send_bytes = 0;
  size_t recv_bytes = 0;
  cudaStream_t stream = nullptr;
  const void* device_scalar = nullptr;  // PreMulSum scalar to read from device memory at run time
};

// Fixes the call's sequence number: the next one of its communicator (or of its peer pair).
void take_sequence_number(CollectiveCall& call);
// Gives back the sequence numbers calls took, newest first, when they will not run now.
void release_sequence_numbers(const std::vector<CollectiveCall>& calls);

void group_start();
// Runs what the group collected; returns ncclInProgress when a non-blocking init is still going.
ncclResult_t group_end();
// Ends the group without running its calls (ncclGroupSimulateEnd), returning the modeled time
// in microseconds.
float group_simulate_end();
bool in_group();
// Remembers a communicator whose init or split the outermost group end must wait for.
void group_add_pending_comm(ncclComm* comm);
// Runs the call now, or at the group's end when inside one.
void submit_collective(const CollectiveCall& call);

}  // namespace fakegpu::stub
