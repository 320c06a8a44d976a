// Representative runs (FAKEGPU_REPRESENTATIVE, `fgpu --representative`): only some ranks of an
// SPMD job run as processes, and the coordinator stands in for the rest. A rank no process runs
// repeats the calls of its representative, the nearest process below it: at every init,
// operation and destroy its representative joins, the stand-in joins too, with the same call and
// the same data, and its answers go nowhere. Its communicators are those of its process groups,
// which the program names as it makes them (wire::GroupRanks): a stand-in in one of the
// representative's groups joins that communicator; the groups of the same kind that hold no
// process (the other tensor-parallel groups, say) become mirrors, communicators that go through
// each of the representative's operations once more, counted and modeled on their own GPUs and
// links but moving no data. A stand-in in a group that holds processes but not its representative
// repeats the group's first rank there, which must run as a process (a group's broadcasts and
// scatters start at its first rank). An ncclCommSplit (split_group, and new_group once
// init_process_group has a device_id) is made as an init of the group the process named just
// before it. So every collective is matched and modeled with its full membership on the whole
// cluster, from a few processes.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <set>

#include "coll_shape.h"
#include "job.h"
#include "reduce.h"

namespace fakegpu::coord {

namespace {

// A rank's device on its node, as a launcher gives LOCAL_RANK.
int local_rank_of(const ClusterConfig& cluster, int rank) {
  const int node = cluster.node_of_rank(rank);
  if (node < 0) return 0;
  const std::vector<int>& ranks = cluster.nodes[node].ranks;
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin());
}

// Whether two groups share a rank.
bool overlap(const std::vector<int>& a, const std::vector<int>& b) {
  std::set<int> seen(a.begin(), a.end());
  return std::any_of(b.begin(), b.end(), [&](int r) { return seen.count(r); });
}

// Whether the stood-in ranks repeat a process's Send by pairing as it pairs with its peer, by the
// XOR of their ranks: a pairwise exchange (one Send to a peer and one Receive from it), unless the
// peer is half the communicator away, where each rank's partner is as far from it both ways.
bool pairs_by_xor(int nranks, const wire::Collective& send) {
  return (send.flags & wire::kPairExchange) && 2 * std::abs(send.root - send.rank) != nranks;
}

}  // namespace

std::vector<int> parse_rank_list(const std::string& text, int world) {
  std::vector<int> ranks;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const size_t dash = item.find('-');
    try {
      size_t used = 0;
      const int first = std::stoi(item.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? item.size() : dash)) throw std::invalid_argument(item);
      int last = first;
      if (dash != std::string::npos) {
        last = std::stoi(item.substr(dash + 1), &used);
        if (used != item.size() - dash - 1) throw std::invalid_argument(item);
      }
      if (first < 0 || last < first || last >= world)
        throw std::runtime_error(fmt::format("FAKEGPU_REPRESENTATIVE={}: '{}' is not within ranks 0..{}", text, item,
                                             world - 1));
      for (int r = first; r <= last; ++r) ranks.push_back(r);
    } catch (const std::logic_error&) {
      throw std::runtime_error(fmt::format("FAKEGPU_REPRESENTATIVE={}: '{}' is not a rank or a range of ranks "
                                           "(write them as 0,8 or 0-3)", text, item));
    }
    at = comma + 1;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty() || ranks.front() != 0)
    throw std::runtime_error(fmt::format("FAKEGPU_REPRESENTATIVE={}: rank 0 must run as a process", text));
  return ranks;
}

void Job::handle_group_ranks(Client& client, const wire::GroupRanks& msg) {
  if (!stands_in()) return;  // every rank runs: its communicators' members come themselves
  client.last_group = msg.name;
  if (group_named(msg.name)) return;  // another representative named it too
  Group group{msg.name, {msg.ranks.begin(), msg.ranks.end()}};
  if (group.ranks.empty())
    for (int r = 0; r < cluster_.world_size(); ++r) group.ranks.push_back(r);
  groups_.push_back(std::move(group));
}

const Job::Group* Job::group_named(const std::string& name) const {
  for (const Group& g : groups_)
    if (g.name == name) return &g;
  return nullptr;
}

