#include "cluster_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "env.h"
#include "gpu_rates.h"

namespace fakegpu {
namespace {

// Edit distance, for "did you mean" hints on unknown keys and names.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& choices) {
  std::string best;
  size_t best_d = 3;  // only suggest close matches
  for (const auto& c : choices) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  return best.empty() ? "" : "; did you mean '" + best + "'?";
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// Walks the document and turns every problem into a ConfigError with its location.
class Parser {
 public:
  explicit Parser(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& what) const {
    throw ConfigError((at.IsDefined() && at.Mark().line >= 0 ? where(at) : source_) + ": " + key + ": " + what);
  }

  void expect_map(const YAML::Node& node, const std::string& key) const {
    if (!node.IsMap()) fail(node, key, "expected a mapping");
  }

  void only_keys(const YAML::Node& map, const std::string& key, const std::vector<std::string>& allowed) const {
    std::set<std::string> seen;
    for (const auto& kv : map) {
      // YAML allows a list or a mapping as a key ("? [a, b]"); no schema key is one.
      if (!kv.first.IsScalar()) fail(kv.first, key.empty() ? "(document)" : key, "expected a key name, not a list or mapping");
      auto name = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
        fail(kv.first, key.empty() ? name : key + "." + name,
             "unknown key (allowed: " + join(allowed) + ")" + did_you_mean(name, allowed));
      // yaml-cpp keeps both copies of a repeated key and lookups see only the first, so the
      // second would be silently ignored.
      if (!seen.insert(name).second) fail(kv.first, key.empty() ? name : key + "." + name, "key given twice");
    }
  }

  YAML::Node required(const YAML::Node& map, const char* name, const std::string& key) const {
    YAML::Node child = map[name];
    if (!child.IsDefined() || child.IsNull()) fail(map, key.empty() ? name : key + "." + name, "required key is missing");
    return child;
  }

  template <typename T>
  T scalar(const YAML::Node& node, const std::string& key, const char* type_name) const {
    if (!node.IsScalar()) fail(node, key, std::string("expected ") + type_name);
    try {
      return node.as<T>();
    } catch (const YAML::Exception&) {
      fail(node, key, std::string("expected ") + type_name + ", got '" + node.Scalar() + "'");
    }
  }

  // YAML's .inf and .nan read as doubles, but no bandwidth or latency can be either.
  double number(const YAML::Node& map, const char* name, const std::string& key) const {
    YAML::Node node = required(map, name, key);
    const std::string at = key.empty() ? name : key + "." + name;
    double v = scalar<double>(node, at, "a number");
    if (!std::isfinite(v)) fail(node, at, "expected a finite number, got '" + node.Scalar() + "'");
    return v;
  }

  ClusterConfig parse(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) fail(root, "(document)", "the file is empty");
    expect_map(root, "(document)");
    only_keys(root, "", {"version", "cluster", "gpu_types", "nodes", "fabric"});
    ClusterConfig cfg;
    cfg.source = source_;
    YAML::Node version = required(root, "version", "");
    cfg.version = scalar<int>(version, "version", "an integer");
    if (cfg.version != 1) fail(version, "version", "unsupported schema version " + std::to_string(cfg.version) + " (supported: 1)");

    YAML::Node cluster = required(root, "cluster", "");
    expect_map(cluster, "cluster");
    only_keys(cluster, "cluster", {"name", "default_backend", "nccl_conf", "nccl_version"});
    cfg.name = scalar<std::string>(required(cluster, "name", "cluster"), "cluster.name", "a string");
    if (cluster["default_backend"]) {
      cfg.default_backend = scalar<std::string>(cluster["default_backend"], "cluster.default_backend", "a string");
      if (cfg.default_backend != "nccl")
        fail(cluster["default_backend"], "cluster.default_backend", "unsupported backend '" + cfg.default_backend + "' (supported: nccl)");
    }
    if (cluster["nccl_conf"]) parse_nccl_conf(cluster["nccl_conf"], cfg);
    if (cluster["nccl_version"]) {
      const YAML::Node v = cluster["nccl_version"];
      const std::string text = scalar<std::string>(v, "cluster.nccl_version", "an NCCL version such as 2.21 or 2.21.5");
      cfg.nccl_version = {"nccl_version", text, where(v)};
    }

