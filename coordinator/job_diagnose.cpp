// Saying why a job does not progress: rendezvous timeouts, deadlocks among ranks that wait
// only for each other, and the live picture `fakegpu-coordinator status` prints.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

#include "job.h"

namespace fakegpu::coord {

using wire::Status;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kMaxListedComms = 64;    // the status lists at most this many communicators...
constexpr size_t kMaxListedWaits = 16;    // ...waiting operations per communicator...
constexpr size_t kMaxListedMissing = 16;  // ...missing ranks per operation...
constexpr size_t kMaxListedRanks = 256;   // ...and ranks

double seconds_since(Clock::time_point then, Clock::time_point now) {
  return std::chrono::duration<double>(now - then).count();
}

// "0-3, 5, 7-9": rank lists stay short on large communicators.
std::string ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j > i ? fmt::format("{}-{}", ranks[i], ranks[j]) : fmt::format("{}", ranks[i]));
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string plural_ranks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", ranges(ranks));
}

std::chrono::milliseconds Job::watch_period() const {
  using std::chrono::milliseconds;
  return std::clamp<milliseconds>(std::min(rendezvous_timeout_, deadlock_timeout_) / 4, milliseconds(10), milliseconds(1000));
}

std::map<ClientId, std::vector<Job::Wait>> Job::waits() const {
  std::map<ClientId, std::vector<Wait>> out;
  for (const auto& [id, comm] : comms_) {
    const int nranks = static_cast<int>(comm.members.size());
    for (const auto& [seq, op] : comm.ops) {
      if (!op.failure.empty() || op.arrived == nranks) continue;
      Wait w{comm.id, fmt::format("{} #{} on communicator {}", describe_call(op.first), seq, comm.id), {}, op.first_at};
      for (int r = 0; r < nranks; ++r)
        if (!op.request_ids[r]) w.missing.push_back(r);
      for (int r = 0; r < nranks; ++r) {
        if (!op.request_ids[r]) continue;
        w.since = op.arrived_at[r];
        out[comm.members[r].client].push_back(w);
      }
    }
    for (const auto& [key, p] : comm.p2p) {
      const auto& [src, dst, pair_seq] = key;
      const bool sender_waits = p.send_request != 0;
      const int waiting = sender_waits ? src : dst, absent = sender_waits ? dst : src;
      out[comm.members[waiting].client].push_back(
          {comm.id, fmt::format("{} #{} on communicator {}", describe_call(sender_waits ? p.send : p.recv), pair_seq, comm.id),
           {absent}, p.first_at});
    }
  }
  // Every rank that arrived waits for the ranks that did not.
  auto add = [&](uint64_t comm, const std::string& where, const Rendezvous& pending) {
    Wait w{comm, where, pending.missing_ranks(), {}};
    for (const auto& a : pending.arrivals()) {
      if (!a) continue;
      w.since = a->at;
      out[a->client].push_back(w);
    }
  };
  for (const auto& [key, init] : pending_inits_)
    if (init.waiting()) add(0, init_label(init), init);
  for (const auto& [key, regroup] : regroupings_)
    if (regroup.waiting()) add(key.parent, regroup_label(key), regroup);
  return out;
}

std::string Job::init_label(const PendingInit& init) {
  return fmt::format("ncclCommInitRank of {}a {}-rank communicator", init.name.empty() ? "" : "'" + init.name + "', ",
                     init.nranks());
}

std::string Job::regroup_label(Regroup kind, uint64_t index, uint64_t parent) {
  return fmt::format("{} #{} of communicator {}", regroup_call(kind), index, parent);
}

std::string Job::last_post(const Client& c) const {
  switch (c.last_posted) {
    case Posted::kCollective:
      return fmt::format("{} #{} on communicator {}", wire::coll_type_name(c.last_coll), c.last_seq, c.last_comm);
    case Posted::kInit: return "ncclCommInitRank";
    case Posted::kSplit: return regroup_label(Regroup::kSplit, c.last_seq, c.last_comm);
    case Posted::kShrink: return regroup_label(Regroup::kShrink, c.last_seq, c.last_comm);
    case Posted::kNothing: break;
  }
  return "nothing";
}