const Job::Group* Job::group_of(const std::string& comm_name) const {
  const size_t colon = comm_name.rfind(':');
  return group_named(colon == std::string::npos ? comm_name : comm_name.substr(colon + 1));
}

int Job::representative_of(int rank) const {
  auto above = std::upper_bound(representatives_.begin(), representatives_.end(), rank);
  return *std::prev(above);  // rank 0 is always one
}

ClientId Job::process_of(int rank) const {
  for (const auto& [id, c] : clients_)
    if (c.global_rank == rank && !c.stood_in && !c.observer && !c.disconnected) return id;
  throw std::runtime_error(fmt::format("representative rank {} has no process connected to the coordinator", rank));
}

ClientId Job::stand_in(int rank, ClientId bringer) {
  auto it = stand_ins_.find(rank);
  if (it != stand_ins_.end() && !clients_.at(it->second).disconnected) return it->second;
  const int rep = representative_of(rank);
  const ClientId representative = clients_.at(bringer).global_rank == rep ? bringer : process_of(rep);
  // A stand-in of an earlier job on this coordinator stays in that job's report; this one is new.
  const ClientId id = kStandInClientBase + next_stand_in_++;
  Client& c = clients_[id];
  c.greeted = true;
  c.stood_in = true;
  c.representative = representative;
  c.global_rank = rank;
  c.hello.hostname = clients_.at(representative).hello.hostname;
  c.hello.env_rank = rank;
  stand_ins_[rank] = id;
  return id;
}

const Job::Client& Job::figures_of(const Client& client) const {
  if (!client.stood_in) return client;
  auto it = clients_.find(client.representative);
  return it == clients_.end() ? client : it->second;
}

std::string Job::arrive_stand_ins(PendingInit& pending, const wire::CommInit& msg, ClientId id,
                                  std::chrono::steady_clock::time_point now) {
  const Client& client = clients_.at(id);
  const Group* group = group_of(msg.comm_name);
  if (!group) {
    if (msg.nranks == 1) return "";
    return fmt::format("ncclCommInitRank of '{}' ({} ranks) under FAKEGPU_REPRESENTATIVE: no process group of "
                       "that name was made, so the coordinator cannot tell which ranks it holds; representative "
                       "runs follow PyTorch's process groups (run without --representative)",
                       msg.comm_name, msg.nranks);
  }
  if (msg.nranks == 2 && group->ranks.size() > 2) {
    // PyTorch's communicator for the messages between two ranks of the group (no device_id): the
    // pair the process named before its first message (torch_hook/representative.py).
    const Group* pair =
        client.last_group.rfind(group->name + "/pair:", 0) == 0 ? group_named(client.last_group) : nullptr;
    if (!pair)
      return fmt::format("ncclCommInitRank of '{}' (2 ranks) under FAKEGPU_REPRESENTATIVE: a communicator of two "
                         "ranks of process group '{}' ({}), as PyTorch makes for a send or recv between two ranks "
                         "when init_process_group has no device_id; which rank is the other one is unknown here. "
                         "Give init_process_group a device_id (messages then go on the group's communicator), or "
                         "run without --representative", msg.comm_name, group->name, plural_ranks(group->ranks));
    group = pair;
  }
  if (static_cast<int>(group->ranks.size()) != msg.nranks || group->ranks[msg.rank] != client.global_rank)
    return fmt::format("ncclCommInitRank of '{}': global rank {} joins it as rank {} of {}, but process group '{}' "
                       "holds {}", msg.comm_name, client.global_rank, msg.rank, msg.nranks, group->name,
                       plural_ranks(group->ranks));
  const int first = *std::min_element(group->ranks.begin(), group->ranks.end());
  if (!is_process(first)) {
    // A group's first rank is where a broadcast's or a scatter's sends start; only a process of
    // its own can post them (a stand-in repeats collectives, and meets messages sent to it).
    std::vector<int> with = representatives_;
    with.push_back(first);
    std::sort(with.begin(), with.end());
    return fmt::format("ncclCommInitRank of '{}' under FAKEGPU_REPRESENTATIVE: process group '{}' ({}) holds rank "
                       "{}, which runs as a process, but its first rank, {}, runs none; a group that holds a process "
                       "needs its first rank to run as one too: run it with FAKEGPU_REPRESENTATIVE={}",
                       msg.comm_name, group->name, plural_ranks(group->ranks), client.global_rank, first,
                       fmt::join(with, ","));
  }
  for (int r = 0; r < msg.nranks; ++r) {
    const int rank = group->ranks[r];
    if (is_process(rank) || pending.has_arrived(r)) continue;
    // It repeats its representative where that is in the group, else the group's first rank.
    const int rep = representative_of(rank);
    const bool rep_here = std::find(group->ranks.begin(), group->ranks.end(), rep) != group->ranks.end();
    if ((rep_here ? rep : first) != client.global_rank) continue;  // another process of the group brings it
    const ClientId stand = stand_in(rank, id);
    if (!pending.split_parent) ++clients_[stand].comm_inits;
    Rendezvous::Arrival arrival{stand, kStandInRequest, now, local_rank_of(cluster_, rank)};
    arrival.follows = id;
    pending.arrive(r, arrival);
  }
  return "";
}