    if (root["gpu_types"]) parse_gpu_types(root["gpu_types"]);
    parse_nodes(required(root, "nodes", ""), cfg);
    parse_fabric(required(root, "fabric", ""), cfg);
    return cfg;
  }

 private:
  // The NCCL variables the cost model reads (env.def's, read by the coordinator); the values of
  // NCCL_ALGO and NCCL_PROTO, which have a grammar of their own, are checked by the planner.
  void parse_nccl_conf(const YAML::Node& conf, ClusterConfig& cfg) {
    const std::string key = "cluster.nccl_conf";
    std::map<std::string, const env::Declaration*> known;
    std::vector<std::string> names;
    for (auto d = env::begin_declarations(); d != env::end_declarations(); ++d)
      if ((d->readers & env::kCoordinator) && std::string(d->name).rfind("NCCL_", 0) == 0) {
        known[d->name] = d;
        names.push_back(d->name);
      }
    expect_map(conf, key);
    only_keys(conf, key, names);
    for (const auto& kv : conf) {
      const std::string name = kv.first.Scalar(), entry = key + "." + name;
      const std::string value = scalar<std::string>(kv.second, entry, "a value, as the environment would spell it");
      if (value.empty()) fail(kv.second, entry, "expected a value, as the environment would spell it");
      try {
        env::parse(*known.at(name), value.c_str());
      } catch (const env::SettingError& e) {
        fail(kv.second, entry, e.what());
      }
      cfg.nccl_conf.push_back({name, value, where(kv.second)});
    }
  }

  std::string where(const YAML::Node& at) const {
    return source_ + ":" + std::to_string(at.Mark().line + 1) + ":" + std::to_string(at.Mark().column + 1);
  }

  void parse_nodes(const YAML::Node& nodes, ClusterConfig& cfg) {
    if (!nodes.IsSequence() || nodes.size() == 0) fail(nodes, "nodes", "expected a non-empty list of nodes");
    std::set<std::string> ids;
    std::vector<std::pair<int, YAML::Node>> all_ranks;
    for (size_t i = 0; i < nodes.size(); ++i) {
      const YAML::Node n = nodes[i];
      std::string key = "nodes[" + std::to_string(i) + "]";
      expect_map(n, key);
      only_keys(n, key, {"id", "host", "host_speed", "ranks", "gpus", "nics", "topology_xml"});
      NodeConfig node;
      node.id = scalar<std::string>(required(n, "id", key), key + ".id", "a string");
      if (!ids.insert(node.id).second) fail(n["id"], key + ".id", "duplicate node id '" + node.id + "'");
      node.host = n["host"] ? scalar<std::string>(n["host"], key + ".host", "a string") : "127.0.0.1";
      if (n["host_speed"]) {
        node.host_speed = number(n, "host_speed", key);
        if (!(node.host_speed > 0))
          fail(n["host_speed"], key + ".host_speed", "must be > 0 (1: as fast as the server the host costs were measured on)");
      }

      YAML::Node ranks = required(n, "ranks", key);
      if (!ranks.IsSequence() || ranks.size() == 0) fail(ranks, key + ".ranks", "expected a non-empty list of ranks");
      for (size_t r = 0; r < ranks.size(); ++r) {
        int rank = scalar<int>(ranks[r], key + ".ranks[" + std::to_string(r) + "]", "an integer rank");
        if (rank < 0) fail(ranks[r], key + ".ranks[" + std::to_string(r) + "]", "rank must be >= 0");
        node.ranks.push_back(rank);
        all_ranks.emplace_back(rank, ranks[r]);
      }

      YAML::Node gpus = required(n, "gpus", key);
      if (!gpus.IsSequence()) fail(gpus, key + ".gpus", "expected a list of GPUs");
      for (size_t g = 0; g < gpus.size(); ++g) {
        std::string gkey = key + ".gpus[" + std::to_string(g) + "]";
        expect_map(gpus[g], gkey);
        only_keys(gpus[g], gkey, {"profile"});
        YAML::Node profile = required(gpus[g], "profile", gkey);
        auto name = scalar<std::string>(profile, gkey + ".profile", "a string");
        const GpuProfile* p = is_profile_file(name)   ? gpu_profile_file(profile, gkey + ".profile", name)
                              : gpu_types_.count(name) ? gpu_types_.at(name)
                                                       : find_gpu_profile(name);
        if (!p) {
          auto known = gpu_profile_names();
          for (const auto& [type, described] : gpu_types_) known.push_back(type);
          fail(profile, gkey + ".profile", "unknown GPU profile '" + name + "' (known: " + join(known) +
                                              "; or describe it under gpu_types)" + did_you_mean(name, known));
        }
        node.gpus.push_back(p);
      }
      if (node.gpus.size() != node.ranks.size())
        fail(n, key, "node '" + node.id + "' lists " + std::to_string(node.ranks.size()) + " ranks but " +
                         std::to_string(node.gpus.size()) + " gpus; each rank needs exactly one GPU");
      // A node whose GPUs were measured by fgpu calibrate runs at the speed of the host they were
      // measured in, unless it says otherwise.
      if (!n["host_speed"] && node.gpus.front()->host_speed > 0) node.host_speed = node.gpus.front()->host_speed;
      if (n["nics"] && n["topology_xml"])
        fail(n["nics"], key + ".nics", "the node's NICs come from its topology_xml; give one or the other");
      if (n["nics"]) parse_nics(n["nics"], key + ".nics", node);
      if (n["topology_xml"]) parse_topology_xml_key(n["topology_xml"], key + ".topology_xml", node);
      cfg.nodes.push_back(std::move(node));
    }

    // Ranks must be unique and cover 0..N-1 with no gap.
    std::sort(all_ranks.begin(), all_ranks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t i = 0; i < all_ranks.size(); ++i) {
      if (i > 0 && all_ranks[i].first == all_ranks[i - 1].first)
        fail(all_ranks[i].second, "nodes", "rank " + std::to_string(all_ranks[i].first) + " is listed twice");
      if (all_ranks[i].first != static_cast<int>(i))
        fail(all_ranks[i].second, "nodes", "ranks must be contiguous from 0: rank " + std::to_string(i) +
                                               " is missing (found " + std::to_string(all_ranks[i].first) + ")");
    }
  }

