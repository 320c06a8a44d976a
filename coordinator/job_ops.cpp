// Collectives and point-to-point transfers: matching the ranks' calls, folding reductions in
// rank order, and replying to each rank with its part of the result.
#include <fmt/format.h>

#include "coll_shape.h"
#include "job.h"
#include "reduce.h"

namespace fakegpu::coord {

using wire::CollType;
using wire::Status;

namespace {

std::string describe_call(const wire::Collective& c) {
  std::string s = fmt::format("{}(count={}, {}", wire::coll_type_name(c.coll), c.count, dtype_name(c.dtype));
  if (is_reduction(c.coll)) s += fmt::format(", {}", redop_name(c.op));
  if (has_root(c.coll)) s += fmt::format(", root={}", c.root);
  if (is_point_to_point(c.coll)) s += fmt::format(", peer={}", c.root);
  return s + ")";
}

bool same_call(const wire::Collective& a, const wire::Collective& b) {
  return a.coll == b.coll && a.dtype == b.dtype && a.op == b.op && a.count == b.count && a.root == b.root;
}

}  // namespace

void Job::handle_collective(ClientId id, const wire::Collective& msg, std::vector<uint8_t> body, size_t bulk_offset,
                            uint64_t request_id) {
  Comm* comm = member_comm(id, msg.comm_id, msg.rank, request_id);
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
  if (!coll_shape(msg.coll, msg.count, msg.rank, msg.root, nranks, &shape) || shape.send_elems > UINT64_MAX / elem ||
      shape.send_elems * elem != body.size() - bulk_offset)
    throw wire::WireError(fmt::format("{} from rank {} carries {} bytes of data, expected {} elements of {}",
                                      describe_call(msg), msg.rank, body.size() - bulk_offset, shape.send_elems,
                                      dtype_name(msg.dtype)));
  ++clients_[id].collectives;
  Contribution data{std::make_shared<std::vector<uint8_t>>(std::move(body)), bulk_offset};
  if (is_reduction(msg.coll)) {
    // Scaling is per rank (each has its own PreMulSum scalar), so it happens on arrival.
    const auto dtype = static_cast<DataType>(msg.dtype);
    const auto op = static_cast<RedOp>(msg.op);
    if (plan_reduction(dtype, op).premultiply)
      premultiply(dtype, data.data(), shape.send_elems, op == RedOp::kAvg ? average_scalar(dtype, nranks) : msg.scalar);
  }
  if (is_point_to_point(msg.coll))
    handle_p2p(*comm, id, msg, std::move(data), request_id);
  else
    handle_collective_arrival(*comm, id, msg, std::move(data), request_id);
}

void Job::handle_collective_arrival(Comm& comm, ClientId id, const wire::Collective& msg, Contribution data,
                                    uint64_t request_id) {
  const int nranks = static_cast<int>(comm.members.size());
  PendingOp& op = comm.ops[msg.seq];
  if (op.request_ids.empty()) {
    op.first = msg;
    op.request_ids.assign(nranks, 0);
    op.calls.resize(nranks);
    op.data.resize(nranks);
  }
  if (op.request_ids[msg.rank] != 0) {
    reply_error(id, request_id, Status::kInvalidUsage,
                fmt::format("rank {} posted operation {} on communicator {} twice", msg.rank, msg.seq, comm.id));
    return;
  }
  op.request_ids[msg.rank] = request_id;
  op.calls[msg.rank] = describe_call(msg);
  ++op.arrived;

  if (!op.failure.empty()) {
    reply_error(id, request_id, Status::kInvalidUsage, op.failure);
  } else if (!same_call(op.first, msg)) {
    std::string why = fmt::format("collective mismatch on communicator {} at operation {}:", comm.id, msg.seq);
    for (int r = 0; r < nranks; ++r)
      if (op.request_ids[r]) why += fmt::format(" rank {} called {};", r, op.calls[r]);
    why.pop_back();
    fail_op(comm, op, Status::kInvalidUsage, why);
  } else {
    op.data[msg.rank] = std::move(data);
    if (is_reduction(msg.coll)) fold_ready_contributions(op);
  }

  if (op.arrived == nranks) {
    if (op.failure.empty()) complete_op(comm, msg.seq, op);
    comm.ops.erase(msg.seq);
  }
}

// Folds contributions into the accumulator in rank order, so results do not depend on which
// rank arrived first; a contribution is released as soon as it has been folded.
void Job::fold_ready_contributions(PendingOp& op) {
  const auto& c = op.first;
  CollShape shape;
  coll_shape(c.coll, c.count, 0, c.root, static_cast<int>(op.data.size()), &shape);
  while (op.folded < static_cast<int>(op.data.size()) && op.data[op.folded].body) {
    Contribution& next = op.data[op.folded];
    const auto dtype = static_cast<DataType>(c.dtype);
    if (op.folded == 0)
      op.acc = std::move(next);
    else
      reduce_into(dtype, plan_reduction(dtype, static_cast<RedOp>(c.op)).fold, op.acc.data(), next.data(),
                  shape.send_elems);
    next = Contribution{};
    ++op.folded;
  }
}

void Job::complete_op(Comm& comm, uint64_t seq, PendingOp& op) {
  const auto& c = op.first;
  const int nranks = static_cast<int>(comm.members.size());
  const uint64_t elem = dtype_size(c.dtype);
  const uint64_t chunk = c.count * elem;  // the call's count, in bytes
  const auto dtype = static_cast<DataType>(c.dtype);
  if (is_reduction(c.coll) && plan_reduction(dtype, static_cast<RedOp>(c.op)).post_divide) {
    CollShape shape;
    coll_shape(c.coll, c.count, 0, c.root, nranks, &shape);
    post_divide(dtype, op.acc.data(), shape.send_elems, nranks);
  }
  for (int r = 0; r < nranks; ++r) {
    std::vector<Bulk> result;
    switch (c.coll) {
      case CollType::kAllReduce: result = {op.acc.slice(0, chunk)}; break;
      case CollType::kReduce: if (r == c.root) result = {op.acc.slice(0, chunk)}; break;
      case CollType::kReduceScatter: result = {op.acc.slice(r * chunk, chunk)}; break;
      case CollType::kBroadcast: result = {op.data[c.root].slice(0, chunk)}; break;
      case CollType::kScatter: result = {op.data[c.root].slice(r * chunk, chunk)}; break;
      case CollType::kAllGather:
      case CollType::kGather:
        if (c.coll == CollType::kAllGather || r == c.root)
          for (int j = 0; j < nranks; ++j) result.push_back(op.data[j].slice(0, chunk));
        break;
      case CollType::kAlltoAll:
        for (int j = 0; j < nranks; ++j) result.push_back(op.data[j].slice(r * chunk, chunk));
        break;
      case CollType::kSend:
      case CollType::kRecv: break;  // never pending here
    }
    reply(comm.members[r].client, op.request_ids[r], wire::CollectiveDone{seq}, std::move(result));
  }
  ++comm.collectives;
  CollShape per_rank;
  coll_shape(c.coll, c.count, c.root, c.root, nranks, &per_rank);
  count_completed(c, std::max(per_rank.send_elems, per_rank.recv_elems) * elem);
}

void Job::handle_p2p(Comm& comm, ClientId id, const wire::Collective& msg, Contribution data, uint64_t request_id) {
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
  if (sending) p.payload = std::move(data);
  if (!p.send_request || !p.recv_request) return;  // wait for the other side

  const ClientId sender = comm.members[src].client, receiver = comm.members[dst].client;
  if (p.send.count != p.recv.count || p.send.dtype != p.recv.dtype) {
    std::string why = fmt::format("send/recv mismatch on communicator {}, message {} from rank {} to rank {}: "
                                  "rank {} called {}, rank {} called {}",
                                  comm.id, msg.seq, src, dst, src, describe_call(p.send), dst, describe_call(p.recv));
    ++comm.refused;
    reply_error(sender, p.send_request, Status::kInvalidUsage, why);
    reply_error(receiver, p.recv_request, Status::kInvalidUsage, why);
  } else {
    const uint64_t bytes = p.send.count * dtype_size(p.send.dtype);
    reply(receiver, p.recv_request, wire::CollectiveDone{msg.seq}, {p.payload.slice(0, bytes)});
    reply(sender, p.send_request, wire::CollectiveDone{msg.seq});
    count_completed(p.send, bytes);
  }
  comm.p2p.erase(key);
}

void Job::fail_op(Comm& comm, PendingOp& op, Status code, const std::string& why) {
  ++comm.refused;
  op.failure = why;
  op.acc = Contribution{};
  op.data.assign(op.data.size(), Contribution{});
  for (size_t r = 0; r < op.request_ids.size(); ++r)
    if (op.request_ids[r]) reply_error(comm.members[r].client, op.request_ids[r], code, why);
}

void Job::count_completed(const wire::Collective& call, uint64_t bytes) {
  ++completed_ops_;
  CollStats& stats = coll_stats_[wire::coll_type_name(call.coll)];
  ++stats.calls;
  stats.bytes += bytes;
}

}  // namespace fakegpu::coord
