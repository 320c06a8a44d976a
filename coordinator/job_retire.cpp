// Letting go of what no job needs any more, so that a coordinator started with
// `fgpu coordinator start` serves job after job at the same size: communicators all of whose
// ranks have left, ranks long gone, and inits, splits and shrinks that failed long ago.
#include <algorithm>

#include "job.h"

namespace fakegpu::coord {

void Job::retire_if_finished(uint64_t comm_id) {
  const Comm* comm = comms_.find(comm_id);
  if (!comm) return;
  for (const Member& m : comm->members) {
    auto client = clients_.find(m.client);
    if (!m.destroyed && client != clients_.end() && !client->second.disconnected) return;  // still there
  }
  // Regroupings of it have nobody left to answer.
  for (auto p = regroupings_.begin(); p != regroupings_.end();)
    p = p->first.parent == comm_id ? regroupings_.erase(p) : std::next(p);
  comms_.retire(comm_id, comm_entry(*comm));
}

void Job::forget_departed_clients() {
  const size_t keep = std::max<size_t>(kMaxDepartedClients, cluster_.world_size());
  // A member of a live communicator (one whose other ranks still run) stays: it is named in its
  // diagnoses. It goes once that communicator is retired. The same for an init that may complete.
  auto still_named = [&](ClientId client) {
    if (comms_.has_member(client)) return true;
    for (const auto& [key, init] : pending_inits_)
      if (!init.failed() && init.any_arrival([&](const Rendezvous::Arrival& a) { return a.client == client; }))
        return true;
    return false;
  };
  for (auto it = departed_.begin(); departed_.size() > keep && it != departed_.end();) {  // oldest first
    if (still_named(*it)) {
      ++it;
      continue;
    }
    clients_.erase(*it);
    ++ranks_not_listed_;
    it = departed_.erase(it);
  }
}

void Job::forget_failed_rendezvous(std::chrono::steady_clock::time_point now) {
  // A rank arriving later than this starts a new rendezvous, which times out naming who is missing.
  const auto long_ago = now - rendezvous_timeout_;
  auto drop = [&](auto& pending) {
    for (auto p = pending.begin(); p != pending.end();)
      p = p->second.failed() && p->second.failed_at() < long_ago ? pending.erase(p) : std::next(p);
  };
  drop(pending_inits_);
  drop(regroupings_);
}

}  // namespace fakegpu::coord
