// A collective call as the API records it, and what happens to it next: groups
// (ncclGroupStart/End, group.cpp) collect calls and run them together at the outermost
// ncclGroupEnd, so one thread can drive several ranks; sequence numbers (sequence.cpp) line the
// calls up with the peers'. execute.h runs them.
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
// Gives back the sequence number a call took, when it will not run now, so the rank's next call
// still matches its peers'. Only the newest number of its communicator can go back; otherwise
// the communicator is failed (asynchronous error), since it can no longer match its peers.
void release_sequence_number(const CollectiveCall& call);
// The same for calls given in the order they took their numbers; newest first.
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
// Runs the call now, or at the group's end when inside one. The call's sequence number is taken
// before: if the call cannot be submitted, this gives it back before throwing.
void submit_collective(const CollectiveCall& call);

}  // namespace fakegpu::stub
