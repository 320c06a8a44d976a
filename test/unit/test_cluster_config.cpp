#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cluster_config.h"
#include "gpu_rates.h"

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

// The seed config with a gpu_types section and node1's GPUs of type "rtx".
std::string with_gpu_type(const std::string& type) {
  std::string s = seed_with("gpus: [{profile: h100}, {profile: h100}]", "gpus: [{profile: rtx}, {profile: rtx}]");
  return s.replace(s.find("nodes:"), 0, "gpu_types:\n  " + type + "\n");
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
        InvalidCase{"nan_latency", seed_with("latency_us: 3", "latency_us: .nan"), "expected a finite number"},
        InvalidCase{"efficiency_above_one", seed_with("oversubscription: 1.5", "efficiency: 1.2"),
                    "fabric.inter_node.efficiency: must be > 0 and <= 1"},
        InvalidCase{"negative_plugin_latency", seed_with("oversubscription: 1.5", "plugin_latency_us: -1"),
                    "fabric.inter_node.plugin_latency_us: must be >= 0"},
        InvalidCase{"simple_only_not_bool", seed_with("oversubscription: 1.5", "simple_only: maybe"),
                    "fabric.inter_node.simple_only: expected true or false"},
        InvalidCase{"nccl_conf_not_a_mapping", seed_with("default_backend: nccl}", "default_backend: nccl, nccl_conf: [ring]}"),
                    "cluster.nccl_conf: expected a mapping"},
        InvalidCase{"nccl_conf_unknown_variable",
                    seed_with("default_backend: nccl}", "default_backend: nccl, nccl_conf: {NCCL_ALOG: ring}}"),
                    "cluster.nccl_conf.NCCL_ALOG: unknown key (allowed: NCCL_ALGO, NCCL_PROTO"},
        InvalidCase{"nccl_conf_variable_it_does_not_model",
                    seed_with("default_backend: nccl}", "default_backend: nccl, nccl_conf: {NCCL_SOCKET_IFNAME: eth0}}"),
                    "cluster.nccl_conf.NCCL_SOCKET_IFNAME: unknown key"},
        InvalidCase{"nccl_conf_value_out_of_range",
                    seed_with("default_backend: nccl}", "default_backend: nccl, nccl_conf: {NCCL_NVLS_ENABLE: 5}}"),
                    "cluster.yaml:2:83: cluster.nccl_conf.NCCL_NVLS_ENABLE: NCCL_NVLS_ENABLE=5: expected"},
        InvalidCase{"nccl_conf_empty_value",
                    seed_with("default_backend: nccl}", "default_backend: nccl, nccl_conf: {NCCL_PROTO: \"\"}}"),
                    "cluster.nccl_conf.NCCL_PROTO: expected a value"},
        InvalidCase{"gpu_type_shadows_profile", with_gpu_type("h100: {memory_gib: 24, sm_count: 128, compute_capability: 8.9}"),
                    "gpu_types.h100: a built-in profile has this name"},
        InvalidCase{"gpu_type_missing_memory", with_gpu_type("rtx: {sm_count: 128, compute_capability: 8.9}"),
                    "gpu_types.rtx.memory_gib: required key is missing"},
        InvalidCase{"gpu_type_bad_cc", with_gpu_type("rtx: {memory_gib: 24, sm_count: 128, compute_capability: eight}"),
                    "gpu_types.rtx.compute_capability: expected a compute capability such as 8.9, got 'eight'"},
        InvalidCase{"gpu_type_zero_sms", with_gpu_type("rtx: {memory_gib: 24, sm_count: 0, compute_capability: 8.9}"),
                    "gpu_types.rtx.sm_count: must be >= 1"},
        InvalidCase{"gpu_type_nvlink_rate_missing", with_gpu_type("rtx: {memory_gib: 24, sm_count: 8, compute_capability: 8.9, nvlink_links: 4}"),
                    "gpu_types.rtx.nvlink_gbps: required key is missing"},
        InvalidCase{"gpu_type_odd_width", with_gpu_type("rtx: {memory_gib: 24, sm_count: 8, compute_capability: 8.9, pcie_width: 12}"),
                    "gpu_types.rtx.pcie_width: must be 1, 2, 4, 8 or 16"},
        InvalidCase{"gpu_type_unknown_key", with_gpu_type("rtx: {memory_gib: 24, sm_count: 8, compute_capability: 8.9, pcie_gne: 4}"),
                    "did you mean 'pcie_gen'"},
        InvalidCase{"gpu_type_unknown_base", with_gpu_type("rtx: {memory_gib: 24, sm_count: 8, compute_capability: 8.9, base: l40}"),
                    "gpu_types.rtx.base: unknown GPU profile 'l40'"},
        InvalidCase{"gpu_type_unknown_rate",
                    with_gpu_type("rtx: {memory_gib: 24, sm_count: 8, compute_capability: 8.9, kernel_rates: {memroy_share: 0.5}}"),
                    "gpu_types.rtx.kernel_rates.memroy_share: unknown key (allowed: kernel_us, memory_share"},
        InvalidCase{"gpu_type_share_above_one",
                    with_gpu_type("rtx: {memory_gib: 24, sm_count: 8, compute_capability: 8.9, kernel_rates: {gemm_tile_share: 1.5}}"),
                    "gpu_types.rtx.kernel_rates.gemm_tile_share: must be > 0 and <= 1 (a share of the SM's peak)"},
        InvalidCase{"gpu_type_zero_host_speed",
                    with_gpu_type("rtx: {memory_gib: 24, sm_count: 8, compute_capability: 8.9, host_speed: 0}"),
                    "gpu_types.rtx.host_speed: must be > 0"},
        InvalidCase{"nccl_version_a_list", seed_with("default_backend: nccl}", "default_backend: nccl, nccl_version: [2.21]}"),
                    "cluster.nccl_version: expected an NCCL version such as 2.21 or 2.21.5"},
        InvalidCase{"gpu_profile_file_missing",
                    seed_with("gpus: [{profile: h100}, {profile: h100}]", "gpus: [{profile: h100}, {profile: /nonexistent/box.yaml}]"),
                    "nodes[1].gpus[1].profile: /nonexistent/box.yaml: cannot open the GPU profile file"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ClusterConfig, NcclConfKeepsEachSettingWithItsPlace) {
  ClusterConfig c = parse_cluster_config(
      seed_with("default_backend: nccl}", "default_backend: nccl,\n          nccl_conf: {NCCL_ALGO: \"Ring,Tree\", NCCL_NVLS_ENABLE: 0}}"),
      "cluster.yaml");
  ASSERT_EQ(c.nccl_conf.size(), 2u);
  EXPECT_EQ(c.nccl_conf[0].name, "NCCL_ALGO");
  EXPECT_EQ(c.nccl_conf[0].value, "Ring,Tree");
  EXPECT_EQ(c.nccl_conf[0].where, "cluster.yaml:3:34");
  EXPECT_EQ(c.nccl_conf[1].name, "NCCL_NVLS_ENABLE");
  EXPECT_EQ(c.nccl_conf[1].value, "0");
  EXPECT_TRUE(parse_cluster_config(kSeedConfig, "seed.yaml").nccl_conf.empty());
}

// The release is kept as written, with its place; the planner reads it (tuning_from_env).
TEST(ClusterConfig, NcclVersionKeptWithItsPlace) {
  ClusterConfig c = parse_cluster_config(seed_with("default_backend: nccl}", "default_backend: nccl, nccl_version: 2.20}"),
                                         "cluster.yaml");
  EXPECT_EQ(c.nccl_version.value, "2.20");
  EXPECT_EQ(c.nccl_version.where.rfind("cluster.yaml:", 0), 0u) << c.nccl_version.where;
  EXPECT_TRUE(parse_cluster_config(kSeedConfig, "seed.yaml").nccl_version.value.empty());
}

TEST(ClusterConfig, MissingFileIsAClearError) {
  try {
    load_cluster_config("/nonexistent/cluster.yaml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cluster.yaml: cannot open"), std::string::npos);
  }
}

