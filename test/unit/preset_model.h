// A communicator over every GPU of one of configs/presets' clusters, for the planner's tests.
#pragma once

#include <numeric>
#include <string>
#include <vector>

#include "cluster_config.h"
#include "comm_model.h"

namespace fakegpu::planner {

struct Preset {
  Topology topo;
  CommModel model;
  explicit Preset(const std::string& file, const TuningEnv& env = {})
      : topo(Topology::from_config(load_cluster_config(std::string(FAKEGPU_SOURCE_DIR) + "/configs/presets/" + file))),
        model(topo, all_ranks(static_cast<int>(topo.gpus.size())), env) {}
  static std::vector<int> all_ranks(int n) {
    std::vector<int> v(n);
    std::iota(v.begin(), v.end(), 0);
    return v;
  }
};

}  // namespace fakegpu::planner
