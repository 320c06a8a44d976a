// The ranks' PyTorch operators (wire::RankOperators) and the report's table of them: per rank,
// the operators by modeled GPU time, like torch.profiler's key_averages, with what bounds each,
// and the GPU time split into matrix math, attention, memory-bound kernels and host copies.
#include <algorithm>
#include <fstream>

#include "env.h"
#include "job.h"
#include "op_facts.h"

namespace fakegpu::coord {

using nlohmann::json;

void Job::handle_rank_operators(Client& client, wire::RankOperators msg) {
  client.operators = std::move(msg.rows);  // totals so far: the latest replace the last
}

namespace {

constexpr size_t kRowsListed = 25;  // per rank; the rest count in the totals

const char* category(uint8_t kind) {
  switch (kind) {
    case FAKEGPU_OP_GEMM:
    case FAKEGPU_OP_CONV: return "matrix";
    case FAKEGPU_OP_ATTENTION:
    case FAKEGPU_OP_ATTENTION_BACKWARD: return "attention";
    case FAKEGPU_OP_HOST_COPY: return "host_copy";
    default: return "memory";
  }
}

// What held the operator's GPU time most: its host launch, the model's bound, or fixed costs.
const char* bound(const wire::OperatorTotal& t) {
  const std::pair<double, const char*> parts[] = {
      {t.compute_us, "compute"}, {t.memory_us, "memory"}, {t.launch_us, "launch"}, {t.host_bound_us, "host"}};
  return std::max_element(std::begin(parts), std::end(parts))->second;
}

// The table of kernel times measured on a GPU that the ranks priced operators at (fgpu
// --kernel-times), with the GPU and profile its header names; null without one.
json kernel_times_source() {
  const std::string path = env::get(env::kKernelTimes);
  if (path.empty()) return nullptr;
  json source = {{"table", path}, {"measured_on", nullptr}, {"profile", nullptr}};
  try {
    std::ifstream in(path);
    const json table = json::parse(in);
    source["measured_on"] = table.at("device");
    source["profile"] = table.at("profile");
  } catch (const std::exception&) {
    // The ranks read it before the report: one they could not read priced nothing, and says so.
  }
  return source;
}

}  // namespace

json Job::operators_report() const {
  json ranks = json::array();
  for (const auto& [id, client] : clients_) {
    const Client& c = figures_of(client);
    if (c.operators.empty()) continue;
    double gpu_us = 0, host_us = 0, measured_us = 0;
    json split = {{"matrix", 0.0}, {"attention", 0.0}, {"memory", 0.0}, {"host_copy", 0.0}};
    for (const wire::OperatorTotal& t : c.operators) {
      gpu_us += t.gpu_us;
      host_us += t.host_us;
      measured_us += t.measured_us;
      split[category(t.kind)] = split[category(t.kind)].get<double>() + t.gpu_us;
    }
    json rows = json::array();
    for (size_t i = 0; i < std::min(kRowsListed, c.operators.size()); ++i) {
      const wire::OperatorTotal& t = c.operators[i];  // the rank sends them largest first
      rows.push_back({{"name", t.name},
                      {"calls", t.calls},
                      {"kernels", t.kernels},
                      {"gpu_us", t.gpu_us},
                      {"share", gpu_us > 0 ? t.gpu_us / gpu_us : 0.0},
                      {"host_us", t.host_us},
                      {"category", category(t.kind)},
                      {"bound", bound(t)},
                      {"measured_us", t.measured_us}});
    }
    ranks.push_back({{"global_rank", client.global_rank},
                     {"gpu_us", gpu_us},
                     {"host_us", host_us},
                     {"measured_gpu_us", measured_us},
                     {"gpu_us_by_category", split},
                     {"operators", c.operators.size()},
                     {"rows", rows}});
  }
  if (ranks.empty()) return nullptr;
  std::stable_sort(ranks.begin(), ranks.end(), [](const json& a, const json& b) {
    return a["global_rank"].get<int>() < b["global_rank"].get<int>();
  });
  json report = {{"ranks", ranks}};
  if (json source = kernel_times_source(); !source.is_null()) report["kernel_times"] = std::move(source);
  return report;
}

}  // namespace fakegpu::coord