void Job::make_mirrors(Comm& comm) {
  const Group* group = group_of(comm.name);
  if (!group || group->ranks.size() != comm.members.size()) return;  // a pair's messages: no kind
  const size_t at = group - groups_.data();
  // The groups of its kind: those made next to it, of its size, each apart from the others
  // (a DeviceMesh makes the groups of one dimension so).
  std::vector<const Group*> kind{group};
  auto fits = [&](const Group& g) {
    return g.ranks.size() == group->ranks.size() &&
           std::none_of(kind.begin(), kind.end(), [&](const Group* k) { return overlap(k->ranks, g.ranks); });
  };
  for (size_t i = at + 1; i < groups_.size() && fits(groups_[i]); ++i) kind.push_back(&groups_[i]);
  for (size_t i = at; i-- > 0 && fits(groups_[i]);) kind.push_back(&groups_[i]);
  const std::string prefix = comm.name.substr(0, comm.name.rfind(':') + 1);
  std::map<int, ClientId> processes;  // by representative's rank, looked up once
  auto process = [&](int rank) {
    const int rep = representative_of(rank);
    auto it = processes.find(rep);
    return it != processes.end() ? it->second : processes[rep] = process_of(rep);
  };
  for (const Group* g : kind) {
    if (g == group || std::any_of(g->ranks.begin(), g->ranks.end(), [&](int r) { return is_process(r); }))
      continue;  // a representative's own group gets its own communicator when it makes it
    // A group of stand-ins repeats the group of its kind that its first rank's representative is
    // in (the others' may do other work); the groups of a kind are apart, so only one holds it.
    const int leader = representative_of(*std::min_element(g->ranks.begin(), g->ranks.end()));
    if (std::find(group->ranks.begin(), group->ranks.end(), leader) == group->ranks.end()) continue;
    Comm& mirror = comms_.create();
    mirror.name = prefix + g->name;
    mirror.mirror_of = comm.id;
    for (int rank : g->ranks)
      mirror.members.push_back({stand_in(rank, process(rank)), rank, local_rank_of(cluster_, rank), false});
    for (int r = 0; r < static_cast<int>(mirror.members.size()); ++r) {
      if (!comm.parent) ++clients_[mirror.members[r].client].comm_inits;  // a split counts no init
      ledger_init(mirror.members[r].client, mirror.id, nccl_memory(mirror, r));
    }
    comm.mirrors.push_back(mirror.id);
  }
}

