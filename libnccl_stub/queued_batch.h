// A batch of collective calls that runs later, from a stream or a graph replay: its count of
// operations in flight, and how its failures reach the communicators.
#pragma once

#include <string>
#include <vector>

#include "batch.h"
#include "cuda_bridge.h"
#include "group.h"
#include "staging.h"

namespace fakegpu::stub {

// Counts a batch's calls as in flight on their communicators for as long as it lives: finalize
// and destroy wait for the count to reach zero. The functions one enqueue queues share it, so
// the operation is over when the last of them has run and been destroyed, or at once when
// queuing failed and nothing holds it any more.
class InflightHold {
 public:
  explicit InflightHold(const std::vector<CollectiveCall>& calls);
  ~InflightHold();
  InflightHold(const InflightHold&) = delete;
  InflightHold& operator=(const InflightHold&) = delete;

 private:
  std::vector<ncclComm*> comms_;
};

// Logs the failure and makes it the asynchronous error of every communicator of the batch.
void fail_batch(const std::vector<CollectiveCall>& calls, ncclResult_t code, const std::string& message);

// Runs queued calls from their stream: a failure becomes the communicators' asynchronous error.
// Failures stay inside: the caller is the CUDA runtime's worker thread. `clock` is the one the
// runtime handed the queued function.
void run_queued(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock);
// The same in two parts: start_queued posts the calls (through the staging buffers when given),
// noting a failure in *posted; finish_queued waits for them and fails the batch as run_queued
// does.
void start_queued(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock,
                  PostedBatch* posted);
void finish_queued(const std::vector<CollectiveCall>& calls, StreamClock clock, PostedBatch* posted);

}  // namespace fakegpu::stub
