// `fakegpu-coordinator status`: asks a running coordinator, as an observer, where every rank is.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "endpoint.h"

namespace fakegpu::coord {

// Connects, presents the token (empty for none), and returns the coordinator's status. Throws
// std::runtime_error naming the coordinator when it cannot be reached or refuses; never waits
// longer than timeout_ms for an answer.
nlohmann::json query_status(const Endpoint& endpoint, const std::string& token, int timeout_ms = 10000);

}  // namespace fakegpu::coord
