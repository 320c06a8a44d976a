// The job's report: what ran, how the model priced it, how the data moved, each rank's and each
// communicator's part, and what went wrong. The counters are JobStats'; this puts them together
// with what only the Job knows.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <set>

#include "job.h"

namespace fakegpu::coord {

namespace {

std::string iso_time(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A communicator's rings (ranks in ring order, from rank 0) and trees (each rank's parent, -1
// at a root), one per channel, as the model built them.
nlohmann::json channels_json(const planner::CommModel& model) {
  nlohmann::json rings = nlohmann::json::array(), trees = nlohmann::json::array();
  for (const auto& ring : model.rings()) {
    std::vector<int> order(ring);
    std::rotate(order.begin(), std::find(order.begin(), order.end(), 0), order.end());
    rings.push_back(order);
  }
  for (const auto& tree : model.trees()) {
    std::vector<int> parents;
    for (const auto& node : tree) parents.push_back(node.parent);
    trees.push_back(parents);
  }
  // How its rank pairs are joined, as NCCL names the paths (NVL, PIX, PXB, PHB, SYS, NET).
  std::map<std::string, uint64_t> paths;
  const planner::Topology& topo = model.topology();
  for (int a = 0; a < model.nranks(); ++a)
    for (int b = a + 1; b < model.nranks(); ++b) ++paths[path_type_name(topo.path_type(model.gpu_of(a), model.gpu_of(b)))];
  return {{"count", model.channels()}, {"rings", rings}, {"trees", trees}, {"path_types", paths}};
}

}  // namespace

size_t Job::ranks_seen() const {
  return std::count_if(clients_.begin(), clients_.end(),
                       [](const auto& c) { return c.second.greeted && !c.second.observer; });
}

nlohmann::json Job::comm_entry(const Comm& comm) const {
  using nlohmann::json;
  json members = json::array();
  for (const auto& m : comm.members) members.push_back(m.global_rank);
  json entry = {{"id", comm.id}, {"name", comm.name}, {"nranks", comm.members.size()}, {"global_ranks", members},
                {"collectives", comm.collectives}};
  entry["parent"] = comm.parent ? json(comm.parent) : json(nullptr);
  if (comm.model) entry["channels"] = channels_json(*comm.model);
  // A rank leaving without ncclCommDestroy is normal at exit; it is only worth reporting when
  // it cost a peer an operation.
  if (comm.refused > 0) entry["failure"] = comm.first_failure.empty() ? comm.failure : comm.first_failure;
  return entry;
}

nlohmann::json Job::hybrid_report() const {
  std::set<std::string> computed_on, modeled;
  for (const auto& [id, c] : clients_)
    if (!c.hello.compute_gpu.empty()) {
      computed_on.insert(c.hello.compute_gpu);
      const int node = cluster_.node_of_rank(c.global_rank);
      if (node >= 0) {
        const auto& ranks = cluster_.nodes[node].ranks;
        const size_t local = std::find(ranks.begin(), ranks.end(), c.global_rank) - ranks.begin();
        if (local < cluster_.nodes[node].gpus.size()) modeled.insert(cluster_.nodes[node].gpus[local]->name);
      }
    }
  if (computed_on.empty()) return nullptr;
  return {{"computed_on", computed_on},
          {"modeled_gpus", modeled},
          {"how", "the ranks' kernels ran on computed_on, this machine's GPUs; their collectives were modeled on the "
                  "cluster's GPUs (modeled_gpus) and links"}};
}

nlohmann::json Job::report() const {
  using nlohmann::json;
  json j;
  j["schema_version"] = 1;
  j["world_size"] = cluster_.world_size();
  j["coordinator"] = {{"version", FAKEGPU_VERSION},
                      {"protocol_version", wire::kProtocolVersion},
                      {"transport", server_.transport},
                      {"address", server_.address},
                      {"pid", static_cast<int>(getpid())},
                      {"started_at", iso_time(started_)},
                      {"ended_at", iso_time(std::chrono::system_clock::now())}};
  json nodes = json::array();
  for (const auto& n : cluster_.nodes) {
    json gpus = json::array();
    for (const auto* g : n.gpus) gpus.push_back(g->name);
    nodes.push_back({{"id", n.id}, {"host", n.host}, {"ranks", n.ranks}, {"gpus", gpus}});
  }
  j["cluster"] = {{"name", cluster_.name}, {"config", server_.cluster_config_path}, {"nodes", nodes}};
  // The NCCL settings the cluster gives every job (the environment's own override them).
  json conf = json::object();
  for (const auto& s : cluster_.nccl_conf) conf[s.name] = s.value;
  j["cluster"]["nccl_conf"] = conf;
  // The NCCL release whose rules the times follow (FAKEGPU_NCCL_VERSION, cluster.nccl_version).
  j["cluster"]["nccl_version_modeled"] = planner::nccl_version_name(tuning_.nccl_version);

  stats_.write(j);
  j["totals"]["modeled_makespan_us"] = timeline_.makespan_us();
  j["links"] = timeline_.report();
  j["node_pairs"] = timeline_.node_pairs();

  json ranks = json::array();
  for (const auto& [id, c] : clients_) {
    if (!c.greeted || c.observer) continue;
    ranks.push_back({{"global_rank", c.global_rank},
                     {"pid", c.hello.pid},
                     {"host", c.hello.hostname},
                     {"comm_inits", c.comm_inits},
                     {"collectives", c.collectives},
                     {"errors", c.errors},
                     {"bytes", c.bytes},
                     {"wait_us", c.wait_us},
                     {"modeled_wait_us", c.modeled_wait_us},
                     {"timeouts", c.timeouts},
                     {"last_operation", c.last_posted == Posted::kNothing ? nlohmann::json(nullptr)
                                                                          : nlohmann::json(last_post(c))}});
    if (c.stood_in) ranks.back()["stood_in_by"] = figures_of(c).global_rank;
    if (!c.hello.compute_gpu.empty()) ranks.back()["computed_on"] = c.hello.compute_gpu;
  }
  std::stable_sort(ranks.begin(), ranks.end(), [](const json& a, const json& b) {
    return a["global_rank"].get<int>() < b["global_rank"].get<int>();
  });
  j["ranks"] = ranks;
  if (json steps = steps_report(); !steps.is_null()) j["steps"] = std::move(steps);
  if (json operators = operators_report(); !operators.is_null()) j["operators"] = std::move(operators);
  if (json memory = memory_report(); !memory.is_null()) j["memory"] = std::move(memory);
  if (json representative = representative_report(); !representative.is_null())
    j["representative"] = std::move(representative);
  if (json hybrid = hybrid_report(); !hybrid.is_null()) j["hybrid"] = std::move(hybrid);

  json comms = json::array();
  for (const json& entry : comms_.retired()) comms.push_back(entry);
  for (const auto& [id, comm] : comms_) comms.push_back(comm_entry(comm));
  std::stable_sort(comms.begin(), comms.end(),
                   [](const json& a, const json& b) { return a["id"].get<uint64_t>() < b["id"].get<uint64_t>(); });
  j["communicators"] = comms;
  if (comms_.not_listed()) j["communicators_not_listed"] = comms_.not_listed();
  if (ranks_not_listed_) j["ranks_not_listed"] = ranks_not_listed_;
  uint64_t rank_timeouts = 0;
  for (const auto& [id, c] : clients_) rank_timeouts += c.timeouts;
  j["diagnoses"]["rank_timeouts"] = rank_timeouts;
  return j;
}

}  // namespace fakegpu::coord
