#include "job_stats.h"

#include <fmt/format.h>

#include <algorithm>

#include "job.h"  // plural_ranks

namespace fakegpu::coord {

void JobStats::count_call(wire::CollType coll, uint64_t bytes) {
  CollStats& stats = coll_stats_[static_cast<int>(coll)];
  ++stats.calls;
  stats.bytes += bytes;
}

void JobStats::count_priced(const OpKey& kind, const planner::Estimate& e) {
  CollStats& stats = coll_stats_[static_cast<int>(kind.coll)];
  stats.modeled_us += e.time_us;
  ++stats.algorithms[e.algo + 1][e.proto];
  auto it = op_kinds_.find(kind);
  if (it == op_kinds_.end() && op_kinds_.size() < kMaxOpKinds) it = op_kinds_.emplace(kind, OpStats{0, e}).first;
  if (it != op_kinds_.end())
    ++it->second.calls;
  else
    ++unlisted_op_calls_;
}

void JobStats::count_unpriced(wire::CollType coll, const std::string& why) {
  CollStats& stats = coll_stats_[static_cast<int>(coll)];
  if (!stats.unmodeled++) stats.unmodeled_why = why;
}

void JobStats::count_error(const std::string& message, int global_rank) {
  // An error every rank of an operation gets is listed once, with the ranks.
  // Once the list is full, new messages are not indexed either: the index stays as small.
  auto seen = error_index_.find(message);
  if (seen == error_index_.end() && errors_.size() < kMaxReportedErrors) {
    seen = error_index_.emplace(message, errors_.size()).first;
    errors_.push_back({message, {}});
  }
  if (seen != error_index_.end() && global_rank >= 0) {
    auto& ranks = errors_[seen->second].second;  // each rank once, however often it is told
    if (std::find(ranks.begin(), ranks.end(), global_rank) == ranks.end()) ranks.push_back(global_rank);
  }
}

void JobStats::record_deadlock(const std::string& why) {
  if (deadlocks_.size() < kMaxReportedDeadlocks) deadlocks_.push_back(why);
}

void JobStats::write(nlohmann::json& j) const {
  using nlohmann::json;
  json colls = json::object();
  uint64_t total_calls = 0, total_bytes = 0;
  double total_modeled = 0;
  for (int type = 0; type < wire::kNumCollTypes; ++type) {
    const CollStats& s = coll_stats_[type];
    if (s.calls == 0) continue;
    json algorithms = json::object();
    for (int a = 0; a <= planner::kNumAlgos; ++a)
      for (int p = 0; p < planner::kNumProtos; ++p)
        if (s.algorithms[a][p])
          algorithms[std::string(planner::algo_label(a - 1)) + "/" + planner::proto_name(p)] = s.algorithms[a][p];
    if (s.unmodeled) algorithms["unmodeled: " + s.unmodeled_why] = s.unmodeled;
    colls[wire::coll_type_name(static_cast<wire::CollType>(type))] =
        {{"calls", s.calls}, {"bytes", s.bytes}, {"modeled_time_us", s.modeled_us}, {"algorithms", algorithms}};
    total_calls += s.calls;
    total_bytes += s.bytes;
    total_modeled += s.modeled_us;
  }
  j["collectives"] = colls;
  j["totals"] = {{"collective_calls", total_calls}, {"bytes", total_bytes}, {"modeled_time_us", total_modeled}};
  json kinds = json::array();
  for (const auto& [key, kind] : op_kinds_) {
    const planner::Estimate& e = kind.estimate;
    kinds.push_back({{"communicator", key.comm},
                     {"collective", wire::coll_type_name(key.coll)},
                     {"bytes", key.bytes},
                     {"calls", kind.calls},
                     {"algorithm", e.algo_label()},
                     {"protocol", planner::proto_name(e.proto)},
                     {"channels", e.channels},
                     {"modeled_time_us", e.time_us},
                     {"algbw_gbs", e.algbw_gbs},
                     {"busbw_gbs", e.busbw_gbs}});
    if (*key.path) kinds.back()["path"] = key.path;
  }
  j["operations"] = kinds;
  if (unlisted_op_calls_) j["operations_unlisted_calls"] = unlisted_op_calls_;
  j["data_plane"] = {{"shared_memory_bytes", data.shared_bytes},
                     {"socket_bytes", data.socket_bytes},
                     {"payload_free_bytes", data.skipped_bytes},
                     {"segments_mapped", data.segments_mapped},
                     {"control_ring_clients", data.control_ring_clients},
                     {"peer_mailboxes", data.peer_mailboxes},
                     {"peer_exchange_ops", data.peer_exchange_ops},
                     {"peer_exchange_bytes", data.peer_exchange_bytes},
                     {"payload_chunks_in", data.payload_chunks_in},
                     {"payload_chunks_out", data.payload_chunks_out}};
  json errors = json::array();
  for (const auto& [message, ranks] : errors_)
    errors.push_back(ranks.empty() ? message : fmt::format("{} (sent to {})", message, plural_ranks(ranks)));
  j["errors"] = errors;
  j["diagnoses"] = {{"mismatches", mismatches_}, {"deadlocks", deadlocks_}, {"timeouts", rendezvous_timeouts_}};
}

}  // namespace fakegpu::coord
