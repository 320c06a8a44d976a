// Running one batch of collective calls against the coordinator: posting them, naming buffers
// that live in shared memory, waiting for the replies and moving the stream's modeled clock.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client.h"
#include "cuda_bridge.h"
#include "group.h"
#include "staging.h"

namespace fakegpu::stub {

// FAKEGPU_PAYLOAD=none: operations are matched, checked and modeled, but no data moves.
bool payload_free();
// Whether the calls' buffers must go through host copies (staging.h) before the coordinator
// can work on them.
bool staging_needed();

// What post_batch leaves for finish_batch: the requests in flight and the first failure.
struct PostedBatch {
  double ready_us = -1;  // the stream's modeled time when the calls were posted
  std::vector<std::shared_ptr<Request>> requests;
  ncclResult_t first_code = ncclSuccess;
  std::string first_error;
  // Set when the batch's one call went through its communicator's peer mailbox (peer_path.h).
  struct Exchange {
    std::shared_ptr<PeerExchange> mailbox;
    uint64_t seq = 0;
    double time_us = 0;  // its uncontended time
  };
  std::optional<Exchange> exchange;
  void note(ncclResult_t code, const std::string& error);  // keeps the first
  // Whether every reply is in, so finish_batch would not wait (reads what has arrived).
  bool ready() const;
};

// Posts every call, without waiting: the calls become ready at the clock's time. A failure to
// post stops the posting and is noted in *posted, for finish_batch to throw.
void post_batch(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock, PostedBatch* posted);
// Waits for what post_batch posted and moves the clock to the end of the last call (nullptr:
// no modeled time). Throws the first failure, after waiting for everything posted.
void finish_batch(const std::vector<CollectiveCall>& calls, StreamClock clock, PostedBatch& posted);

// Posts every call before waiting on any, then waits for all (post_batch, then finish_batch).
// With staging, the calls read and write the host copies in *staging instead of the device
// buffers. The calls become ready at the clock's time and the clock waits for the last to end
// (nullptr: no modeled time). Throws the first failure, after waiting for what was posted.
void run_batch(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock);

}  // namespace fakegpu::stub