bool Job::join_stand_ins(Comm& comm, PendingOp& op, const wire::Collective& msg, const RankData& data,
                         std::chrono::steady_clock::time_point now) {
  bool complete = false;
  const ClientId process = comm.members[msg.rank].client;
  for (int r = 0; r < static_cast<int>(comm.members.size()); ++r) {
    if (comm.members[r].follows != process || op.joined(r)) continue;
    wire::Collective call = msg;
    call.rank = r;
    complete = op.join(call, kStandInRequest, now);
    ++clients_[comm.members[r].client].collectives;
    // Its send data is its representative's, read where that lies; its result goes nowhere.
    RankData& mine = op.ranks[r];
    mine.in = data.in;
    mine.in_segment = data.in_segment;
    mine.body = data.body;
    mine.scalar = data.scalar;
    if (!mine.in && call.coll == wire::CollType::kBroadcast && call.root == r) {
      // A stood-in root of a broadcast the process only receives: it sends zeros.
      const size_t bytes = msg.count * dtype_size(msg.dtype);
      if (!stand_in_zeros_ || stand_in_zeros_->size() < bytes)
        stand_in_zeros_ = std::make_shared<std::vector<uint8_t>>(bytes);  // a new one: earlier work may read the old
      mine.body = stand_in_zeros_;
      mine.in = stand_in_zeros_->data();
    }
  }
  return complete;
}

void Job::post_stand_in_side(Comm& comm, const wire::Collective& msg, std::chrono::steady_clock::time_point now) {
  const int peer = msg.root;
  if (peer < 0 || peer >= static_cast<int>(comm.members.size())) return;
  const ClientId stand = comm.members[peer].client;
  auto it = clients_.find(stand);
  if (it == clients_.end() || !it->second.stood_in) return;
  // What the peer's own program posts to meet this one: the other side of it.
  wire::Collective other = msg;
  other.coll = msg.coll == wire::CollType::kSend ? wire::CollType::kRecv : wire::CollType::kSend;
  other.rank = peer;
  other.root = msg.rank;
  ++it->second.collectives;
  handle_p2p(comm, stand, other, RankData{}, kStandInRequest, now);
}

void Job::post_stood_in_messages(Comm& comm, ClientId process, const wire::Collective& msg,
                                 std::chrono::steady_clock::time_point now) {
  // Only an exchange (a group that sends and receives on the communicator: an all-to-all, a ring)
  // is taken for one every rank makes; a lone message is one rank's own (rank 0 sends rank 3 a
  // tensor), met by its receiver alone. Each message is posted from its sender's side. A pairwise
  // exchange pairs the stood-in ranks by XOR (pairs_by_xor); in any other each stood-in rank sends
  // as far from it as the process's peer is from the process.
  if (msg.coll != wire::CollType::kSend || !(msg.flags & wire::kSendsAndReceives)) return;
  const int n = static_cast<int>(comm.members.size());
  const bool pairs = pairs_by_xor(n, msg);
  for (int from = 0; from < n; ++from) {
    if (comm.members[from].follows != process) continue;
    const int to = pairs ? from ^ (msg.root ^ msg.rank) : ((msg.root - msg.rank + from) % n + n) % n;
    const ClientId sender = comm.members[from].client, receiver = comm.members[to].client;
    if (!is_stand_in(receiver)) continue;  // a process posts its side itself
    wire::Collective send = msg, recv = msg;
    send.rank = recv.root = from;
    send.root = recv.rank = to;
    recv.coll = wire::CollType::kRecv;
    ++clients_[sender].collectives;
    ++clients_[receiver].collectives;
    handle_p2p(comm, sender, send, RankData{}, kStandInRequest, now);
    handle_p2p(comm, receiver, recv, RankData{}, kStandInRequest, now);
  }
}

std::shared_ptr<std::vector<uint8_t>> Job::stand_in_message(Comm& comm, int src, int dst, const PendingP2P& p,
                                                             uint64_t bytes) {
  // Sizes and counts, not activations: a larger message a stand-in sends is zeros.
  constexpr uint64_t kKeptBytes = 64 << 10;
  const bool from_stand_in = is_stand_in(comm.members[src].client);
  if (from_stand_in == is_stand_in(comm.members[dst].client)) return nullptr;
  if (!from_stand_in) {
    if (bytes <= kKeptBytes && p.sender.in)
      comm.sent_to_stand_ins[{dst, src}] = {p.send.seq,
                                            std::make_shared<std::vector<uint8_t>>(p.sender.in, p.sender.in + bytes)};
    return nullptr;
  }
  auto it = comm.sent_to_stand_ins.find({src, dst});
  if (it == comm.sent_to_stand_ins.end() || it->second.first != p.send.seq || it->second.second->size() != bytes)
    return nullptr;
  auto kept = std::move(it->second.second);
  comm.sent_to_stand_ins.erase(it);
  return kept;
}