  // gpu_types: GPUs that are not among the profiles, described in the file.
  void parse_gpu_types(const YAML::Node& types) {
    if (!types.IsMap() || types.size() == 0) fail(types, "gpu_types", "expected a mapping of GPU names to descriptions");
    for (const auto& kv : types) {
      if (!kv.first.IsScalar()) fail(kv.first, "gpu_types", "expected a GPU name");
      const std::string name = kv.first.Scalar(), key = "gpu_types." + name;
      if (find_gpu_profile(name)) fail(kv.first, key, "a built-in profile has this name; choose another");
      if (gpu_types_.count(name)) fail(kv.first, key, "GPU type given twice");
      expect_map(kv.second, key);
      only_keys(kv.second, key, kGpuKeys);
      gpu_types_[name] = describe_gpu(kv.second, key, name);
    }
  }

 public:
  // A GPU profile file (fgpu calibrate writes them): `version: 1`, the GPU's `name` and the keys of
  // a gpu_types entry.
  const GpuProfile* parse_gpu_profile_file(const YAML::Node& root) {
    if (!root.IsDefined() || root.IsNull()) fail(root, "(document)", "the file is empty");
    expect_map(root, "(document)");
    std::vector<std::string> keys = kGpuKeys;
    keys.insert(keys.begin(), {"version", "name"});
    only_keys(root, "", keys);
    YAML::Node version = required(root, "version", "");
    if (scalar<int>(version, "version", "an integer") != 1)
      fail(version, "version", "unsupported GPU profile version " + version.Scalar() + " (supported: 1)");
    const auto name = scalar<std::string>(required(root, "name", ""), "name", "a string");
    if (name.empty()) fail(root["name"], "name", "expected a GPU name");
    if (find_gpu_profile(name)) fail(root["name"], "name", "a built-in profile has this name; choose another");
    return describe_gpu(root, "", name);
  }

 private:
  static inline const std::vector<std::string> kGpuKeys = {
      "base", "product_name", "memory_gib", "sm_count", "compute_capability", "nvlink_links", "nvlink_gbps", "pcie_gen",
      "pcie_width", "p2p", "fp64_tflops", "fp32_tflops", "tf32_tflops", "fp16_tflops", "fp8_tflops", "kernel_rates",
      "host_speed"};

  static std::string child(const std::string& key, const std::string& name) { return key.empty() ? name : key + "." + name; }

