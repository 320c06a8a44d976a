#include <gtest/gtest.h>

#include "cluster_config.h"

using namespace fakegpu;

namespace {

const char* kSeedConfig = R"(version: 1
cluster: {name: dev-cluster, default_backend: nccl}
nodes:
  - {id: node0, host: 127.0.0.1, ranks: [0, 1], gpus: [{profile: a100}, {profile: a100}]}
  - {id: node1, host: 127.0.0.1, ranks: [2, 3], gpus: [{profile: h100}, {profile: h100}]}
fabric:
  intra_node: {type: nvlink, bandwidth_gbps: 300, latency_us: 3}
  inter_node: {type: infiniband, bandwidth_gbps: 200, latency_us: 15, oversubscription: 1.5}
)";

// Replaces the first occurrence of `from` in the seed config.
std::string seed_with(const std::string& from, const std::string& to) {
  std::string s = kSeedConfig;
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

// Parses and returns the error message, failing the test when parsing succeeds.
std::string error_of(const std::string& yaml) {
  try {
    parse_cluster_config(yaml, "cluster.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "config was accepted:\n" << yaml;
  return "";
}

}  // namespace

TEST(ClusterConfig, AcceptsTheSeedSchema) {
  ClusterConfig c = parse_cluster_config(kSeedConfig, "seed.yaml");
  EXPECT_EQ(c.name, "dev-cluster");
  EXPECT_EQ(c.world_size(), 4);
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.nodes[1].id, "node1");
  EXPECT_STREQ(c.nodes[0].gpus[0]->name, "a100-80gb");
  EXPECT_STREQ(c.nodes[1].gpus[1]->name, "h100-sxm");
  EXPECT_EQ(c.intra_node.type, "nvlink");
  EXPECT_DOUBLE_EQ(c.intra_node.bandwidth_gbps, 300);
  EXPECT_DOUBLE_EQ(c.inter_node.oversubscription, 1.5);
  EXPECT_EQ(c.node_of_rank(3), 1);
  EXPECT_EQ(c.node_of_rank(4), -1);
}

TEST(ClusterConfig, BundledConfigsLoad) {
  for (const char* f : {"configs/cluster_valid.yaml", "configs/demo_2node_16gpu.yaml", "configs/cluster_valid_tcp.yaml"}) {
    ClusterConfig c = load_cluster_config(std::string(FAKEGPU_SOURCE_DIR) + "/" + f);
    EXPECT_GT(c.world_size(), 0) << f;
  }
}

TEST(ClusterConfig, ErrorsNameFileLineAndKey) {
  std::string e = error_of(seed_with("latency_us: 15", "latency_us: -1"));
  EXPECT_NE(e.find("cluster.yaml:8:"), std::string::npos) << e;
  EXPECT_NE(e.find("fabric.inter_node.latency_us"), std::string::npos) << e;
}

struct InvalidCase {
  const char* name;
  std::string yaml;
  const char* expect;  // substring of the error
};

// Tests are listed by the case's name, not its bytes.
void PrintTo(const InvalidCase& c, std::ostream* os) { *os << c.name; }

class InvalidConfig : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidConfig, IsRejectedWithAClearMessage) {
  std::string e = error_of(GetParam().yaml);
  EXPECT_NE(e.find(GetParam().expect), std::string::npos) << "error was: " << e;
  EXPECT_EQ(e.rfind("cluster.yaml", 0), 0u) << e;
}

