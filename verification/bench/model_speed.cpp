// What modeling one operation costs the coordinator: the cost model's estimate plus placing the
// operation on the job's link timeline, as Job::count_completed does for every completed call.
// Prints nanoseconds per operation for a 16-rank and a 1024-rank communicator, the time to
// build each communicator's model, and the ratio of the two costs, measured in one run. Once a
// communicator's patterns are cached, an operation costs the same on 1024 ranks as on 16; with
// --check it fails when it costs over 8 times as much. Usage: model_speed [OPS] [--check]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "cluster_config.h"
#include "comm_model.h"
#include "link_timeline.h"

using namespace fakegpu;

namespace {

ClusterConfig h100_nodes(int nodes) {
  std::string y = "version: 1\ncluster: {name: bench}\nnodes:\n";
  int rank = 0;
  for (int n = 0; n < nodes; ++n) {
    y += "  - {id: n" + std::to_string(n) + ", ranks: [";
    for (int g = 0; g < 8; ++g) y += (g ? ", " : "") + std::to_string(rank++);
    y += "], gpus: [";
    for (int g = 0; g < 8; ++g) y += g ? ", {profile: h100}" : "{profile: h100}";
    y += "]}\n";
  }
  y += "fabric:\n  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}\n"
       "  inter_node: {type: infiniband, bandwidth_gbps: 3200, latency_us: 5}\n";
  return parse_cluster_config(y, "bench.yaml");
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Returns the nanoseconds per modeled operation.
double run(int nodes, long ops) {
  ClusterConfig config = h100_nodes(nodes);
  planner::Topology topo = planner::Topology::from_config(config);
  std::vector<int> gpus(config.world_size());
  std::iota(gpus.begin(), gpus.end(), 0);
  auto t0 = std::chrono::steady_clock::now();
  planner::CommModel model(topo, gpus, planner::TuningEnv{});
  double build_s = seconds_since(t0);
  coord::LinkTimeline timeline(topo);
  double clock = 0, sink = 0;
  const wire::CollType colls[] = {wire::CollType::kAllReduce, wire::CollType::kAllGather, wire::CollType::kReduceScatter};
  auto model_ops = [&](long count) {
    for (long i = 0; i < count; ++i) {
      uint64_t bytes = uint64_t{8} << (i % 30);  // 8 B .. 4 GiB
      planner::Estimate e = model.estimate(colls[i % 3], bytes);
      sink += timeline.place(&clock, e).end_us;
    }
  };
  // Each of the 90 kinds of operation once, untimed: their first pricing builds the model's
  // cached patterns, which a job pays once, not per operation.
  model_ops(90);
  t0 = std::chrono::steady_clock::now();
  model_ops(ops);
  double per_op_ns = seconds_since(t0) / ops * 1e9;
  std::printf("%5d ranks: model built in %.1f ms; %.0f ns per modeled operation (%ld ops, checksum %.3g)\n",
              config.world_size(), build_s * 1e3, per_op_ns, ops, sink);
  return per_op_ns;
}

}  // namespace

int main(int argc, char** argv) {
  long ops = argc > 1 ? std::atol(argv[1]) : 1000000;
  const bool check = argc > 2 && std::string(argv[2]) == "--check";
  if (ops <= 0) {
    std::fprintf(stderr, "usage: model_speed [OPS] [--check]\n");
    return 2;
  }
  const double small = run(2, ops), large = run(128, ops);
  const double ratio = large / small;
  std::printf("an operation on 1024 ranks costs %.1f times one on 16\n", ratio);
  if (check && ratio > 8) {
    std::printf("check failed: modeling an operation grows with the rank count\n");
    return 1;
  }
  return 0;
}
