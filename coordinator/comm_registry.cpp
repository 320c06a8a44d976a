#include "comm_registry.h"

#include <utility>

namespace fakegpu::coord {

Comm& CommRegistry::create() {
  const uint64_t id = next_id_++;
  Comm& comm = comms_[id];
  comm.id = id;
  return comm;
}

Comm* CommRegistry::find(uint64_t id) {
  auto it = comms_.find(id);
  return it == comms_.end() ? nullptr : &it->second;
}

bool CommRegistry::has_member(ClientId client) const {
  for (const auto& [id, comm] : comms_)
    for (const Member& m : comm.members)
      if (m.client == client) return true;
  return false;
}

std::vector<uint64_t> CommRegistry::comms_of(ClientId client) const {
  std::vector<uint64_t> ids;
  for (const auto& [id, comm] : comms_)
    for (const Member& m : comm.members)
      if (m.client == client) {
        ids.push_back(id);
        break;
      }
  return ids;
}

void CommRegistry::retire(uint64_t id, nlohmann::json entry) {
  retired_.push_back(std::move(entry));
  if (retired_.size() > keep_retired_) {
    retired_.pop_front();
    ++not_listed_;
  }
  comms_.erase(id);
}

}  // namespace fakegpu::coord
