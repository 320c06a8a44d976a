// Collectives and point-to-point transfers: matching the ranks' calls, finding their buffers
// (shared device memory, or data carried in the frames), running the kernel once every rank is
// in, and replying to each rank.
#include <fmt/format.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "coll_shape.h"
#include "job.h"
#include "kernels.h"
#include "peer_exchange.h"
#include "reduce.h"

namespace fakegpu::coord {

using wire::CollType;
using wire::Status;

namespace {

// A buffer reference that does not fit the segment it names; answered with an error, not a drop.
class RefError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// No buffers travel: a timing-only run, or ranks that exchange the data among themselves.
bool payload_free(const wire::Collective& c) { return c.flags & (wire::kNoPayload | wire::kPeerExchange); }
bool peer_exchanged(const wire::Collective& c) { return c.flags & wire::kPeerExchange; }

}  // namespace

SegmentMapping::~SegmentMapping() { munmap(base_, size_); }

void Job::handle_share_segment(Client& client, const wire::ShareSegment& msg, int fd) {
  if (fd < 0) {
    client.segment_errors[msg.segment] = "its file descriptor did not arrive (segments can only be shared over unix sockets)";
    return;
  }
  void* base = mmap(nullptr, msg.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  ::close(fd);  // the mapping keeps the memory alive
  if (base == MAP_FAILED) {
    client.segment_errors[msg.segment] = fmt::format("mmap of {} bytes failed: {}", msg.size, std::strerror(errno));
    return;
  }
  client.segments[msg.segment] = std::make_shared<const SegmentMapping>(static_cast<uint8_t*>(base), msg.size);
  ++stats_.data.segments_mapped;
}

uint8_t* Job::resolve(Client& client, const wire::BufferRef& ref, uint64_t bytes, std::shared_ptr<const SegmentMapping>* keep) {
  auto it = client.segments.find(ref.segment);
  if (it == client.segments.end()) {
    auto err = client.segment_errors.find(ref.segment);
    throw RefError(fmt::format("device-memory segment {} is not available: {}", ref.segment,
                               err != client.segment_errors.end() ? err->second : "it was never shared"));
  }
  if (ref.offset > it->second->size() || bytes > it->second->size() - ref.offset)
    throw RefError(fmt::format("a buffer of {} bytes at offset {} does not fit device-memory segment {} of {} bytes",
                               bytes, ref.offset, ref.segment, it->second->size()));
  *keep = it->second;
  return it->second->base() + ref.offset;
}

void Job::handle_collective(ClientId id, const wire::Collective& msg, std::shared_ptr<std::vector<uint8_t>> data,
                            size_t bulk_offset, uint64_t request_id) {
  Comm* comm = member_comm(id, msg.comm_id, msg.rank, request_id, is_point_to_point(msg.coll) ? nullptr : &msg.seq);
  if (!comm) return;
  const int nranks = static_cast<int>(comm->members.size());
  const size_t elem = dtype_size(msg.dtype);
  if (elem == 0 || (is_reduction(msg.coll) && msg.op >= kNumRedOps)) {
    reply_error(id, request_id, Status::kInvalidArgument,
                fmt::format("{}: invalid datatype {} or op {}", wire::coll_type_name(msg.coll), msg.dtype, msg.op));
    return;
  }
  if ((has_root(msg.coll) || is_point_to_point(msg.coll)) && (msg.root < 0 || msg.root >= nranks)) {
    reply_error(id, request_id, Status::kInvalidArgument,
                fmt::format("{}: {} {} is outside 0..{}", wire::coll_type_name(msg.coll),
                            is_point_to_point(msg.coll) ? "peer" : "root", msg.root, nranks - 1));
    return;
  }
  CollShape shape;
  if (!coll_shape(msg.coll, msg.count, msg.rank, msg.root, nranks, &shape) ||
      std::max(shape.send_elems, shape.recv_elems) > UINT64_MAX / elem)
    throw wire::WireError(fmt::format("{} from rank {} overflows", describe_call(msg), msg.rank));
  const uint64_t send_bytes = shape.send_elems * elem, recv_bytes = shape.recv_elems * elem;
  if (peer_exchanged(msg) &&
      (!comm->peer_mailbox || !PeerExchange::handles(msg.coll) || msg.count * elem > PeerExchange::kSlotBytes)) {
    reply_error(id, request_id, Status::kInvalidUsage,
                fmt::format("{}: rank {} exchanged it through a peer mailbox, which communicator {} {}",
                            describe_call(msg), msg.rank, comm->id,
                            comm->peer_mailbox ? fmt::format("keeps for AllReduces, Broadcasts and AllGathers of "
                                                             "at most {} bytes per rank",
                                                             PeerExchange::kSlotBytes)
                                               : std::string("does not have")));
    return;
  }
  const uint64_t bulk = data ? data->size() - bulk_offset : 0;
  const uint64_t expected = msg.send.shared() || payload_free(msg) ? 0 : send_bytes;
  if (bulk != expected)
    throw wire::WireError(fmt::format("{} from rank {} carries {} bytes of data, expected {}", describe_call(msg),
                                      msg.rank, bulk, expected));

  Client& client = clients_[id];
  RankData rank;
  rank.scalar = msg.scalar;
  if (peer_exchanged(msg)) {
    // the ranks move the data: it is matched and modeled here
  } else if (payload_free(msg)) {
    stats_.data.skipped_bytes += send_bytes + recv_bytes;  // no buffers: the operation is only matched and modeled
  } else {
    try {
      if (msg.send.shared() && send_bytes) rank.in = resolve(client, msg.send, send_bytes, &rank.in_segment);
      if (msg.recv.shared() && recv_bytes) rank.out = resolve(client, msg.recv, recv_bytes, &rank.out_segment);
    } catch (const RefError& e) {
      reply_error(id, request_id, Status::kInvalidArgument, fmt::format("{}: {}", describe_call(msg), e.what()));
      return;
    }
    if (!msg.send.shared() && send_bytes) {
      rank.body = std::move(data);
      rank.in = rank.body->data() + bulk_offset;
    }
    (msg.send.shared() ? stats_.data.shared_bytes : stats_.data.socket_bytes) += send_bytes;
    (msg.recv.shared() ? stats_.data.shared_bytes : stats_.data.socket_bytes) += recv_bytes;
  }
  ++client.collectives;
  // One clock reading per arrival: for where-is-it diagnoses, wait times and timeouts.
  const auto now = std::chrono::steady_clock::now();
  client.last_coll = msg.coll;
  note_post(client, Posted::kCollective, msg.comm_id, msg.seq, now);
  if (is_point_to_point(msg.coll)) {
    if (stands_in())
      if (const std::string why = pair_refusal(*comm, id, msg); !why.empty()) {
        reply_error(id, request_id, Status::kInvalidUsage, why);
        return;
      }
    handle_p2p(*comm, id, msg, std::move(rank), request_id, now);
    if (stands_in()) {
      post_stand_in_side(*comm, msg, now);
      post_stood_in_messages(*comm, id, msg, now);
    }
  } else
    handle_collective_arrival(*comm, id, msg, std::move(rank), request_id, now);
}

void Job::handle_collective_arrival(Comm& comm, ClientId id, const wire::Collective& msg, RankData data,
                                    uint64_t request_id, std::chrono::steady_clock::time_point now) {
  const int nranks = static_cast<int>(comm.members.size());
  PendingOp& op = comm.ops[msg.seq];
  if (!op.opened()) {
    op.open(msg, nranks, now);
    for (int r = 0; r < nranks; ++r)
      if (comm.members[r].destroyed) {
        fail_departed(comm, msg.seq, op, r);
        break;
      }
  }
  if (op.joined(msg.rank)) {
    reply_error(id, request_id, Status::kInvalidUsage,
                fmt::format("rank {} posted operation {} on communicator {} twice", msg.rank, msg.seq, comm.id));
    return;
  }
  bool complete = op.join(msg, request_id, now);

  if (!op.failure.empty()) {
    reply_error(id, request_id, op.failure_code, op.failure);
  } else if (const char* kind = collective_mismatch(op.first, msg)) {
    stats_.count_mismatch(kind);
    std::string why = fmt::format("{}: collective mismatch on communicator {} at operation {}:", kind, comm.id, msg.seq);
    for (int r = 0; r < nranks; ++r)
      if (op.request_ids[r]) why += fmt::format(" rank {} called {};", r, describe_call(op.calls[r]));
    why.pop_back();
    fail_op(comm, op, Status::kInvalidUsage, why);
  } else {
    if (stands_in()) complete = join_stand_ins(comm, op, msg, data, now) || complete;
    op.ranks[msg.rank] = std::move(data);
  }

  if (complete) {
    // Every rank waited from its arrival until the last one came: stragglers show up as the
    // ranks that never wait.
    const auto last = op.arrived_at[msg.rank];
    for (int r = 0; r < nranks; ++r)
      clients_[comm.members[r].client].wait_us += std::chrono::duration<double, std::micro>(last - op.arrived_at[r]).count();
    if (op.failure.empty()) complete_op(comm, op);
    comm.ops.erase(msg.seq);
  }
}

void Job::complete_op(Comm& comm, PendingOp& op) {
  const auto& c = op.first;
  const int nranks = static_cast<int>(comm.members.size());
  const uint64_t elem = dtype_size(c.dtype);
  ++comm.collectives;
  CollShape per_rank;
  coll_shape(c.coll, c.count, c.root, c.root, nranks, &per_rank);
  std::vector<Trace::RankTrack> tracks(nranks);
  for (int r = 0; r < nranks; ++r) tracks[r] = {comm.members[r].global_rank, op.tracks[r]};
  const uint64_t bytes = std::max(per_rank.send_elems, per_rank.recv_elems) * elem;
  const wire::CollectiveDone done = count_completed(c, bytes, comm, op.ready_us, std::move(tracks));
  for (int r = 0; r < nranks; ++r) count_rank_part(comm.members[r].client, bytes, op.readies[r], done);
  if (stands_in())
    for (int r = 0; r < nranks; ++r) ledger_call(comm.members[r].client, comm.id, c, r, done);
  if (!comm.mirrors.empty()) {
    std::vector<MirroredPart> parts;
    for (int r = 0; r < nranks; ++r) parts.push_back({r, op.readies[r], op.tracks[r]});
    run_on_mirrors(comm, c, bytes, op.ready_us, parts);
  }
  if (payload_free(c)) {
    if (peer_exchanged(c)) {  // its ranks have their results and computed its time: no answer
      ++stats_.data.peer_exchange_ops;
      stats_.data.peer_exchange_bytes += bytes;
    } else {
      for (int r = 0; r < nranks; ++r) reply(comm.members[r].client, op.request_ids[r], done);
    }
    op.ranks.clear();
    return;
  }
  // Ranks whose result travels back on the socket get a reply buffer; the rest are written in place.
  std::vector<uint64_t> recv_bytes(nranks);
  uint64_t reply_bytes = 0;
  for (int r = 0; r < nranks; ++r) {
    CollShape shape;
    coll_shape(c.coll, c.count, r, c.root, nranks, &shape);
    // A stand-in's result goes nowhere: none is made.
    recv_bytes[r] = is_stand_in(comm.members[r].client) ? 0 : shape.recv_elems * elem;
    if (!op.ranks[r].out) reply_bytes += recv_bytes[r];
  }
  if (reply_bytes > max_buffer_bytes_) {
    fail_op(comm, op, Status::kSystemError,
            too_big(reply_bytes, fmt::format("the results of {} on communicator {}", describe_call(c), comm.id)));
    return;
  }
  std::vector<std::shared_ptr<std::vector<uint8_t>>> replies(nranks);
  std::vector<KernelRank> kernel(nranks);
  uint64_t moved = 0;
  for (int r = 0; r < nranks; ++r) {
    RankData& d = op.ranks[r];
    if (!d.out && recv_bytes[r]) {
      replies[r] = std::make_shared<std::vector<uint8_t>>(recv_bytes[r]);
      d.out = replies[r]->data();
    }
    kernel[r] = {d.in, d.out, d.scalar};
    moved += recv_bytes[r];
  }
  Replyees to;
  for (int r = 0; r < nranks; ++r) to.emplace_back(comm.members[r].client, op.request_ids[r]);
  // The work holds the ranks' data (segments, socket bodies) until it is done.
  move_data(
      moved, [c, kernel, data = std::move(op.ranks)](Executor& pool) { run_collective(c, kernel, pool); },
      [this, replies, done](const Replyees& to) {
        for (size_t r = 0; r < to.size(); ++r) {
          std::vector<Bulk> bulk;
          if (replies[r]) bulk.push_back({replies[r], 0, replies[r]->size()});
          reply(to[r].first, to[r].second, done, std::move(bulk));
        }
      },
      std::move(to), c);
  op.ranks.clear();
}

namespace {

// Runs a data-plane work; returns why it failed (memory ran out, say), or "" when it did not.
template <typename Work>
std::string attempt(Work& work, Executor& pool) noexcept {
  try {
    work(pool);
    return {};
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

template <typename Work, typename Then>
void Job::move_data(uint64_t bytes, Work work, Then then, Replyees to, const wire::Collective& call) {
  if (bytes < kAsyncDataBytes) {  // at once, on this thread, allocating nothing for it
    std::string failure = attempt(work, serial_executor_);
    return failure.empty() ? then(to) : fail_moved(to, call, failure);
  }
  auto failure = std::make_shared<std::string>();
  data_plane_->run([work = std::move(work), failure, pool = &executor_]() mutable { *failure = attempt(work, *pool); },
                   [this, failure, then = std::move(then), to = std::move(to), call]() mutable {
                     failure->empty() ? then(to) : fail_moved(to, call, *failure);
                   });
}

void Job::fail_moved(const Replyees& to, const wire::Collective& call, const std::string& why) {
  const std::string message = fmt::format("the coordinator could not move the data of {}: {}", describe_call(call), why);
  for (const auto& [client, request] : to) reply_error(client, request, Status::kSystemError, message);
}

void Job::count_rank_part(ClientId client, uint64_t bytes, double ready_us, const wire::CollectiveDone& done) {
  Client& c = clients_[client];
  c.bytes += bytes;
  if (ready_us >= 0 && done.start_us >= 0) c.modeled_wait_us += std::max(0.0, done.start_us - ready_us);
}

void Job::handle_p2p(Comm& comm, ClientId id, const wire::Collective& msg, RankData data, uint64_t request_id,
                     std::chrono::steady_clock::time_point now) {
  const bool sending = msg.coll == CollType::kSend;
  const int src = sending ? msg.rank : msg.root;
  const int dst = sending ? msg.root : msg.rank;
  auto key = std::make_tuple(src, dst, msg.seq);
  PendingP2P& p = comm.p2p[key];
  uint64_t& mine = sending ? p.send_request : p.recv_request;
  if (mine != 0) {
    reply_error(id, request_id, Status::kInvalidUsage,
                fmt::format("rank {} posted {} number {} to rank {} twice", msg.rank, wire::coll_type_name(msg.coll),
                            msg.seq, msg.root));
    return;
  }
  mine = request_id;
  (sending ? p.send : p.recv) = msg;
  (sending ? p.sender : p.receiver) = std::move(data);
  if (!p.send_request || !p.recv_request) {  // wait for the other side
    p.first_at = now;
    return;
  }
  clients_[comm.members[sending ? dst : src].client].wait_us +=
      std::chrono::duration<double, std::micro>(now - p.first_at).count();

  const ClientId sender = comm.members[src].client, receiver = comm.members[dst].client;
  if (const char* kind = p2p_mismatch(p.send, p.recv)) {
    stats_.count_mismatch(kind);
    std::string why = fmt::format("{}: send/recv mismatch on communicator {}, message {} from rank {} to rank {}: "
                                  "rank {} called {}, rank {} called {}",
                                  kind, comm.id, msg.seq, src, dst, src, describe_call(p.send), dst, describe_call(p.recv));
    ++comm.refused;
    reply_error(sender, p.send_request, Status::kInvalidUsage, why);
    reply_error(receiver, p.recv_request, Status::kInvalidUsage, why);
  } else {
    const uint64_t bytes = p.send.count * dtype_size(p.send.dtype);
    const wire::CollectiveDone done =
        count_completed(p.send, bytes, comm, std::max(p.send.ready_us, p.recv.ready_us),
                        {{comm.members[src].global_rank, p.send.track}, {comm.members[dst].global_rank, p.recv.track}});
    count_rank_part(sender, bytes, p.send.ready_us, done);
    count_rank_part(receiver, bytes, p.recv.ready_us, done);
    if (stands_in()) {
      ledger_call(sender, comm.id, p.send, src, done);
      ledger_call(receiver, comm.id, p.send, dst, done);
    }
    if (!comm.mirrors.empty())
      run_on_mirrors(comm, p.send, bytes, std::max(p.send.ready_us, p.recv.ready_us),
                     {{src, p.send.ready_us, p.send.track}, {dst, p.recv.ready_us, p.recv.track}});
    if (stands_in() && !payload_free(p.send))
      if (auto echo = stand_in_message(comm, src, dst, p, bytes)) {
        p.sender.in = echo->data();
        p.sender.body = std::move(echo);
      }
    std::vector<Bulk> bulk;
    // A payload-free message has no buffers on either side, and a stand-in has none to receive
    // into; one that sends no data of its own gives the receiver zeros.
    if (p.receiver.out) {  // in place, in the receiver's shared memory
      move_data(
          bytes,
          [sent = std::move(p.sender), received = std::move(p.receiver), bytes](Executor& pool) {
            if (sent.in)
              copy_parallel(received.out, sent.in, bytes, pool);
            else
              std::memset(received.out, 0, bytes);  // a stand-in's message
          },
          [this, done](const Replyees& to) {  // the receiver first, as below
            reply(to[1].first, to[1].second, done);
            reply(to[0].first, to[0].second, done);
          },
          {{sender, p.send_request}, {receiver, p.recv_request}}, p.send);
      comm.p2p.erase(key);
      return;
    }
    if (is_stand_in(receiver)) {
      // Its result goes nowhere.
    } else if (p.sender.body) {  // socket to socket: pass the sender's frame on as it is
      bulk.push_back({p.sender.body, static_cast<size_t>(p.sender.in - p.sender.body->data()), bytes});
    } else if (bytes && !payload_free(p.send)) {
      auto copy = p.sender.in ? std::make_shared<std::vector<uint8_t>>(p.sender.in, p.sender.in + bytes)
                              : std::make_shared<std::vector<uint8_t>>(bytes);  // a stand-in's: zeros
      bulk.push_back({copy, 0, bytes});
    }
    reply(receiver, p.recv_request, done, std::move(bulk));
    reply(sender, p.send_request, done);
  }
  comm.p2p.erase(key);
}

void Job::fail_pending(Comm& comm, Status code, const std::string& why) {
  for (auto& [seq, op] : comm.ops)
    if (op.failure.empty()) fail_op(comm, op, code, why);
  for (auto& [key, p2p] : comm.p2p) {
    ++comm.refused;
    auto [src, dst, pair_seq] = key;
    if (p2p.send_request) reply_error(comm.members[src].client, p2p.send_request, code, why);
    if (p2p.recv_request) reply_error(comm.members[dst].client, p2p.recv_request, code, why);
  }
  comm.p2p.clear();
}

void Job::fail_departed(Comm& comm, uint64_t seq, PendingOp& op, int rank) {
  stats_.count_mismatch("COLLECTIVE_STATE_MISMATCH");
  fail_op(comm, op, Status::kInvalidUsage,
          fmt::format("COLLECTIVE_STATE_MISMATCH on communicator {} at operation {} ({}): rank {} ({}) destroyed the "
                      "communicator instead of joining it",
                      comm.id, seq, describe_call(op.first), rank, describe_client(comm.members[rank].client)));
}

void Job::fail_op(Comm& comm, PendingOp& op, Status code, const std::string& why) {
  ++comm.refused;
  if (comm.failure.empty() && comm.first_failure.empty()) comm.first_failure = why;
  op.failure = why;
  op.failure_code = code;
  op.ranks.assign(op.ranks.size(), RankData{});
  for (size_t r = 0; r < op.request_ids.size(); ++r)
    if (op.request_ids[r]) reply_error(comm.members[r].client, op.request_ids[r], code, why);
}

}  // namespace fakegpu::coord
