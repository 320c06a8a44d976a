// Runs one batch of collective calls against the coordinator (see batch.h).
#include "batch.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "activity_forward.h"
#include "cuda_bridge.h"
#include "env.h"
#include "peer_path.h"
#include "reduce.h"

namespace fakegpu::stub {

namespace {

// FAKEGPU_PAYLOAD: every operation moves its data (unset), none does (`none`: timing-only runs,
// matched, checked and modeled, needing neither staging nor buffers), or only small ones do.
enum class Payload { kAll, kSmall, kNone };

Payload payload() {
  static const Payload mode = [] {  // checked at init
    const std::string v = env::get(env::kPayload);
    return v == "none" ? Payload::kNone : v == "small" ? Payload::kSmall : Payload::kAll;
  }();
  return mode;
}

// FAKEGPU_PAYLOAD=small: only operations this small move their data. Every rank decides alike:
// the larger of an operation's two buffers is the same size on each.
constexpr size_t kSmallPayloadBytes = 64 << 10;

bool moves_data(const CollectiveCall& c) {
  const Payload mode = payload();
  if (mode != Payload::kSmall) return mode == Payload::kAll;
  return std::max(c.send_bytes, c.recv_bytes) <= kSmallPayloadBytes;
}

// What a batch does on each communicator it sends or receives on: its Sends share channel
// blocks with the receives (wire::kSendsAndReceives), and one Send and one Receive with a single
// peer are a pairwise exchange (wire::kPairExchange). Kept per thread, so a batch allocates
// nothing once warm.
struct CommExchange {
  const ncclComm* comm;
  int sends = 0, receives = 0;
  int32_t send_peer = -1, receive_peer = -1;
  uint8_t send_flags() const {
    return (receives ? wire::kSendsAndReceives : 0) |
           (sends == 1 && receives == 1 && send_peer == receive_peer ? wire::kPairExchange : 0);
  }
};
const std::vector<CommExchange>& exchanges(const std::vector<CollectiveCall>& calls) {
  thread_local std::vector<CommExchange> found;
  found.clear();
  for (const CollectiveCall& c : calls) {
    const bool send = c.desc.coll == wire::CollType::kSend, receive = c.desc.coll == wire::CollType::kRecv;
    if (!send && !receive) continue;
    auto it = std::find_if(found.begin(), found.end(), [&](const CommExchange& e) { return e.comm == c.comm; });
    if (it == found.end()) it = found.insert(found.end(), CommExchange{c.comm});
    (send ? it->sends : it->receives) += 1;
    (send ? it->send_peer : it->receive_peer) = c.desc.root;
  }
  return found;
}

uint8_t send_flags(const std::vector<CommExchange>& found, const ncclComm* comm) {
  auto it = std::find_if(found.begin(), found.end(), [&](const CommExchange& e) { return e.comm == comm; });
  return it == found.end() ? 0 : it->send_flags();
}

}  // namespace

bool payload_free() { return payload() == Payload::kNone; }

bool staging_needed() { return needs_staging() && !payload_free(); }

void PostedBatch::note(ncclResult_t code, const std::string& error) {
  if (first_code == ncclSuccess) first_code = code, first_error = error;
}

bool PostedBatch::ready() const {
  if (exchange) return exchanged_ready(*this);
  return std::all_of(requests.begin(), requests.end(), [](const std::shared_ptr<Request>& r) { return r->ready(); });
}

// Posts every call before waiting on any: a group may hold several ranks of one communicator,
// and none of them can finish until all have been posted. With staging, the calls read and
// write the host copies instead of the device buffers.
void post_batch(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock, PostedBatch* posted) {
  const CudaBridge& cu = cuda();
  uint64_t track = 0;
  posted->ready_us = cu.modeled_now(clock, &track);  // where the stream is on the modeled clock
  // A lone small AllReduce, Broadcast or AllGather of ranks on one host: they exchange the data
  // among themselves.
  if (!staging && calls.size() == 1 && post_exchanged(calls.front(), posted->ready_us, track, posted)) return;
  const std::vector<CommExchange>& found = exchanges(calls);
  try {
    for (size_t i = 0; i < calls.size(); ++i) {
      const CollectiveCall& c = calls[i];
      wire::Collective desc = c.desc;
      desc.ready_us = posted->ready_us;
      desc.track = track;
      if (c.desc.coll == wire::CollType::kSend) desc.flags |= send_flags(found, c.comm);
      const void* send = c.sendbuff;
      void* recv = c.recvbuff;
      size_t send_bytes = c.send_bytes, recv_bytes = c.recv_bytes;
      if (!moves_data(c)) {
        desc.flags |= wire::kNoPayload;
        send = recv = nullptr;
        send_bytes = recv_bytes = 0;
      } else {
        CudaBridge::Segment send_home, recv_home;  // fd -1: not in shared memory
        if (staging) {
          StagingSet::Entry& st = (*staging)[i];
          send = st.send.data, recv = st.recv.data;
          send_home = st.send.segment, recv_home = st.recv.segment;
          if (c.device_scalar) std::memcpy(&desc.scalar, st.scalar, dtype_size(desc.dtype));
        } else {
          if (c.device_scalar) std::memcpy(&desc.scalar, c.device_scalar, dtype_size(desc.dtype));
          if (send_bytes) cu.find_segment(send, send_bytes, &send_home);
          if (recv_bytes) cu.find_segment(recv, recv_bytes, &recv_home);
        }
        // A buffer in shared memory is named, not sent: the coordinator works on it in place.
        Client& client = *c.comm->client;
        auto in_place = [&](const CudaBridge::Segment& seg) {
          return seg.fd >= 0 && client.share_segment(seg.id, seg.fd, seg.size);
        };
        if (send_bytes && in_place(send_home)) {
          desc.send = {send_home.id, send_home.offset};
          send_bytes = 0;
        }
        if (recv_bytes && in_place(recv_home)) {
          desc.recv = {recv_home.id, recv_home.offset};
          recv_bytes = 0;
        }
      }
      posted->requests.push_back(c.comm->client->submit(desc, send, send_bytes, recv, recv_bytes));
    }
  } catch (const NcclError& e) {
    posted->note(e.code(), e.what());  // stop posting; what was posted is still waited for
  }
}

void finish_batch(const std::vector<CollectiveCall>& calls, StreamClock clock, PostedBatch& posted) {
  // Calls of one batch run side by side: the stream waits for the one that ends last.
  const double ready_us = posted.ready_us;
  double end_us = ready_us;
  if (posted.exchange) {
    end_us = std::max(end_us, finish_exchanged(calls.front(), posted));
  } else {
    for (size_t i = 0; i < posted.requests.size(); ++i) {
      try {
        auto done = posted.requests[i]->reply<wire::CollectiveDone>();
        learn_from_reply(calls[i].comm, calls[i].desc, done);
        end_us = std::max(end_us, (done.start_us >= 0 ? done.start_us : ready_us) + done.modeled_us);
      } catch (const NcclError& e) {
        posted.note(e.code(), e.what());
      }
    }
    posted.requests.clear();
    if (posted.first_code != ncclSuccess) throw NcclError(posted.first_code, posted.first_error);
  }
  cuda().collective_done(clock, ready_us, end_us);
  forward_activity(*calls.front().comm->client, kActivityBatch);
}

void run_batch(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock) {
  PostedBatch posted;
  post_batch(calls, staging, clock, &posted);
  finish_batch(calls, clock, posted);
}

}  // namespace fakegpu::stub