  // One described GPU. Figures left out (clocks, caches, math rates) come from `base`, by default
  // the profile of the highest compute capability not above this GPU's; its math rates scale with
  // the SM count. Kernel rates left out are the base's family's.
  const GpuProfile* describe_gpu(const YAML::Node& d, const std::string& key, const std::string& name) {
    const double memory_gib = number(d, "memory_gib", key);
    if (!(memory_gib > 0)) fail(d["memory_gib"], child(key, "memory_gib"), "must be > 0 (GiB)");
    const int sm_count = scalar<int>(required(d, "sm_count", key), child(key, "sm_count"), "an integer");
    if (sm_count < 1) fail(d["sm_count"], child(key, "sm_count"), "must be >= 1");
    const auto [major, minor] = compute_capability(required(d, "compute_capability", key), child(key, "compute_capability"));

    const GpuProfile& base = *base_profile(d, key, major * 10 + minor);
    GpuProfile gpu = base;
    const double math_scale = static_cast<double>(sm_count) / gpu.sm_count;
    for (double* rate : {&gpu.fp64_tflops, &gpu.fp32_tflops, &gpu.tf32_tflops, &gpu.half_tflops, &gpu.fp8_tflops})
      *rate *= math_scale;
    const std::string product = d["product_name"] ? scalar<std::string>(d["product_name"], child(key, "product_name"), "a string") : name;
    gpu.name = name.c_str();  // copied by register_gpu_profile
    gpu.product_name = product.c_str();
    gpu.base = base.name;
    gpu.memory_mib = static_cast<int>(memory_gib * 1024);
    gpu.sm_count = sm_count;
    gpu.cc_major = major;
    gpu.cc_minor = minor;
    gpu.nvlink_links = d["nvlink_links"] ? bounded_int(d["nvlink_links"], child(key, "nvlink_links"), 0, 18) : 0;
    gpu.nvlink_gbytes_per_link = 0;
    if (gpu.nvlink_links > 0) {
      const double gbps = number(d, "nvlink_gbps", key);
      if (!(gbps > 0)) fail(d["nvlink_gbps"], child(key, "nvlink_gbps"), "must be > 0 (Gbit/s per link and direction)");
      gpu.nvlink_gbytes_per_link = gbps / 8;
    } else if (d["nvlink_gbps"]) {
      fail(d["nvlink_gbps"], child(key, "nvlink_gbps"), "given without nvlink_links");
    }
    gpu.pcie_gen = d["pcie_gen"] ? bounded_int(d["pcie_gen"], child(key, "pcie_gen"), 1, 6) : gpu.pcie_gen;
    gpu.pcie_width = d["pcie_width"] ? scalar<int>(d["pcie_width"], child(key, "pcie_width"), "an integer") : 16;
    if (gpu.pcie_width != 1 && gpu.pcie_width != 2 && gpu.pcie_width != 4 && gpu.pcie_width != 8 && gpu.pcie_width != 16)
      fail(d["pcie_width"], child(key, "pcie_width"), "must be 1, 2, 4, 8 or 16 (lanes)");
    gpu.p2p = d["p2p"] ? scalar<bool>(d["p2p"], child(key, "p2p"), "true or false") : true;
    const std::pair<const char*, double*> rates[] = {{"fp64_tflops", &gpu.fp64_tflops}, {"fp32_tflops", &gpu.fp32_tflops},
                                                     {"tf32_tflops", &gpu.tf32_tflops}, {"fp16_tflops", &gpu.half_tflops},
                                                     {"fp8_tflops", &gpu.fp8_tflops}};
    for (const auto& [field, rate] : rates) {
      if (!d[field]) continue;
      *rate = number(d, field, key);
      if (!(*rate > 0)) fail(d[field], child(key, field), "must be > 0 (dense TFLOP/s)");
    }
    GpuRates kernel_rates;  // the base's, with what the description gives
    if (d["kernel_rates"]) {
      kernel_rates = gpu_rates(base);
      parse_kernel_rates(d["kernel_rates"], child(key, "kernel_rates"), kernel_rates);
      gpu.rates = &kernel_rates;  // copied by register_gpu_profile
    }
    if (d["host_speed"]) {
      gpu.host_speed = number(d, "host_speed", key);
      if (!(gpu.host_speed > 0))
        fail(d["host_speed"], child(key, "host_speed"), "must be > 0 (1: as fast as the server the host costs were measured on)");
    }
    return register_gpu_profile(gpu);
  }