void Job::note_post(Client& client, Posted what, uint64_t comm, uint64_t seq, Clock::time_point now) {
  client.last_posted = what;
  client.last_comm = comm;
  client.last_seq = seq;
  client.last_post_at = now;
}

std::string Job::doing(ClientId id, const std::map<ClientId, std::vector<Wait>>& waits, Clock::time_point now) const {
  auto it = clients_.find(id);
  if (it == clients_.end() || it->second.disconnected) return "has disconnected";
  const Client& c = it->second;
  auto w = waits.find(id);
  if (w != waits.end()) {
    std::string out;
    for (const Wait& wait : w->second)
      out += fmt::format("{}waits in {} for {} ({:.1f} s)", out.empty() ? "" : "; ", wait.where,
                         plural_ranks(wait.missing), seconds_since(wait.since, now));
    return out;
  }
  if (c.last_posted == Posted::kNothing) return "has posted no operation yet";
  return fmt::format("is idle: last posted {}, {:.1f} s ago", last_post(c), seconds_since(c.last_post_at, now));
}

std::string Job::whereabouts(const Comm& comm, int rank, const std::map<ClientId, std::vector<Wait>>& waits,
                             Clock::time_point now) const {
  const Member& m = comm.members[rank];
  std::string who = fmt::format("rank {} ({})", rank, describe_client(m.client));
  if (m.destroyed) return who + " has left the communicator";
  return who + " " + doing(m.client, waits, now);
}

std::vector<ClientId> Job::deadlocked(const std::map<ClientId, std::vector<Wait>>& waits, Clock::time_point now) const {
  // The largest set of waiting ranks whose every operation waits only for ranks of the set:
  // nobody outside can release them, and inside everyone is waiting. A process that owns several
  // ranks and waits for one of its own is left out: another of its threads may post for it.
  std::set<ClientId> stuck;
  for (const auto& [id, list] : waits) stuck.insert(id);
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = stuck.begin(); it != stuck.end();) {
      bool closed = true;
      for (const Wait& w : waits.at(*it)) {
        closed = closed && w.comm != 0;  // an init waits for ranks that may not have connected yet
        for (int r = 0; closed && r < static_cast<int>(w.missing.size()); ++r) {
          const Member& m = comms_.at(w.comm).members[w.missing[r]];
          closed = !m.destroyed && m.client != *it && stuck.count(m.client);
        }
      }
      if (closed) {
        ++it;
      } else {
        it = stuck.erase(it);
        changed = true;
      }
    }
  }
  // A rank that posted lately may still post what releases the others (on another stream).
  for (ClientId id : stuck)
    if (now - clients_.at(id).last_post_at < deadlock_timeout_) return {};
  return {stuck.begin(), stuck.end()};
}

