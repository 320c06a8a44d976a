// The job's communicators by id: those alive, and the report entries of those all of whose
// ranks have left (the newest ones), so a coordinator serving job after job stays the same size.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "comm_state.h"

namespace fakegpu::coord {

class CommRegistry {
 public:
  using Map = std::map<uint64_t, Comm>;
  // Keeps the report entries of at most keep_retired retired communicators.
  explicit CommRegistry(size_t keep_retired) : keep_retired_(keep_retired) {}

  // A new, empty communicator with the next id.
  Comm& create();
  // Null when there is no live communicator of that id.
  Comm* find(uint64_t id);
  Comm& at(uint64_t id) { return comms_.at(id); }
  const Comm& at(uint64_t id) const { return comms_.at(id); }
  Map::iterator begin() { return comms_.begin(); }
  Map::iterator end() { return comms_.end(); }
  Map::const_iterator begin() const { return comms_.begin(); }
  Map::const_iterator end() const { return comms_.end(); }

  // Whether the client is a member of any live communicator, and which ones.
  bool has_member(ClientId client) const;
  std::vector<uint64_t> comms_of(ClientId client) const;

  // Drops a communicator, keeping `entry`, what the report says of it.
  void retire(uint64_t id, nlohmann::json entry);
  const std::deque<nlohmann::json>& retired() const { return retired_; }
  uint64_t not_listed() const { return not_listed_; }  // retired entries dropped

 private:
  Map comms_;
  uint64_t next_id_ = 1;
  size_t keep_retired_;
  std::deque<nlohmann::json> retired_;
  uint64_t not_listed_ = 0;
};

}  // namespace fakegpu::coord
