// The rank's side of peer exchange (see peer_path.h).
#include "peer_path.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "comm.h"
#include "env.h"
#include "reduce.h"

namespace fakegpu::stub {
namespace {

// What a shape's time is remembered by: the same on every rank of a call.
std::tuple<int, uint64_t, int> shape_key(const wire::Collective& c) {
  return {static_cast<int>(c.coll), c.count * dtype_size(c.dtype), c.root};
}

// Sizes remembered per communicator; further sizes keep going through the coordinator.
constexpr size_t kMaxSizes = 1024;
// How long a rank waits for the coordinator to say why a round failed: it answers at once, so
// running out means a bug, which an error names instead of a hang.
constexpr std::chrono::seconds kDiagnosisWait{30};

}  // namespace

bool peer_exchange_offered() {
  static const bool offered = env::get(env::kPeerExchange) && !staging_needed() && !payload_free();
  return offered;
}

void adopt_peer_mailbox(ncclComm* comm) {
  std::shared_ptr<PeerExchange> mailbox = comm->client->peer_mailbox(comm->id);
  if (mailbox && mailbox->nranks() != comm->nranks) mailbox = nullptr;  // cannot be: then never exchange
  std::lock_guard<std::mutex> lock(comm->peers.mu);
  comm->peers.mailbox = std::move(mailbox);
}

void learn_from_reply(ncclComm* comm, const wire::Collective& call, const wire::CollectiveDone& done) {
  charge_connections(comm, call, done);
  if (done.start_us < 0) return;
  PeerBook& book = comm->peers;
  std::lock_guard<std::mutex> lock(book.mu);
  // The sum the coordinator keeps as the comm's clock, to the bit.
  book.clock_us = std::max(book.clock_us, done.start_us + done.modeled_us);
  if (done.latency_bound && PeerExchange::handles(call.coll) && book.mailbox && book.latency_bound_us.size() < kMaxSizes)
    book.latency_bound_us.try_emplace(shape_key(call), done.uncontended_us);  // allocates only for a new shape
}

bool post_exchanged(const CollectiveCall& call, double ready_us, uint64_t track, PostedBatch* posted) {
  const wire::Collective& d = call.desc;
  const uint64_t rank_bytes = d.count * dtype_size(d.dtype);
  if (ready_us < 0 || !PeerExchange::fits(d.coll, rank_bytes)) return false;
  ncclComm* comm = call.comm;
  std::shared_ptr<PeerExchange> mailbox;
  PeerCall mine;
  double time_us;
  {
    std::lock_guard<std::mutex> lock(comm->peers.mu);
    auto it = comm->peers.latency_bound_us.find(shape_key(d));
    if (!comm->peers.mailbox || it == comm->peers.latency_bound_us.end()) return false;
    mailbox = comm->peers.mailbox;
    time_us = it->second;
    mine.clock_us = comm->peers.clock_us;
  }
  wire::Collective desc = d;
  desc.ready_us = ready_us;
  desc.track = track;
  desc.flags |= wire::kPeerExchange;
  if (call.device_scalar) std::memcpy(&desc.scalar, call.device_scalar, dtype_size(desc.dtype));
  posted->exchange = PostedBatch::Exchange{mailbox, desc.seq, time_us};
  // The coordinator hears of the call first: should a peer never come, it is the one that
  // diagnoses it and releases this rank.
  try {
    posted->requests.push_back(comm->client->submit_unhurried(desc));
  } catch (const NcclError& e) {
    posted->note(e.code(), e.what());
    return true;
  }
  mine.seq = desc.seq;
  mine.count = desc.count;
  mine.scalar = desc.scalar;
  mine.ready_us = ready_us;
  mine.root = desc.root;
  mine.coll = static_cast<uint8_t>(desc.coll);
  mine.dtype = desc.dtype;
  mine.op = desc.op;
  // The last rank makes sure the coordinator is still there: with it gone, no call succeeds.
  Client& client = *comm->client;
  // A Broadcast reads only the root's input.
  const bool contributes = d.coll != wire::CollType::kBroadcast || comm->rank == d.root;
  mailbox->arrive(comm->rank, mine, contributes ? call.sendbuff : nullptr, contributes ? rank_bytes : 0,
                  [&client] { return !client.coordinator_gone(); });
  return true;
}

bool exchanged_ready(const PostedBatch& posted) {
  if (posted.first_code != ncclSuccess || posted.requests.empty()) return true;
  const PostedBatch::Exchange& ex = *posted.exchange;
  if (ex.mailbox->state(ex.seq) != PeerExchange::State::kPending) return true;
  Request& request = *posted.requests.front();
  return request.failed();
}

double finish_exchanged(const CollectiveCall& call, PostedBatch& posted) {
  if (posted.first_code != ncclSuccess) throw NcclError(posted.first_code, posted.first_error);
  const PostedBatch::Exchange ex = *posted.exchange;
  ncclComm* comm = call.comm;
  std::shared_ptr<Request> request = posted.requests.front();
  posted.requests.clear();
  PeerExchange& mailbox = *ex.mailbox;
  // Poll, handing the core on, while the peers are likely to come soon (as the control ring
  // does, and not at all where yielding would not reach them); then sleep in short slices,
  // woken by the last rank. Either way the coordinator's error (a mismatch, a departed or
  // timed-out peer, an abort) ends the wait.
  const auto spin_end = std::chrono::steady_clock::now() + comm->client->spin();
  PeerExchange::State state;
  try {
    while ((state = mailbox.state(ex.seq)) == PeerExchange::State::kPending) {
      if (request->failed()) request->reply<wire::CollectiveDone>();  // throws its error
      if (std::chrono::steady_clock::now() < spin_end) {
        sched_yield();
      } else {
        mailbox.sleep(ex.seq, std::chrono::milliseconds(1));
        if (comm->client->coordinator_gone()) request->reply<wire::CollectiveDone>();  // throws the loss
      }
    }
    if (state == PeerExchange::State::kFailed) {
      // Calls that differ, or a rank that gave up on a failed call: the coordinator fails the
      // call for every rank, and its diagnosis is what this one throws.
      const auto deadline = std::chrono::steady_clock::now() + kDiagnosisWait;
      while (!request->ready() && std::chrono::steady_clock::now() < deadline && !comm->client->coordinator_gone())
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (request->ready() || comm->client->connection_lost()) request->reply<wire::CollectiveDone>();
      throw NcclError(ncclInternalError, "collective " + std::to_string(ex.seq) + " on communicator " +
                                             std::to_string(comm->id) + ": its ranks' calls differ in the peer "
                                             "mailbox, and the coordinator gave no reason within " +
                                             std::to_string(kDiagnosisWait.count()) + " s");
    }
  } catch (const NcclError&) {
    // A round some rank never came to keeps its count of arrivals: this rank uses the mailbox
    // no more. Its peers get the same error (the coordinator fails the call for every rank) and
    // drop it too, so the communicator goes on, if it can, through the coordinator.
    mailbox.give_up(ex.seq);
    std::lock_guard<std::mutex> lock(comm->peers.mu);
    comm->peers.mailbox.reset();
    throw;
  }
  double start_us;
  try {
    start_us = mailbox.take(ex.seq, call.recvbuff, call.recv_bytes);
  } catch (const PeerExchangeError& e) {
    throw NcclError(ncclInvalidUsage, e.what());
  }
  // The coordinator answers an exchanged collective only to fail it, which it has no reason
  // to do once the ranks agreed: nothing more is read for it.
  request->abandon();
  const double end_us = start_us + ex.time_us;  // as the coordinator sums it
  std::lock_guard<std::mutex> lock(comm->peers.mu);
  comm->peers.clock_us = std::max(comm->peers.clock_us, end_us);
  return end_us;
}

}  // namespace fakegpu::stub