void Job::break_deadlock(const std::vector<ClientId>& ranks, const std::map<ClientId, std::vector<Wait>>& waits,
                         Clock::time_point now) {
  std::set<uint64_t> comms;
  std::string who;
  for (ClientId id : ranks) {
    for (const Wait& w : waits.at(id)) comms.insert(w.comm);
    who += fmt::format("; {} {}", describe_client(id), doing(id, waits, now));
  }
  std::string why = fmt::format("{}: {} ranks wait only for each other and none has posted anything for {:.1f} s{}",
                                comms.size() > 1 ? "cross-communicator deadlock" : "deadlock", ranks.size(),
                                deadlock_timeout_.count() / 1000.0, who);
  print_wavefront(now);
  fmt::print(stderr, "fakegpu-coordinator: {}\n", why);
  stats_.record_deadlock(why);
  const std::set<ClientId> stuck(ranks.begin(), ranks.end());
  for (uint64_t comm_id : comms) {
    Comm& comm = comms_.at(comm_id);
    for (auto& [seq, op] : comm.ops) {
      if (!op.failure.empty()) continue;
      for (size_t r = 0; r < op.request_ids.size(); ++r)
        if (op.request_ids[r] && stuck.count(comm.members[r].client)) {
          fail_op(comm, op, Status::kInvalidUsage, why);
          break;
        }
    }
    for (auto it = comm.p2p.begin(); it != comm.p2p.end();) {
      const auto& [src, dst, pair_seq] = it->first;
      const bool sender_waits = it->second.send_request != 0;
      const ClientId waiting = comm.members[sender_waits ? src : dst].client;
      if (!stuck.count(waiting)) {
        ++it;
        continue;
      }
      ++comm.refused;
      reply_error(waiting, sender_waits ? it->second.send_request : it->second.recv_request, Status::kInvalidUsage, why);
      it = comm.p2p.erase(it);
    }
  }
  // Splits and shrinks the stuck ranks wait in.
  for (auto& [key, regroup] : regroupings_)
    if (!regroup.failed() && regroup.any_arrival([&](const Rendezvous::Arrival& a) { return stuck.count(a.client) > 0; }))
      fail_rendezvous(regroup, Status::kInvalidUsage, why);
}

std::pair<std::string, std::string> Job::global_rank_state(int rank, const std::map<ClientId, std::vector<Wait>>& waits,
                                                           Clock::time_point now) const {
  for (const auto& [id, c] : clients_)
    if (c.greeted && !c.observer && c.global_rank == rank) return {describe_client(id), doing(id, waits, now)};
  return {"", "has not connected to the coordinator"};
}

void Job::check_regroup_timeouts(Clock::time_point now, const std::map<ClientId, std::vector<Wait>>& all,
                                 const std::function<void(const std::string&)>& announce) {
  const auto too_old = now - rendezvous_timeout_;
  const double seconds = rendezvous_timeout_.count() / 1000.0;
  // Counts the timeout and fails the rendezvous; `missing` says where each absent rank is.
  auto expire = [&](Rendezvous& pending, const std::string& what, const std::string& missing) {
    const std::vector<int> arrived = pending.arrived_ranks();
    for (int r : arrived) ++clients_[pending.arrival(r).client].timeouts;
    std::string why = fmt::format("rendezvous timeout after {:.0f} s in {}: {} waited for the others{}", seconds, what,
                                  plural_ranks(arrived), missing);
    announce(why);
    stats_.count_timeout();
    fail_rendezvous(pending, Status::kRemoteError, why);
  };
  for (auto& [key, init] : pending_inits_) {
    if (!init.waiting() || init.first_at() > too_old) continue;
    // A communicator over the whole world numbers its ranks as the job does: say where each is.
    const bool world = init.nranks() == cluster_.world_size();
    std::string missing;
    for (int r : init.missing_ranks()) {
      auto [who, state] = world ? global_rank_state(r, all, now) : std::pair<std::string, std::string>{"", "never called it"};
      missing += fmt::format("; rank {} {}{}", r, who.empty() ? "" : "(" + who + ") ", state);
    }
    expire(init, init_label(init), missing);
  }
  for (auto& [key, regroup] : regroupings_) {
    if (!regroup.waiting() || regroup.first_at() > too_old) continue;
    const Comm& comm = comms_.at(key.parent);
    std::string missing;
    for (int r : regroup.missing_ranks()) missing += "; " + whereabouts(comm, r, all, now);
    expire(regroup, regroup_label(key), missing);
  }
}