  // kernel_rates: any of the kernel model's measured rates (common/cluster/gpu_rates.h), by name.
  void parse_kernel_rates(const YAML::Node& map, const std::string& key, GpuRates& rates) const {
    expect_map(map, key);
    std::vector<std::string> names;
    for (const auto& field : gpu_rate_fields()) names.push_back(field.name);
    only_keys(map, key, names);
    for (const auto& field : gpu_rate_fields()) {
      if (!map[field.name]) continue;
      const double value = number(map, field.name, key);
      if (!(value > 0 || (field.may_be_zero && value == 0)) || value > field.max) {
        std::ostringstream rule;
        rule << "must be " << (field.may_be_zero ? ">= 0" : "> 0");
        if (std::isfinite(field.max)) rule << " and <= " << field.max;
        fail(map[field.name], key + "." + field.name, rule.str() + " (" + field.unit + ")");
      }
      rates.*field.member = value;
    }
  }

  // "8.9" (or 8.9 written as a number, or "9" for 9.0): major and minor.
  std::pair<int, int> compute_capability(const YAML::Node& at, const std::string& key) const {
    const std::string text = scalar<std::string>(at, key, "a compute capability such as 8.9");
    const std::string major_text = text.substr(0, text.find('.'));
    const std::string minor_text = major_text.size() < text.size() ? text.substr(major_text.size() + 1) : "0";
    auto digits = [](const std::string& s) {
      return !s.empty() && s.size() <= 2 && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
    };
    const int major = digits(major_text) ? std::stoi(major_text) : -1;
    if (major < 3 || major > 12 || !digits(minor_text) || minor_text.size() != 1)
      fail(at, key, "expected a compute capability such as 8.9, got '" + text + "'");
    return {major, minor_text[0] - '0'};
  }

  int bounded_int(const YAML::Node& at, const std::string& key, int lo, int hi) const {
    int v = scalar<int>(at, key, "an integer");
    if (v < lo || v > hi) fail(at, key, "must be from " + std::to_string(lo) + " to " + std::to_string(hi));
    return v;
  }

  // The profile a described GPU takes its other figures from.
  const GpuProfile* base_profile(const YAML::Node& d, const std::string& key, int cc) const {
    if (d["base"]) {
      auto base = scalar<std::string>(d["base"], child(key, "base"), "a GPU profile name");
      if (const GpuProfile* p = find_gpu_profile(base)) return p;
      auto known = gpu_profile_names();
      fail(d["base"], child(key, "base"), "unknown GPU profile '" + base + "' (known: " + join(known) + ")" + did_you_mean(base, known));
    }
    const GpuProfile* best = nullptr;
    for (const auto& name : gpu_profile_names()) {
      const GpuProfile* p = find_gpu_profile(name);
      const int p_cc = p->cc_major * 10 + p->cc_minor;
      if (p_cc <= cc && (!best || p_cc > best->cc_major * 10 + best->cc_minor)) best = p;
    }
    if (!best) fail(d["compute_capability"], child(key, "compute_capability"), "no profile is as old as this; give base");
    return best;
  }

  void parse_nics(const YAML::Node& nics, const std::string& key, NodeConfig& node) {
    if (!nics.IsSequence() || nics.size() == 0) fail(nics, key, "expected a non-empty list of NICs");
    for (size_t i = 0; i < nics.size(); ++i) {
      std::string nkey = key + "[" + std::to_string(i) + "]";
      expect_map(nics[i], nkey);
      only_keys(nics[i], nkey, {"bandwidth_gbps", "gpus"});
      NicConfig nic;
      nic.bandwidth_gbps = number(nics[i], "bandwidth_gbps", nkey);
      if (!(nic.bandwidth_gbps > 0)) fail(nics[i]["bandwidth_gbps"], nkey + ".bandwidth_gbps", "must be > 0 (Gbit/s)");
      YAML::Node gpus = required(nics[i], "gpus", nkey);
      if (!gpus.IsSequence()) fail(gpus, nkey + ".gpus", "expected a list of local GPU indices");
      for (size_t g = 0; g < gpus.size(); ++g) {
        std::string gkey = nkey + ".gpus[" + std::to_string(g) + "]";
        int local = scalar<int>(gpus[g], gkey, "a local GPU index");
        if (local < 0 || local >= static_cast<int>(node.gpus.size()))
          fail(gpus[g], gkey, "no local GPU " + std::to_string(local) + " on node '" + node.id + "' (it has " +
                                  std::to_string(node.gpus.size()) + ")");
        nic.gpus.push_back(local);
      }
      node.nics.push_back(std::move(nic));
    }
  }