void Job::run_on_mirrors(const Comm& comm, const wire::Collective& call, uint64_t bytes, double ready_us,
                         const std::vector<MirroredPart>& parts) {
  for (uint64_t id : comm.mirrors) {
    Comm* mirror = comms_.find(id);
    if (!mirror) continue;
    if (!is_point_to_point(call.coll)) ++mirror->collectives;
    std::vector<Trace::RankTrack> tracks;
    for (const MirroredPart& part : parts) tracks.push_back({mirror->members[part.rank].global_rank, part.track});
    wire::Collective mirrored = call;
    mirrored.comm_id = id;
    const wire::CollectiveDone done = count_completed(mirrored, bytes, *mirror, ready_us, std::move(tracks));
    for (const MirroredPart& part : parts) {
      ++clients_[mirror->members[part.rank].client].collectives;
      count_rank_part(mirror->members[part.rank].client, bytes, part.ready_us, done);
      ledger_call(mirror->members[part.rank].client, id, mirrored, part.rank, done);
    }
  }
}

void Job::retire_stand_ins(Comm& comm, ClientId id) {
  for (Member& m : comm.members)
    if (m.follows == id) m.destroyed = true;
  // Its mirrors go once every rank of it has.
  const bool gone = std::all_of(comm.members.begin(), comm.members.end(), [&](const Member& m) {
    return m.destroyed || clients_.at(m.client).disconnected;
  });
  if (!gone) return;
  for (uint64_t mirror_id : comm.mirrors) {
    Comm* mirror = comms_.find(mirror_id);
    if (!mirror) continue;
    for (Member& m : mirror->members) m.destroyed = true;
    retire_if_finished(mirror_id);
  }
}

void Job::split_for_group(ClientId id, Client& client, const Comm& parent, const wire::CommSplit& msg,
                          uint64_t request_id) {
  if (msg.color == -1) {  // NCCL_SPLIT_NOCOLOR: in no child, so no child waits for it either
    reply(id, request_id, wire::CommSplitDone{0, 0, -1, -1, {}});
    return;
  }
  const Group* group = group_named(client.last_group);
  auto in_parent = [&](int rank) {
    return std::any_of(parent.members.begin(), parent.members.end(),
                       [&](const Member& m) { return m.global_rank == rank; });
  };
  const auto mine = group ? std::find(group->ranks.begin(), group->ranks.end(), client.global_rank)
                          : std::vector<int>::const_iterator{};
  if (!group || mine == group->ranks.end() || !std::all_of(group->ranks.begin(), group->ranks.end(), in_parent)) {
    reply_error(id, request_id, wire::Status::kInvalidUsage,
                fmt::format("ncclCommSplit of communicator {} ('{}') by global rank {} under FAKEGPU_REPRESENTATIVE: "
                            "the split is for no process group the program named ({}), so which ranks each part "
                            "holds is unknown; split with PyTorch's split_group or new_group, or run without "
                            "--representative", parent.id, parent.name, client.global_rank,
                            group ? fmt::format("the last, '{}', holds {}", group->name,
                                                plural_ranks(group->ranks))
                                  : "it named none"));
    return;
  }
  note_post(client, Posted::kSplit, msg.parent_comm, msg.split_index, std::chrono::steady_clock::now());
  // The ranks of one child meet at one key: the parent, the number of its split and the colour.
  wire::CommInit init;
  const uint64_t parts[] = {parent.id, msg.split_index, static_cast<uint32_t>(msg.color)};
  for (int i = 0; i < 6; ++i) init.key.bytes[i] = static_cast<uint8_t>(parts[0] >> (8 * i));
  for (int i = 0; i < 4; ++i) init.key.bytes[6 + i] = static_cast<uint8_t>(parts[1] >> (8 * i));
  for (int i = 0; i < 4; ++i) init.key.bytes[10 + i] = static_cast<uint8_t>(parts[2] >> (8 * i));
  init.key.bytes[14] = 0x5a;  // apart from ncclUniqueIds' keys, which tests number from 0
  init.key.bytes[15] = 0xa5;
  init.nranks = static_cast<int32_t>(group->ranks.size());
  init.rank = static_cast<int32_t>(mine - group->ranks.begin());
  init.cuda_device = parent.members[msg.rank].cuda_device;
  init.comm_name = parent.name.substr(0, parent.name.rfind(':') + 1) + group->name;
  pending_inits_[init.key].split_parent = parent.id;
  handle_comm_init(id, client, init, request_id);
}