void Job::check_timeouts(Clock::time_point now) {
  forget_failed_rendezvous(now);
  auto all = waits();
  if (auto stuck = deadlocked(all, now); !stuck.empty()) {
    break_deadlock(stuck, all, now);
    all = waits();
  }
  const auto too_old = now - rendezvous_timeout_;
  const double seconds = rendezvous_timeout_.count() / 1000.0;
  bool printed = false;
  auto announce = [&](const std::string& why) {
    if (!printed) print_wavefront(now);  // the picture before anything is failed
    printed = true;
    fmt::print(stderr, "fakegpu-coordinator: {}\n", why);
  };
  check_regroup_timeouts(now, all, announce);
  for (auto& [id, comm] : comms_) {
    const int nranks = static_cast<int>(comm.members.size());
    for (auto& [seq, op] : comm.ops) {
      if (!op.failure.empty() || op.arrived == nranks || op.first_at > too_old) continue;
      std::vector<int> arrived;
      std::string missing;
      for (int r = 0; r < nranks; ++r) {
        if (op.request_ids[r]) arrived.push_back(r);
        else missing += "; " + whereabouts(comm, r, all, now);
      }
      std::string why = fmt::format("rendezvous timeout after {:.0f} s on communicator {}, operation {} ({}): {} "
                                    "waited for the others{}",
                                    seconds, comm.id, seq, describe_call(op.first), plural_ranks(arrived), missing);
      announce(why);
      for (int r : arrived) ++clients_[comm.members[r].client].timeouts;
      stats_.count_timeout();
      fail_op(comm, op, Status::kRemoteError, why);
    }
    for (auto it = comm.p2p.begin(); it != comm.p2p.end();) {
      PendingP2P& p = it->second;
      if ((p.send_request && p.recv_request) || p.first_at > too_old) {
        ++it;
        continue;
      }
      const bool sender_waits = p.send_request != 0;
      const auto& [src, dst, pair_seq] = it->first;
      const int waiting = sender_waits ? src : dst, absent = sender_waits ? dst : src;
      std::string why = fmt::format("rendezvous timeout after {:.0f} s on communicator {}: rank {} waited for {} #{} "
                                    "from rank {} to rank {}; {}",
                                    seconds, comm.id, waiting, sender_waits ? "the Recv matching its Send" :
                                    "the Send matching its Recv", pair_seq, src, dst, whereabouts(comm, absent, all, now));
      announce(why);
      ++clients_[comm.members[waiting].client].timeouts;
      stats_.count_timeout();
      ++comm.refused;
      reply_error(comm.members[waiting].client, sender_waits ? p.send_request : p.recv_request, Status::kRemoteError, why);
      it = comm.p2p.erase(it);  // a late peer starts a fresh wait, and times out naming this rank
    }
  }
}