  // A GPU profile file named by its path (relative paths from the YAML file's directory), parsed
  // once however many GPUs name it.
  const GpuProfile* gpu_profile_file(const YAML::Node& at, const std::string& key, const std::string& written) {
    std::filesystem::path path = written;
    if (path.is_relative()) path = std::filesystem::path(source_).parent_path() / path;
    const std::string resolved = path.lexically_normal().string();
    const GpuProfile*& gpu = gpu_files_[resolved];
    if (!gpu) {
      try {
        gpu = load_gpu_profile(resolved);
      } catch (const ConfigError& e) {
        fail(at, key, e.what());
      }
    }
    return gpu;
  }

  // A relative path is taken from the YAML file's directory, so a config and its XML files
  // can move together.
  void parse_topology_xml_key(const YAML::Node& at, const std::string& key, NodeConfig& node) {
    auto written = scalar<std::string>(at, key, "a file path");
    if (written.empty()) fail(at, key, "expected a file path");
    std::filesystem::path path = written;
    if (path.is_relative()) path = std::filesystem::path(source_).parent_path() / path;
    node.topology_xml = path.lexically_normal().string();
    std::shared_ptr<const NodeXml>& xml = topologies_[node.topology_xml];
    if (!xml) {
      // Only a regular file: /dev/zero or a pipe would never end.
      std::error_code ec;
      if (std::filesystem::exists(node.topology_xml, ec) && !std::filesystem::is_regular_file(node.topology_xml, ec))
        fail(at, key, "'" + written + "' is not a regular file");
      std::ifstream in(node.topology_xml);
      if (!in) fail(at, key, "cannot open '" + written + "'" + (written == node.topology_xml ? "" : " (as " + node.topology_xml + ")"));
      std::stringstream text;
      text << in.rdbuf();
      try {
        xml = std::make_shared<const NodeXml>(parse_topology_xml(text.str(), node.topology_xml));
      } catch (const ConfigError& e) {
        fail(at, key, e.what());
      }
    }
    if (xml->gpus.size() != node.gpus.size())
      fail(at, key, written + " describes " + std::to_string(xml->gpus.size()) + " GPUs but node '" + node.id + "' has " +
                        std::to_string(node.gpus.size()));
    for (size_t l = 0; l < node.gpus.size(); ++l) {
      const GpuProfile* p = node.gpus[l];
      int cc = p->cc_major * 10 + p->cc_minor;
      if (xml->gpus[l].sm != cc)
        fail(at, key, written + ": GPU dev " + std::to_string(xml->gpus[l].dev) + " has sm " + std::to_string(xml->gpus[l].sm) +
                          " but gpus[" + std::to_string(l) + "] is " + p->name + " (sm " + std::to_string(cc) + ")");
    }
    node.topology = xml;
  }

