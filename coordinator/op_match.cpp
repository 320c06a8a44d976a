#include "op_match.h"

#include <fmt/format.h>

#include <algorithm>

#include "comm_state.h"
#include "coll_shape.h"
#include "reduce.h"

namespace fakegpu::coord {

std::string describe_call(const wire::Collective& c) {
  std::string s = fmt::format("{}(count={}, {}", wire::coll_type_name(c.coll), c.count, dtype_name(c.dtype));
  if (is_reduction(c.coll)) s += fmt::format(", {}", redop_name(c.op));
  if (has_root(c.coll)) s += fmt::format(", root={}", c.root);
  if (is_point_to_point(c.coll)) s += fmt::format(", peer={}", c.root);
  return s + ")";
}

namespace {
// What every rank of an operation must give alike; kSendsAndReceives is one sender's own fact.
constexpr uint8_t kAgreedFlags = wire::kNoPayload | wire::kPeerExchange;
}  // namespace

const char* collective_mismatch(const wire::Collective& a, const wire::Collective& b) {
  if (a.coll != b.coll) return "COLLECTIVE_TYPE_MISMATCH";
  if (a.dtype != b.dtype) return "COLLECTIVE_DTYPE_MISMATCH";
  if (a.count != b.count || a.op != b.op || a.root != b.root) return "SIZE_OR_SYNTAX_MISMATCH";
  if ((a.flags ^ b.flags) & kAgreedFlags) return "COLLECTIVE_STATE_MISMATCH";
  return nullptr;
}

const char* p2p_mismatch(const wire::Collective& send, const wire::Collective& recv) {
  if (send.dtype != recv.dtype) return "COLLECTIVE_DTYPE_MISMATCH";
  if (send.count != recv.count) return "SIZE_OR_SYNTAX_MISMATCH";
  if ((send.flags ^ recv.flags) & kAgreedFlags) return "COLLECTIVE_STATE_MISMATCH";
  return nullptr;
}

void PendingOp::open(const wire::Collective& call, int nranks, std::chrono::steady_clock::time_point now) {
  first = call;
  request_ids.assign(nranks, 0);
  calls.resize(nranks);
  ranks.resize(nranks);
  arrived_at.resize(nranks);
  tracks.resize(nranks);
  readies.assign(nranks, -1);
  first_at = now;
}

bool PendingOp::join(const wire::Collective& call, uint64_t request_id, std::chrono::steady_clock::time_point now) {
  const int rank = call.rank;
  request_ids[rank] = request_id;
  calls[rank] = call;
  arrived_at[rank] = now;
  ready_us = std::max(ready_us, call.ready_us);
  readies[rank] = call.ready_us;
  tracks[rank] = call.track;
  return ++arrived == static_cast<int>(request_ids.size());
}

}  // namespace fakegpu::coord