// A GPU that is not among the profiles, described in the file: its own figures, the rest from
// the profile of the nearest older compute capability (L40S for 8.9), math scaled by SM count.
TEST(ClusterConfig, GpuTypesDescribeGpusThatAreNotProfiles) {
  ClusterConfig c = parse_cluster_config(with_gpu_type("rtx: {product_name: NVIDIA GeForce RTX 4090, memory_gib: 24, "
                                                       "sm_count: 71, compute_capability: 8.9, pcie_width: 8, p2p: false}"),
                                         "cluster.yaml");
  const GpuProfile* rtx = c.nodes[1].gpus[0];
  const GpuProfile* l40s = find_gpu_profile("l40s");
  EXPECT_STREQ(rtx->name, "rtx");
  EXPECT_STREQ(rtx->product_name, "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(rtx->memory_mib, 24 * 1024);
  EXPECT_EQ(rtx->sm_count, 71);
  EXPECT_EQ(rtx->cc_major * 10 + rtx->cc_minor, 89);
  EXPECT_EQ(rtx->nvlink_links, 0);
  EXPECT_EQ(rtx->pcie_gen, l40s->pcie_gen);
  EXPECT_EQ(rtx->pcie_width, 8);
  EXPECT_FALSE(rtx->p2p);
  EXPECT_DOUBLE_EQ(rtx->half_tflops, l40s->half_tflops * 71 / l40s->sm_count);
  EXPECT_EQ(rtx->clock_mhz, l40s->clock_mhz);
  // The same description parsed again is the same GPU; the profile outlives its config.
  ClusterConfig again = parse_cluster_config(with_gpu_type("rtx: {product_name: NVIDIA GeForce RTX 4090, memory_gib: 24, "
                                                           "sm_count: 71, compute_capability: 8.9, pcie_width: 8, p2p: false}"),
                                             "cluster.yaml");
  EXPECT_EQ(again.nodes[1].gpus[0], rtx);
  // NVLink given per link in Gbit/s, stored in GB/s; an explicit base and rates win.
  ClusterConfig linked = parse_cluster_config(
      with_gpu_type("rtx: {memory_gib: 48, sm_count: 84, compute_capability: '8.6', nvlink_links: 4, nvlink_gbps: 112.5, "
                    "base: a100, fp16_tflops: 150}"),
      "cluster.yaml");
  const GpuProfile* a6000 = linked.nodes[1].gpus[0];
  EXPECT_DOUBLE_EQ(a6000->nvlink_gbytes_per_link, 112.5 / 8);
  EXPECT_DOUBLE_EQ(a6000->half_tflops, 150);
  EXPECT_EQ(a6000->memory_clock_mhz, find_gpu_profile("a100")->memory_clock_mhz);
  EXPECT_TRUE(a6000->p2p);
}

namespace {

// A GPU profile file, as fgpu calibrate writes them, in a fresh directory.
std::string write_profile(const std::string& file, const std::string& text) {
  const std::string dir = testing::TempDir() + "/fakegpu-gpu-profiles";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/" + file) << text;
  return dir + "/" + file;
}

const char* kMeasuredH200 = R"(version: 1
name: h200-box
base: h200
product_name: NVIDIA H200
memory_gib: 139.8
sm_count: 132
compute_capability: '9.0'
host_speed: 1.25
kernel_rates: {memory_share: 0.8, row_memory_share: 0.6}
)";

}  // namespace

