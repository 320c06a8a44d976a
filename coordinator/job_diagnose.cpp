// Saying why a job does not progress: rendezvous timeouts, deadlocks among ranks that wait
// only for each other, and the live picture `fakegpu-coordinator status` prints.
#include <fmt/format.h>

#include <algorithm>
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
      Wait w{comm.id, seq, false, describe_call(op.first), {}, op.first_at};
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
          {comm.id, pair_seq, true, describe_call(sender_waits ? p.send : p.recv), {absent}, p.first_at});
    }
  }
  return out;
}

std::string Job::doing(ClientId id, const std::map<ClientId, std::vector<Wait>>& waits, Clock::time_point now) const {
  auto it = clients_.find(id);
  if (it == clients_.end() || it->second.disconnected) return "has disconnected";
  const Client& c = it->second;
  auto w = waits.find(id);
  if (w != waits.end()) {
    std::string out;
    for (const Wait& wait : w->second)
      out += fmt::format("{}waits in {} #{} on communicator {} for {} ({:.1f} s)", out.empty() ? "" : "; ", wait.call,
                         wait.seq, wait.comm, plural_ranks(wait.missing), seconds_since(wait.since, now));
    return out;
  }
  if (c.collectives == 0) return "has posted no operation yet";
  return fmt::format("is idle: last posted {} #{} on communicator {}, {:.1f} s ago", wire::coll_type_name(c.last_coll),
                     c.last_seq, c.last_comm, seconds_since(c.last_post_at, now));
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
      for (const Wait& w : waits.at(*it))
        for (int r : w.missing) {
          const Member& m = comms_.at(w.comm).members[r];
          closed = closed && !m.destroyed && m.client != *it && stuck.count(m.client);
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
  deadlocks_.push_back(why);
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
}

void Job::check_timeouts(Clock::time_point now) {
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
      ++rendezvous_timeouts_;
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
      ++rendezvous_timeouts_;
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
  json ranks = json::array();
  int64_t connected = 0;
  for (const auto& [id, c] : clients_) {
    if (!c.greeted || c.observer) continue;
    connected += !c.disconnected;
    if (ranks.size() < kMaxListedRanks)
      ranks.push_back({{"global_rank", c.global_rank}, {"who", describe_client(id)}, {"doing", doing(id, all, now)}});
  }
  return {{"uptime_s", std::chrono::duration<double>(std::chrono::system_clock::now() - started_).count()},
          {"world_size", cluster_.world_size()},
          {"ranks_connected", connected},
          {"operations_completed", completed_ops_},
          {"modeled_ms", timeline_.makespan_us() / 1e3},
          {"rendezvous_timeout_s", rendezvous_timeout_.count() / 1000.0},
          {"deadlock_timeout_s", deadlock_timeout_.count() / 1000.0},
          {"communicators", comms},
          {"communicators_not_waiting", quiet_comms},
          {"ranks", ranks},
          {"deadlocks", deadlocks_}};
}

std::string format_status(const nlohmann::json& s) {
  std::string out = fmt::format("{} of {} ranks connected, {} operations completed, {:.3f} ms modeled, up {:.1f} s\n",
                                s["ranks_connected"].get<int64_t>(), s["world_size"].get<int>(),
                                s["operations_completed"].get<uint64_t>(), s["modeled_ms"].get<double>(),
                                s["uptime_s"].get<double>());
  if (s["communicators"].empty()) out += "no operation is waiting\n";
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