nlohmann::json Job::status(Clock::time_point now) const {
  using nlohmann::json;
  const auto all = waits();
  json comms = json::array();
  size_t quiet_comms = 0;
  for (const auto& [id, comm] : comms_) {
    const int nranks = static_cast<int>(comm.members.size());
    json waiting = json::array();
    auto missing_json = [&](const std::vector<int>& missing) {
      json out = json::array();
      for (size_t i = 0; i < missing.size() && i < kMaxListedMissing; ++i) {
        const Member& m = comm.members[missing[i]];
        out.push_back({{"rank", missing[i]},
                       {"who", describe_client(m.client)},
                       {"doing", m.destroyed ? "has left the communicator" : doing(m.client, all, now)}});
      }
      return out;
    };
    for (const auto& [seq, op] : comm.ops) {
      if (!op.failure.empty() || op.arrived == nranks || waiting.size() >= kMaxListedWaits) continue;
      std::vector<int> arrived, missing;
      for (int r = 0; r < nranks; ++r) (op.request_ids[r] ? arrived : missing).push_back(r);
      waiting.push_back({{"operation", seq},
                         {"call", describe_call(op.first)},
                         {"waiting_s", seconds_since(op.first_at, now)},
                         {"arrived", ranges(arrived)},
                         {"missing_count", missing.size()},
                         {"missing", missing_json(missing)}});
    }
    for (const auto& [key, p] : comm.p2p) {
      if (waiting.size() >= kMaxListedWaits) break;
      const auto& [src, dst, pair_seq] = key;
      const bool sender_waits = p.send_request != 0;
      waiting.push_back({{"operation", pair_seq},
                         {"call", fmt::format("{} from rank {} to rank {}",
                                              describe_call(sender_waits ? p.send : p.recv), src, dst)},
                         {"waiting_s", seconds_since(p.first_at, now)},
                         {"arrived", fmt::format("{}", sender_waits ? src : dst)},
                         {"missing_count", 1},
                         {"missing", missing_json({sender_waits ? dst : src})}});
    }
    if (waiting.empty() && comm.failure.empty()) {
      ++quiet_comms;
      continue;
    }
    if (comms.size() >= kMaxListedComms) continue;
    json entry = {{"id", comm.id}, {"name", comm.name}, {"nranks", nranks}, {"completed", comm.collectives},
                  {"waiting", waiting}};
    if (!comm.failure.empty()) entry["failure"] = comm.failure;
    comms.push_back(entry);
  }
  // Inits, splits and shrinks under way: who arrived, and where each missing rank is.
  json rendezvous = json::array();
  auto add_rendezvous = [&](const std::string& what, const Rendezvous& pending,
                            const std::function<json(int)>& missing_rank) {
    if (rendezvous.size() >= kMaxListedComms) return;
    const std::vector<int> arrived = pending.arrived_ranks(), missing = pending.missing_ranks();
    json listed = json::array();
    for (size_t i = 0; i < missing.size() && i < kMaxListedMissing; ++i) listed.push_back(missing_rank(missing[i]));
    rendezvous.push_back({{"call", what}, {"waiting_s", seconds_since(pending.first_at(), now)}, {"arrived", ranges(arrived)},
                          {"missing_count", missing.size()}, {"missing", listed}});
  };
  auto member_of = [&](uint64_t comm_id) {
    return [&, comm_id](int r) -> json {
      const Member& m = comms_.at(comm_id).members[r];
      return {{"rank", r}, {"who", describe_client(m.client)},
              {"doing", m.destroyed ? "has left the communicator" : doing(m.client, all, now)}};
    };
  };
  for (const auto& [key, init] : pending_inits_) {
    if (!init.waiting()) continue;
    const bool world = init.nranks() == cluster_.world_size();
    add_rendezvous(init_label(init), init, [&](int r) -> json {
      auto [who, state] = world ? global_rank_state(r, all, now) : std::pair<std::string, std::string>{"", "has not called it"};
      return {{"rank", r}, {"who", who}, {"doing", state}};
    });
  }
  for (const auto& [key, regroup] : regroupings_)
    if (regroup.waiting()) add_rendezvous(regroup_label(key), regroup, member_of(key.parent));

  json ranks = json::array();
  int64_t connected = 0;
  std::vector<bool> seen(cluster_.world_size(), false);
  for (const auto& [id, c] : clients_) {
    if (!c.greeted || c.observer) continue;
    connected += !c.disconnected;
    if (c.global_rank >= 0 && c.global_rank < cluster_.world_size()) seen[c.global_rank] = true;
    if (ranks.size() < kMaxListedRanks)
      ranks.push_back({{"global_rank", c.global_rank}, {"who", describe_client(id)}, {"doing", doing(id, all, now)}});
  }
  // Ranks of the world no process has claimed (by RANK or a world-wide init): not started, or
  // dead before their first NCCL call.
  std::vector<int> never;
  for (int r = 0; r < cluster_.world_size(); ++r)
    if (!seen[r]) never.push_back(r);
  return {{"uptime_s", std::chrono::duration<double>(std::chrono::system_clock::now() - started_).count()},
          {"world_size", cluster_.world_size()},
          {"ranks_connected", connected},
          {"operations_completed", completed_ops_},
          {"modeled_ms", timeline_.makespan_us() / 1e3},
          {"rendezvous_timeout_s", rendezvous_timeout_.count() / 1000.0},
          {"deadlock_timeout_s", deadlock_timeout_.count() / 1000.0},
          {"communicators", comms},
          {"communicators_not_waiting", quiet_comms},
          {"rendezvous", rendezvous},
          {"ranks_never_connected", never},
          {"ranks", ranks},
          {"deadlocks", stats_.deadlocks()}};
}

