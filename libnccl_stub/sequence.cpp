// Sequence numbers: how a rank's calls line up with its peers'. Each call takes the next number
// of its communicator (or of its peer pair), and gives it back when it will not run.
#include <mutex>
#include <string>

#include "group.h"

namespace fakegpu::stub {

// Sequence numbers change under the communicator's lock: a captured graph replaying on a
// stream takes them too.
void take_sequence_number(CollectiveCall& call) {
  ncclComm* c = call.comm;
  std::lock_guard<std::mutex> lock(c->mu);
  if (call.desc.coll == wire::CollType::kSend)
    call.desc.seq = ++c->next_send_seq[call.desc.root];  // from 1, as collectives count
  else if (call.desc.coll == wire::CollType::kRecv)
    call.desc.seq = ++c->next_recv_seq[call.desc.root];
  else
    call.desc.seq = c->next_seq++;
}

namespace {

// The counter a call's sequence number came from.
uint64_t& sequence_counter(const CollectiveCall& call) {
  ncclComm* c = call.comm;
  if (call.desc.coll == wire::CollType::kSend) return c->next_send_seq[call.desc.root];
  if (call.desc.coll == wire::CollType::kRecv) return c->next_recv_seq[call.desc.root];
  return c->next_seq;
}

// Gives one number back if it is still its counter's newest; a later call has taken one otherwise.
bool give_back(const CollectiveCall& call) {
  std::lock_guard<std::mutex> lock(call.comm->mu);
  uint64_t& counter = sequence_counter(call);
  // Send and recv counters hold the last number taken; the collective counter the next one.
  const bool p2p = call.desc.coll == wire::CollType::kSend || call.desc.coll == wire::CollType::kRecv;
  const uint64_t newest = p2p ? counter : counter - 1;
  if (call.desc.seq != newest) return false;
  --counter;
  return true;
}

}  // namespace

// A number that cannot be given back leaves a gap its peers will never see: every later call
// on the communicator would wait for a partner that never comes, so the communicator fails now.
void release_sequence_number(const CollectiveCall& call) {
  if (give_back(call)) return;
  const std::string message =
      "the communicator can no longer match its peers: an operation that was not submitted had taken "
      "sequence number " + std::to_string(call.desc.seq) + ", and later operations on the communicator "
      "were already submitted";
  warn(message);
  set_async_error(call.comm, ncclInternalError, message);
}

void release_sequence_numbers(const std::vector<CollectiveCall>& calls) {
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) release_sequence_number(*it);
}

}  // namespace fakegpu::stub