INSTANTIATE_TEST_SUITE_P(
    AllRules, InvalidConfig,
    ::testing::Values(
        InvalidCase{"empty", "", "the file is empty"},
        InvalidCase{"syntax", "version: [1\n", "(syntax)"},
        InvalidCase{"not_a_map", "- 1\n- 2\n", "expected a mapping"},
        InvalidCase{"missing_version", seed_with("version: 1\n", ""), "version: required key is missing"},
        InvalidCase{"future_version", seed_with("version: 1", "version: 2"), "unsupported schema version 2"},
        InvalidCase{"version_not_int", seed_with("version: 1", "version: one"), "expected an integer"},
        InvalidCase{"unknown_top_key", seed_with("version: 1", "version: 1\nnodez: []"), "did you mean 'nodes'"},
        InvalidCase{"missing_cluster_name", seed_with("name: dev-cluster, ", ""), "cluster.name: required key"},
        InvalidCase{"bad_backend", seed_with("default_backend: nccl", "default_backend: gloo"), "unsupported backend 'gloo'"},
        InvalidCase{"no_nodes", seed_with("nodes:\n  - {id: node0, host: 127.0.0.1, ranks: [0, 1], gpus: [{profile: a100}, {profile: a100}]}\n  - {id: node1, host: 127.0.0.1, ranks: [2, 3], gpus: [{profile: h100}, {profile: h100}]}", "nodes: []"), "non-empty list of nodes"},
        InvalidCase{"duplicate_rank", seed_with("ranks: [2, 3]", "ranks: [1, 3]"), "rank 1 is listed twice"},
        InvalidCase{"gap_in_ranks", seed_with("ranks: [2, 3]", "ranks: [2, 4]"), "rank 3 is missing"},
        InvalidCase{"not_from_zero", seed_with("ranks: [0, 1]", "ranks: [4, 1]"), "rank 0 is missing"},
        InvalidCase{"negative_rank", seed_with("ranks: [0, 1]", "ranks: [-1, 1]"), "rank must be >= 0"},
        InvalidCase{"rank_not_int", seed_with("ranks: [0, 1]", "ranks: [zero, 1]"), "expected an integer rank"},
        InvalidCase{"ranks_gpus_mismatch", seed_with("gpus: [{profile: a100}, {profile: a100}]", "gpus: [{profile: a100}]"), "lists 2 ranks but 1 gpus"},
        InvalidCase{"unknown_profile", seed_with("profile: h100}, {profile: h100}", "profile: h1000}, {profile: h100}"), "unknown GPU profile 'h1000'"},
        InvalidCase{"duplicate_node_id", seed_with("id: node1", "id: node0"), "duplicate node id 'node0'"},
        InvalidCase{"unknown_node_key", seed_with("host: 127.0.0.1, ranks: [0, 1]", "hots: x, ranks: [0, 1]"), "did you mean 'host'"},
        InvalidCase{"zero_bandwidth", seed_with("bandwidth_gbps: 300", "bandwidth_gbps: 0"), "intra_node.bandwidth_gbps: must be > 0"},
        InvalidCase{"bandwidth_not_number", seed_with("bandwidth_gbps: 300", "bandwidth_gbps: fast"), "expected a number, got 'fast'"},
        InvalidCase{"negative_latency", seed_with("latency_us: 3", "latency_us: -3"), "intra_node.latency_us: must be >= 0"},
        InvalidCase{"oversubscription_below_one", seed_with("oversubscription: 1.5", "oversubscription: 0.5"), "oversubscription: must be >= 1"},
        InvalidCase{"unknown_link_type", seed_with("type: infiniband", "type: infiniband2"), "did you mean 'infiniband'"},
        InvalidCase{"missing_inter_node", seed_with("  inter_node: {type: infiniband, bandwidth_gbps: 200, latency_us: 15, oversubscription: 1.5}\n", ""), "fabric.inter_node: required key is missing"},
        InvalidCase{"missing_fabric", seed_with("fabric:", "fabricx:"), "did you mean 'fabric'"},
        InvalidCase{"list_as_key", seed_with("version: 1", "version: 1\n? [cluster]\n: x"), "expected a key name, not a list"},
        InvalidCase{"repeated_key", seed_with("latency_us: 3", "latency_us: 3, latency_us: 5"), "intra_node.latency_us: key given twice"},
        InvalidCase{"infinite_bandwidth", seed_with("bandwidth_gbps: 300", "bandwidth_gbps: .inf"), "expected a finite number, got '.inf'"},
        InvalidCase{"nan_latency", seed_with("latency_us: 3", "latency_us: .nan"), "expected a finite number"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ClusterConfig, MissingFileIsAClearError) {
  try {
    load_cluster_config("/nonexistent/cluster.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cluster.yaml: cannot open"), std::string::npos);
  }
}