// A cluster YAML names a measured GPU by its file (relative to the YAML's directory): its figures
// are its base's but for what it measured, its rates the family's but for the ones it gives, and
// its node runs at the measured host's speed unless the node says otherwise.
TEST(ClusterConfig, GpuProfileFilesNameMeasuredGpus) {
  const std::string path = write_profile("h200-box.yaml", kMeasuredH200);
  const std::string cluster = testing::TempDir() + "/fakegpu-gpu-profiles/cluster.yaml";
  ClusterConfig c = parse_cluster_config(
      seed_with("gpus: [{profile: h100}, {profile: h100}]", "gpus: [{profile: h200-box.yaml}, {profile: h200-box.yaml}]"),
      cluster);
  const GpuProfile* box = c.nodes[1].gpus[0];
  const GpuProfile* h200 = find_gpu_profile("h200");
  EXPECT_EQ(c.nodes[1].gpus[1], box);  // one file, one GPU
  EXPECT_STREQ(box->name, "h200-box");
  EXPECT_STREQ(box->base, "h200");
  EXPECT_EQ(box->memory_mib, static_cast<int>(139.8 * 1024));
  EXPECT_EQ(box->memory_clock_mhz, h200->memory_clock_mhz);
  ASSERT_NE(box->rates, nullptr);
  EXPECT_DOUBLE_EQ(gpu_rates(*box).memory_share, 0.8);
  EXPECT_DOUBLE_EQ(gpu_rates(*box).row_memory_share, 0.6);
  EXPECT_DOUBLE_EQ(gpu_rates(*box).gemm_tile_share, gpu_rates(*h200).gemm_tile_share);
  EXPECT_EQ(h200->rates, nullptr);
  EXPECT_DOUBLE_EQ(c.nodes[1].host_speed, 1.25);
  EXPECT_DOUBLE_EQ(c.nodes[0].host_speed, 1.0);

  ClusterConfig own = parse_cluster_config(
      seed_with("- {id: node1, host: 127.0.0.1, ranks: [2, 3], gpus: [{profile: h100}, {profile: h100}]}",
                "- {id: node1, host_speed: 0.5, ranks: [2, 3], gpus: [{profile: " + path + "}, {profile: " + path + "}]}"),
      cluster);
  EXPECT_DOUBLE_EQ(own.nodes[1].host_speed, 0.5);
  EXPECT_EQ(own.nodes[1].gpus[0], box);  // the same description is the same GPU

  // The runtime without a cluster YAML reads the file itself (FAKEGPU_GPU_PROFILE).
  EXPECT_EQ(load_gpu_profile(path), box);
  EXPECT_TRUE(is_profile_file(path));
  EXPECT_FALSE(is_profile_file("h200"));
}

TEST(ClusterConfig, GpuProfileFileErrorsNameTheFileAndKey) {
  auto error = [](const std::string& text) {
    try {
      load_gpu_profile(write_profile("bad.yaml", text));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "accepted:\n" << text;
    return std::string();
  };
  std::string text = kMeasuredH200;
  EXPECT_NE(error(std::string(text).replace(text.find("version: 1"), 10, "version: 2")).find("bad.yaml:1:10: version: unsupported GPU profile version 2"),
            std::string::npos);
  EXPECT_NE(error(std::string(text).replace(text.find("name: h200-box"), 14, "name: h100")).find("name: a built-in profile has this name"),
            std::string::npos);
  EXPECT_NE(error(std::string(text).replace(text.find("sm_count"), 8, "sm_cuont")).find("bad.yaml:6:1: sm_cuont: unknown key"),
            std::string::npos);
  EXPECT_NE(error(std::string(text).replace(text.find("0.6}"), 3, "1.6")).find("kernel_rates.row_memory_share: must be > 0 and <= 1"),
            std::string::npos);
}