  LinkConfig parse_link(const YAML::Node& link, const std::string& key, const std::vector<std::string>& types) {
    expect_map(link, key);
    bool inter = key == "fabric.inter_node";
    if (inter)
      only_keys(link, key, {"type", "bandwidth_gbps", "latency_us", "oversubscription", "topology", "nics_per_node", "sharp",
                            "efficiency", "plugin_latency_us", "simple_only"});
    else
      only_keys(link, key, {"type", "bandwidth_gbps", "latency_us", "oversubscription"});
    LinkConfig out;
    out.type = scalar<std::string>(required(link, "type", key), key + ".type", "a string");
    if (std::find(types.begin(), types.end(), out.type) == types.end())
      fail(link["type"], key + ".type", "unknown link type '" + out.type + "' (known: " + join(types) + ")" + did_you_mean(out.type, types));
    out.bandwidth_gbps = number(link, "bandwidth_gbps", key);
    if (!(out.bandwidth_gbps > 0)) fail(link["bandwidth_gbps"], key + ".bandwidth_gbps", "must be > 0 (Gbit/s)");
    out.latency_us = number(link, "latency_us", key);
    if (!(out.latency_us >= 0)) fail(link["latency_us"], key + ".latency_us", "must be >= 0 (microseconds)");
    if (link["oversubscription"]) {
      out.oversubscription = number(link, "oversubscription", key);
      if (!(out.oversubscription >= 1)) fail(link["oversubscription"], key + ".oversubscription", "must be >= 1 (1 means not oversubscribed)");
    }
    if (link["topology"]) {
      const std::vector<std::string> kinds = {"fat_tree", "rail_optimized"};
      out.topology = scalar<std::string>(link["topology"], key + ".topology", "a string");
      if (std::find(kinds.begin(), kinds.end(), out.topology) == kinds.end())
        fail(link["topology"], key + ".topology", "unknown network topology '" + out.topology + "' (known: " + join(kinds) + ")" +
                                                      did_you_mean(out.topology, kinds));
    }
    if (link["nics_per_node"]) {
      out.nics_per_node = scalar<int>(link["nics_per_node"], key + ".nics_per_node", "an integer");
      if (out.nics_per_node < 1) fail(link["nics_per_node"], key + ".nics_per_node", "must be >= 1");
    }
    if (link["sharp"]) out.sharp = scalar<bool>(link["sharp"], key + ".sharp", "true or false");
    if (link["efficiency"]) {
      out.efficiency = number(link, "efficiency", key);
      if (!(out.efficiency > 0 && out.efficiency <= 1))
        fail(link["efficiency"], key + ".efficiency", "must be > 0 and <= 1 (a share of the line rate)");
    }
    if (link["simple_only"]) out.simple_only = scalar<bool>(link["simple_only"], key + ".simple_only", "true or false");
    if (link["plugin_latency_us"]) {
      out.plugin_latency_us = number(link, "plugin_latency_us", key);
      if (!(out.plugin_latency_us >= 0)) fail(link["plugin_latency_us"], key + ".plugin_latency_us", "must be >= 0 (microseconds)");
    }
    return out;
  }

  void parse_fabric(const YAML::Node& fabric, ClusterConfig& cfg) {
    expect_map(fabric, "fabric");
    only_keys(fabric, "fabric", {"intra_node", "inter_node"});
    cfg.intra_node = parse_link(required(fabric, "intra_node", "fabric"), "fabric.intra_node", {"nvlink", "nvswitch", "nvlink_bridge", "pcie"});
    if (fabric["inter_node"]) {
      cfg.inter_node = parse_link(fabric["inter_node"], "fabric.inter_node", {"infiniband", "roce", "ethernet", "efa", "tcpxo"});
      cfg.has_inter_node = true;
    } else if (cfg.nodes.size() > 1) {
      fail(fabric, "fabric.inter_node", "required key is missing: the cluster has " + std::to_string(cfg.nodes.size()) + " nodes");
    }
  }

  std::string source_;
  std::map<std::string, std::shared_ptr<const NodeXml>> topologies_;  // by resolved path
  std::map<std::string, const GpuProfile*> gpu_types_;               // gpu_types, by name
  std::map<std::string, const GpuProfile*> gpu_files_;               // GPU profile files, by resolved path
};

}  // namespace

int ClusterConfig::world_size() const {
  int n = 0;
  for (const auto& node : nodes) n += static_cast<int>(node.ranks.size());
  return n;
}

int ClusterConfig::node_of_rank(int rank) const {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (std::find(nodes[i].ranks.begin(), nodes[i].ranks.end(), rank) != nodes[i].ranks.end()) return static_cast<int>(i);
  return -1;
}

namespace {
// The document, or a ConfigError naming where its syntax breaks.
YAML::Node load_yaml(const std::string& yaml_text, const std::string& source_name) {
  try {
    return YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(source_name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": (syntax): " + e.msg);
  }
}
}  // namespace

ClusterConfig parse_cluster_config(const std::string& yaml_text, const std::string& source_name) {
  return Parser(source_name).parse(load_yaml(yaml_text, source_name));
}

std::string read_config_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open the " + what);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool is_profile_file(const std::string& name) {
  auto ends_with = [&](const std::string& suffix) {
    return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".yaml") || ends_with(".yml");
}

const GpuProfile* load_gpu_profile(const std::string& path) {
  return Parser(path).parse_gpu_profile_file(load_yaml(read_config_file(path, "GPU profile file"), path));
}

ClusterConfig load_cluster_config(const std::string& path) {
  return parse_cluster_config(read_config_file(path, "cluster config file"), path);
}

}  // namespace fakegpu