std::string Job::pair_refusal(const Comm& comm, ClientId process, const wire::Collective& msg) const {
  const int n = static_cast<int>(comm.members.size());
  if (msg.coll != wire::CollType::kSend || !pairs_by_xor(n, msg)) return "";
  const int distance = msg.root ^ msg.rank;
  for (int from = 0; from < n; ++from)
    if (comm.members[from].follows == process && (from ^ distance) >= n)
      return fmt::format("ncclSend of rank {} to rank {} on communicator {} ('{}') under FAKEGPU_REPRESENTATIVE: a "
                         "pairwise exchange, whose stood-in ranks pair by the XOR of their ranks ({}), but rank {}'s "
                         "partner, {}, is beyond the communicator's {} ranks, so the stood-in ranks cannot repeat it; "
                         "run every rank (leave out --representative)",
                         msg.rank, msg.root, comm.id, comm.name, distance, from, from ^ distance, n);
  return "";
}

std::string Job::shrink_refusal(const Comm& parent) const {
  return fmt::format("ncclCommShrink of communicator {} ('{}') under FAKEGPU_REPRESENTATIVE: the ranks no process "
                     "runs cannot shrink their communicators; run without --representative", parent.id, parent.name);
}

void Job::ledger_init(ClientId client, uint64_t comm, const wire::NcclMemory& plan) {
  Client::NcclLedger& ledger = clients_[client].nccl;
  ledger.plans[comm] = plan;
  ledger.bytes += plan.init;
}

void Job::ledger_call(ClientId client, uint64_t comm, const wire::Collective& call, int rank,
                      const wire::CollectiveDone& done) {
  Client::NcclLedger& ledger = clients_[client].nccl;
  if (is_point_to_point(call.coll)) {  // `call` is the send: rank call.rank sends to call.root
    const bool sending = rank == call.rank;
    const int peer = sending ? call.root : call.rank;
    if (ledger.peers.insert({comm, peer, sending}).second) ledger.bytes += sending ? done.p2p_send_bytes : done.p2p_recv_bytes;
    if (done.p2p_pool_bytes && ledger.pools.insert({comm, sending}).second) ledger.bytes += done.p2p_pool_bytes;
    return;
  }
  uint8_t& connected = ledger.connected[comm];
  const uint8_t fresh = done.connects & ~connected;
  if (!fresh) return;  // mostly: every piece it uses was connected by an earlier call
  connected |= fresh;
  const wire::NcclMemory& plan = ledger.plans[comm];
  const uint64_t pieces[] = {plan.ring, plan.tree, plan.nvls};
  for (int bit = 0; bit < 3; ++bit)
    if (fresh & (1u << bit)) ledger.bytes += pieces[bit];
}

bool Job::report_memory(const Client& client, wire::RankMemory* out) const {
  const Client& source = figures_of(client);
  const wire::RankMemory* m = rank_gpu_memory(source);
  if (!m) return false;
  *out = *m;
  out->samples.clear();  // the report lists no series
  if (&source != &client) {
    const int64_t more = static_cast<int64_t>(client.nccl.bytes) - static_cast<int64_t>(source.nccl.bytes);
    out->peak += more;
    out->peak_parts.nccl += more;
    out->in_use.nccl += more;
  }
  return true;
}

nlohmann::json Job::representative_report() const {
  if (!stands_in()) return nullptr;
  std::vector<int> stood_in;
  for (const auto& [rank, id] : stand_ins_) stood_in.push_back(rank);
  return {{"processes", representatives_}, {"stood_in", stood_in},
          {"how", "the ranks under stood_in ran no process: each repeated the calls of the nearest process "
                  "below it (in a group without that process, of the group's first rank), on its own "
                  "communicators; their figures are their representative's"}};
}

}  // namespace fakegpu::coord