std::string format_status(const nlohmann::json& s) {
  std::string out = fmt::format("{} of {} ranks connected, {} operations completed, {:.3f} ms modeled, up {:.1f} s\n",
                                s["ranks_connected"].get<int64_t>(), s["world_size"].get<int>(),
                                s["operations_completed"].get<uint64_t>(), s["modeled_ms"].get<double>(),
                                s["uptime_s"].get<double>());
  if (s["communicators"].empty() && s["rendezvous"].empty()) out += "no operation is waiting\n";
  for (const auto& w : s["rendezvous"]) {
    out += fmt::format("{}: waiting {:.1f} s; arrived: {}; missing {}:\n", w["call"].get<std::string>(),
                       w["waiting_s"].get<double>(), w["arrived"].get<std::string>(), w["missing_count"].get<size_t>());
    for (const auto& m : w["missing"])
      out += fmt::format("    rank {} {}{}\n", m["rank"].get<int>(), m["who"].get<std::string>().empty() ? "" :
                         m["who"].get<std::string>() + " ", m["doing"].get<std::string>());
  }
  for (const auto& c : s["communicators"]) {
    out += fmt::format("communicator {} '{}' ({} ranks, {} operations completed)\n", c["id"].get<uint64_t>(),
                       c["name"].get<std::string>(), c["nranks"].get<int>(), c["completed"].get<uint64_t>());
    if (c.contains("failure")) out += fmt::format("  failed: {}\n", c["failure"].get<std::string>());
    for (const auto& w : c["waiting"]) {
      out += fmt::format("  #{} {}: waiting {:.1f} s; arrived: {}; missing {}:\n", w["operation"].get<uint64_t>(),
                         w["call"].get<std::string>(), w["waiting_s"].get<double>(), w["arrived"].get<std::string>(),
                         w["missing_count"].get<size_t>());
      for (const auto& m : w["missing"])
        out += fmt::format("    rank {} {} {}\n", m["rank"].get<int>(), m["who"].get<std::string>(), m["doing"].get<std::string>());
    }
  }
  if (s["communicators_not_waiting"].get<size_t>() > 0)
    out += fmt::format("{} more communicators have nothing waiting\n", s["communicators_not_waiting"].get<size_t>());
  if (!s["ranks"].empty()) out += "ranks:\n";
  for (const auto& r : s["ranks"])
    out += fmt::format("  {} {}\n", r["who"].get<std::string>(), r["doing"].get<std::string>());
  if (!s["ranks_never_connected"].empty())
    out += fmt::format("  never connected: {}\n", plural_ranks(s["ranks_never_connected"].get<std::vector<int>>()));
  for (const auto& d : s["deadlocks"]) out += fmt::format("found earlier: {}\n", d.get<std::string>());
  return out;
}

void Job::print_wavefront(Clock::time_point now) const {
  fmt::print(stderr, "fakegpu-coordinator: where every rank is:\n{}", format_status(status(now)));
}

void Job::handle_status_query(ClientId id, uint64_t request_id) {
  auto text = std::make_shared<std::vector<uint8_t>>();
  std::string json = status(Clock::now()).dump();
  text->assign(json.begin(), json.end());
  reply(id, request_id, wire::StatusReply{}, {Bulk{text, 0, text->size()}});
}

}  // namespace fakegpu::coord
