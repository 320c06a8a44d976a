// Inits, splits and shrinks: the rendezvous that make communicators. Their ranks wait for each
// other (Rendezvous keeps who came); the last one to arrive makes the communicator and answers all.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "job.h"
#include "peer_exchange.h"

namespace fakegpu::coord {

using wire::Status;

namespace {

// What is wrong with the ranks `rank` asks a shrink of an n-rank communicator to exclude
// (sorted); "" when nothing is.
std::string exclusion_problem(const std::vector<int>& excluded, int n, int rank) {
  for (size_t i = 0; i < excluded.size(); ++i) {
    if (excluded[i] < 0 || excluded[i] >= n)
      return fmt::format("ncclCommShrink: excluded rank {} is outside 0..{}", excluded[i], n - 1);
    if (i > 0 && excluded[i] == excluded[i - 1]) return fmt::format("ncclCommShrink: rank {} is excluded twice", excluded[i]);
    if (excluded[i] == rank)
      return fmt::format("ncclCommShrink: rank {} excludes itself; excluded ranks must not call it", rank);
  }
  if (static_cast<int>(excluded.size()) >= n) return "ncclCommShrink: every rank would be excluded";
  return "";
}

}  // namespace

void Job::handle_comm_init(ClientId id, Client& client, const wire::CommInit& msg, uint64_t request_id) {
  const auto now = std::chrono::steady_clock::now();
  PendingInit& pending = pending_inits_[msg.key];
  if (!pending.split_parent) {  // split_for_group counted and noted its split
    ++client.comm_inits;
    note_post(client, Posted::kInit, 0, 0, now);
  }
  if (pending.failed()) {
    reply_error(id, request_id, Status::kInvalidUsage, pending.failure());
    return;
  }
  const int world = cluster_.world_size();

  // Problems in the job's setup are reported to every rank of the communicator, not just the
  // one that noticed, so no rank is left waiting for a peer that will never complete.
  std::string problem;
  if (msg.nranks <= 0) {
    problem = fmt::format("ncclCommInitRank: nranks must be > 0, rank {} passed {}", msg.rank, msg.nranks);
  } else if (msg.nranks > world) {
    problem = fmt::format("ncclCommInitRank: a communicator of {} ranks does not fit cluster '{}' from {}, "
                          "which has a world size of {}", msg.nranks, cluster_.name, cluster_.source, world);
  } else if (msg.rank < 0 || msg.rank >= msg.nranks) {
    problem = fmt::format("ncclCommInitRank: rank {} is outside 0..{} for a communicator of {} ranks", msg.rank,
                          msg.nranks - 1, msg.nranks);
  } else if (client.hello.env_world_size >= 0 && client.hello.env_world_size != world) {
    problem = fmt::format("the rank's environment says WORLD_SIZE={} but cluster '{}' from {} has {} ranks",
                          client.hello.env_world_size, cluster_.name, cluster_.source, world);
  } else if (client.hello.env_rank >= world) {
    problem = fmt::format("the rank's environment says RANK={} but cluster '{}' from {} only has ranks 0..{}",
                          client.hello.env_rank, cluster_.name, cluster_.source, world - 1);
  } else if (pending.sized() && pending.nranks() != msg.nranks) {
    problem = fmt::format("ncclCommInitRank: ranks disagree on the communicator size: {} and {}", pending.nranks(),
                          msg.nranks);
  } else if (pending.sized() && pending.has_arrived(msg.rank)) {
    problem = fmt::format("ncclCommInitRank: rank {} was claimed twice for one unique id, by {} and by {}", msg.rank,
                          describe_client(pending.arrival(msg.rank).client), describe_client(id));
  }

  if (!problem.empty()) {
    reply_error(id, request_id, Status::kInvalidUsage, problem);
    fail_rendezvous(pending, Status::kInvalidUsage, problem);
    return;
  }
  if (!pending.sized()) {
    pending.expect(msg.nranks);
    pending.name = msg.comm_name;
  }
  if (stands_in()) {
    if (std::string missing = arrive_stand_ins(pending, msg, id, now); !missing.empty()) {
      reply_error(id, request_id, Status::kInvalidUsage, missing);
      fail_rendezvous(pending, Status::kInvalidUsage, missing);
      return;
    }
  }
  if (pending.arrive(msg.rank, {id, request_id, now, msg.cuda_device})) complete_init(msg.key, pending);
}

void Job::complete_init(const wire::CommKey& key, const PendingInit& pending) {
  Comm& comm = comms_.create();
  comm.name = pending.name;
  comm.parent = pending.split_parent;
  const bool spans_world = pending.nranks() == cluster_.world_size();
  for (int r = 0; r < pending.nranks(); ++r) {
    const Rendezvous::Arrival& a = pending.arrival(r);
    Client& client = clients_[a.client];
    Member m{a.client, -1, a.cuda_device, false, a.follows};
    if (spans_world) {
      // The first communicator over the whole world defines identities the launcher did not give.
      m.global_rank = r;
      if (client.global_rank < 0) client.global_rank = r;
    } else {
      int from_this_client = std::count_if(pending.arrivals().begin(), pending.arrivals().end(),
                                           [&](const auto& x) { return x->client == a.client; });
      if (from_this_client == 1) m.global_rank = client.global_rank;
    }
    comm.members.push_back(m);
  }
  if (stands_in()) make_mirrors(comm);
  offer_peer_mailbox(comm);
  for (int r = 0; r < pending.nranks(); ++r) {
    const Rendezvous::Arrival& a = pending.arrival(r);
    const wire::NcclMemory plan = nccl_memory(comm, r);
    if (stands_in()) ledger_init(a.client, comm.id, plan);
    if (pending.split_parent)
      reply(a.client, a.request_id,
            wire::CommSplitDone{comm.id, pending.nranks(), r, comm.members[r].global_rank, plan});
    else
      reply(a.client, a.request_id, wire::CommInitDone{comm.id, comm.members[r].global_rank, plan});
  }
  pending_inits_.erase(key);
}

void Job::handle_comm_split(ClientId id, const wire::CommSplit& msg, uint64_t request_id) {
  Comm* parent = member_comm(id, msg.parent_comm, msg.rank, request_id);
  if (!parent) return;
  if (msg.color < 0 && msg.color != -1) {
    reply_error(id, request_id, Status::kInvalidArgument,
                fmt::format("ncclCommSplit: color {} is invalid: use a value >= 0 or NCCL_SPLIT_NOCOLOR", msg.color));
    return;
  }
  if (stands_in()) {
    split_for_group(id, clients_[id], *parent, msg, request_id);
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  note_post(clients_[id], Posted::kSplit, msg.parent_comm, msg.split_index, now);
  const RegroupKey key{Regroup::kSplit, msg.parent_comm, msg.split_index};
  Rendezvous& pending = regroupings_[key];
  if (!pending.sized()) pending.expect(static_cast<int>(parent->members.size()));
  if (pending.failed()) {
    reply_error(id, request_id, Status::kRemoteError, pending.failure());
    return;
  }
  if (pending.has_arrived(msg.rank)) {
    reply_error(id, request_id, Status::kInvalidUsage, fmt::format("ncclCommSplit: rank {} joined split {} twice",
                                                                   msg.rank, msg.split_index));
    return;
  }
  if (pending.arrive(msg.rank, {id, request_id, now, 0, msg.color, msg.key})) {
    complete_split(*parent, msg.split_index, pending);
    regroupings_.erase(key);
  }
}

void Job::complete_split(Comm& parent, uint64_t split_index, const Rendezvous& pending) {
  // Group parent ranks by colour; within a colour order by (key, parent rank) as NCCL does.
  std::map<int, std::vector<int>> by_color;
  for (int r = 0; r < pending.nranks(); ++r)
    if (pending.arrival(r).color >= 0) by_color[pending.arrival(r).color].push_back(r);
  for (auto& [color, ranks] : by_color) {
    std::stable_sort(ranks.begin(), ranks.end(),
                     [&](int a, int b) { return pending.arrival(a).key < pending.arrival(b).key; });
    Comm& child = comms_.create();
    child.parent = parent.id;
    // The parent's n-th split and the colour: TP and DP groups split from one world stay apart.
    child.name = fmt::format("{}/split{}.colour{}", parent.name.empty() ? std::to_string(parent.id) : parent.name,
                             split_index, color);
    for (int pr : ranks) child.members.push_back(parent.members[pr]);
    offer_peer_mailbox(child);
    for (int cr = 0; cr < static_cast<int>(ranks.size()); ++cr) {
      const Rendezvous::Arrival& a = pending.arrival(ranks[cr]);
      reply(a.client, a.request_id,
            wire::CommSplitDone{child.id, static_cast<int32_t>(ranks.size()), cr, child.members[cr].global_rank,
                                nccl_memory(child, cr)});
    }
  }
  for (const auto& a : pending.arrivals())
    if (a->color < 0) reply(a->client, a->request_id, wire::CommSplitDone{0, 0, -1, -1, {}});
}

void Job::fail_regrouping(Comm& comm, int rank, const std::string& why) {
  // A shrink goes on without the ranks it excludes.
  for (auto& [key, regroup] : regroupings_)
    if (key.parent == comm.id && !regroup.failed() && !regroup.is_excluded(rank))
      fail_rendezvous(regroup, Status::kRemoteError, why);
}

void Job::handle_comm_shrink(ClientId id, const wire::CommShrink& msg, uint64_t request_id) {
  // Shrinking is how survivors recover, so a failed parent is fine.
  Comm* parent = member_comm(id, msg.parent_comm, msg.rank, request_id, nullptr, /*allow_failed=*/true);
  if (!parent) return;
  if (stands_in()) {
    reply_error(id, request_id, Status::kInvalidUsage, shrink_refusal(*parent));
    return;
  }
  const int n = static_cast<int>(parent->members.size());
  std::vector<int> excluded(msg.excluded.begin(), msg.excluded.end());
  std::sort(excluded.begin(), excluded.end());
  if (std::string problem = exclusion_problem(excluded, n, msg.rank); !problem.empty()) {
    reply_error(id, request_id, Status::kInvalidArgument, problem);
    return;
  }
  if (msg.flags & 1) {  // NCCL_SHRINK_ABORT: release survivors stuck in the parent's operations
    std::string why = fmt::format("operation aborted by ncclCommShrink(NCCL_SHRINK_ABORT) on communicator {}", parent->id);
    fail_pending(*parent, Status::kRemoteError, why);
  }
  const auto now = std::chrono::steady_clock::now();
  note_post(clients_[id], Posted::kShrink, msg.parent_comm, msg.shrink_index, now);
  const RegroupKey key{Regroup::kShrink, msg.parent_comm, msg.shrink_index};
  Rendezvous& pending = regroupings_[key];
  if (!pending.sized()) pending.expect(n, excluded);
  if (pending.failed()) {
    reply_error(id, request_id, Status::kRemoteError, pending.failure());
    return;
  }
  if (pending.excluded() != excluded) {
    std::string why = fmt::format("ncclCommShrink: ranks disagree on who to exclude from communicator {}", parent->id);
    reply_error(id, request_id, Status::kInvalidUsage, why);
    fail_rendezvous(pending, Status::kInvalidUsage, why);
    return;
  }
  if (pending.has_arrived(msg.rank)) {
    reply_error(id, request_id, Status::kInvalidUsage, fmt::format("ncclCommShrink: rank {} joined twice", msg.rank));
    return;
  }
  if (pending.arrive(msg.rank, {id, request_id, now})) {
    complete_shrink(*parent, msg.shrink_index, pending);
    regroupings_.erase(key);
  }
}

void Job::complete_shrink(Comm& parent, uint64_t shrink_index, const Rendezvous& pending) {
  Comm& child = comms_.create();
  child.parent = parent.id;
  child.name = fmt::format("{}/shrink{}", parent.name.empty() ? std::to_string(parent.id) : parent.name, shrink_index);
  std::vector<int> kept;
  for (int r = 0; r < pending.nranks(); ++r)
    if (!pending.is_excluded(r)) kept.push_back(r);
  for (int r : kept) child.members.push_back(parent.members[r]);
  offer_peer_mailbox(child);
  for (int cr = 0; cr < static_cast<int>(kept.size()); ++cr) {
    const Rendezvous::Arrival& a = pending.arrival(kept[cr]);
    reply(a.client, a.request_id,
          wire::CommSplitDone{child.id, static_cast<int32_t>(kept.size()), cr, child.members[cr].global_rank,
                              nccl_memory(child, cr)});
  }
}

void Job::offer_peer_mailbox(Comm& comm) {
  const int n = static_cast<int>(comm.members.size());
  if (n < 2 || n > PeerExchange::kMaxRanks) return;
  for (const Member& m : comm.members) {
    auto it = clients_.find(m.client);
    if (it == clients_.end() || !it->second.peer_exchange || it->second.disconnected) return;
  }
  std::shared_ptr<const SharedFd> fd;
  try {
    fd = std::make_shared<const SharedFd>(PeerExchange::create(n));
  } catch (const PeerExchangeError& e) {
    fmt::print(stderr, "fakegpu-coordinator: communicator {} gets no peer mailbox: {}\n", comm.id, e.what());
    return;
  }
  comm.peer_mailbox = true;
  ++stats_.data.peer_mailboxes;
  std::set<ClientId> told;
  for (const Member& m : comm.members) {
    if (!told.insert(m.client).second) continue;  // one process holding several of its ranks
    OutFrame frame;
    frame.type = wire::MsgType::kPeerMailbox;
    frame.fields = wire::encode_fields(wire::PeerMailbox{comm.id, n, PeerExchange::bytes_for(n)});
    frame.descriptor = fd;
    out_.send(m.client, std::move(frame));
  }
}

void Job::fail_rendezvous(Rendezvous& pending, Status code, const std::string& why) {
  pending.fail(why);
  for (const auto& a : pending.arrivals())
    if (a) reply_error(a->client, a->request_id, code, why);
}

}  // namespace fakegpu::coord
