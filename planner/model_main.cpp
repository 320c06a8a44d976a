// fakegpu-model: what-if cost model. Prints, for a cluster config and a collective, the time
// NCCL would take at each size, in nccl-tests' layout, without starting any rank.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdio>
#include <map>

#include "comm_model.h"
#include "tuning_from_env.h"

namespace {

using fakegpu::wire::CollType;
namespace planner = fakegpu::planner;

struct CollInfo {
  CollType type;
  bool reduces;
  bool rooted;
  bool per_rank_count;  // the size is split over ranks (count is per rank)
};

const std::map<std::string, CollInfo> kCollectives = {
    {"all_reduce", {CollType::kAllReduce, true, false, false}},
    {"all_gather", {CollType::kAllGather, false, false, true}},
    {"broadcast", {CollType::kBroadcast, false, true, false}},
    {"reduce", {CollType::kReduce, true, true, false}},
    {"reduce_scatter", {CollType::kReduceScatter, true, false, true}},
    {"alltoall", {CollType::kAlltoAll, false, false, true}},
    {"sendrecv", {CollType::kSend, false, false, false}},
    {"gather", {CollType::kGather, false, true, true}},
    {"scatter", {CollType::kScatter, false, true, true}},
};

const std::map<std::string, int> kTypeSizes = {{"int8", 1},    {"uint8", 1},   {"int32", 4},    {"uint32", 4},
                                               {"int64", 8},   {"uint64", 8},  {"half", 2},     {"float", 4},
                                               {"double", 8},  {"bfloat16", 2}, {"fp8_e4m3", 1}, {"fp8_e5m2", 1}};

// The spellings people use for a type, beside nccl-tests' names.
const std::map<std::string, std::string> kTypeAliases = {
    {"fp16", "half"},     {"float16", "half"},  {"bf16", "bfloat16"}, {"fp32", "float"},     {"float32", "float"},
    {"fp64", "double"},   {"float64", "double"}, {"fp8", "fp8_e4m3"}, {"e4m3", "fp8_e4m3"}, {"e5m2", "fp8_e5m2"},
    {"char", "int8"},     {"int", "int32"},     {"uint", "uint32"}};

// "allreduce", "AllReduce", "all-reduce": a name without case, dashes or underscores.
std::string folded(const std::string& name) {
  std::string out;
  for (char c : name)
    if (c != '_' && c != '-') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <typename Map>
std::string names_of(const Map& map) {
  std::string out;
  for (const auto& [name, value] : map) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// nccl-tests' collective name for what the user wrote; throws, listing the names, when none fits.
std::string collective_named(const std::string& name) {
  for (const auto& [known, info] : kCollectives)
    if (folded(known) == folded(name)) return known;
  throw std::invalid_argument("unknown --collective '" + name + "'; use one of " + names_of(kCollectives) + ", or all");
}

std::string datatype_named(const std::string& name) {
  for (const auto& [known, size] : kTypeSizes)
    if (folded(known) == folded(name)) return known;
  for (const auto& [alias, known] : kTypeAliases)
    if (folded(alias) == folded(name)) return known;
  throw std::invalid_argument("unknown --datatype '" + name + "'; use one of " + names_of(kTypeSizes) + " (or fp16, " +
                              "bf16, fp32, fp64, fp8)");
}

// "8", "64K", "8G": nccl-tests' size syntax (powers of 1024).
uint64_t parse_size(const std::string& text) {
  size_t used = 0;
  double v = std::stod(text, &used);
  std::string unit = text.substr(used);
  double mult = 1;
  if (unit == "K" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "m") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "g") mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) throw std::invalid_argument("bad size '" + text + "' (use a number with K, M or G)");
  return static_cast<uint64_t>(v * mult);
}

// Takes the first `nodes` nodes and `per_node` GPUs of each; more nodes than the file has
// repeat its node shapes, so a one-node file can answer "and on 128 nodes?". GPUs left out take
// their NICs with them, and the NICs kept keep their own rate: 4 GPUs of a server with 8 x 400
// Gbit/s have 4 x 400, not the server's 3200 shared by 4.
fakegpu::ClusterConfig shape_cluster(const fakegpu::ClusterConfig& in, int nodes, int per_node, int ranks) {
  fakegpu::ClusterConfig out = in;
  out.nodes.clear();
  int next = 0;
  int want_nodes = nodes > 0 ? nodes : static_cast<int>(in.nodes.size());
  for (int n = 0; n < want_nodes; ++n) {
    fakegpu::NodeConfig node = in.nodes[n % in.nodes.size()];
    if (n >= static_cast<int>(in.nodes.size())) node.id = "node" + std::to_string(n);
    if (per_node > static_cast<int>(node.gpus.size()))
      throw std::invalid_argument(fmt::format("--gpus-per-node {}: node '{}' of {} has {} GPUs", per_node, node.id,
                                              in.source, node.gpus.size()));
    int keep = per_node > 0 ? per_node : static_cast<int>(node.gpus.size());
    if (ranks > 0) keep = std::min(keep, ranks - next);
    if (keep <= 0) break;
    if (keep < static_cast<int>(node.gpus.size()) && node.nics.empty() && node.topology_xml.empty() &&
        in.has_inter_node)
      node.nics = planner::fabric_nics(in.inter_node, static_cast<int>(node.gpus.size()));
    node.gpus.resize(keep);
    node.ranks.clear();
    for (int i = 0; i < keep; ++i) node.ranks.push_back(next++);
    std::vector<fakegpu::NicConfig> nics;
    for (auto& nic : node.nics) {
      std::vector<int> kept;
      for (int g : nic.gpus)
        if (g < keep) kept.push_back(g);
      const bool lost_its_gpus = kept.empty() && !nic.gpus.empty();
      nic.gpus = kept;
      if (!lost_its_gpus) nics.push_back(nic);
    }
    node.nics = nics;
    out.nodes.push_back(node);
  }
  if (ranks > next)
    throw std::invalid_argument(fmt::format("--ranks {}: the cluster modeled has {} GPUs", ranks, next));
  if (out.nodes.size() > 1 && !out.has_inter_node)
    throw std::invalid_argument(in.source + ": fabric.inter_node is needed to model more than one node");
  return out;
}

}  // namespace

// A flow's end: a rank, the node's NVSwitch, or the network's reducing switches.
std::string endpoint(int who) {
  if (who == planner::Flow::kSwitch) return "nvswitch";
  if (who == planner::Flow::kNetwork) return "network";
  return "rank " + std::to_string(who);
}

int main(int argc, char** argv) {
  CLI::App app{"fgpu model: NCCL's time for a collective on a cluster config, per size, as nccl-tests prints it",
               "fgpu model"};
  std::string config_path, coll_name = "all_reduce", dtype = "float", min_text = "8", max_text = "128M", algo, proto,
              nccl_version, nearest_nccl_version;
  double step = 2;
  int nodes = 0, per_node = 0, ranks = 0, root = 0;
  bool json_out = false, flows_out = false;
  app.add_option("--cluster-config", config_path,
                 "cluster YAML, or a preset by name or family (dgx-h100-2node, aws-p5); fgpu model takes --gpu NAME in "
                 "its place");
  app.add_option("--collective", coll_name, "all_reduce, all_gather, broadcast, reduce, reduce_scatter, alltoall, "
                                            "sendrecv, gather, scatter, or all")->capture_default_str();
  app.add_option("-b,--min-bytes", min_text, "smallest size (K, M, G suffixes)")->capture_default_str();
  app.add_option("-e,--max-bytes", max_text, "largest size")->capture_default_str();
  app.add_option("-f,--step-factor", step, "multiply the size by this each row")->capture_default_str();
  app.add_option("--nodes", nodes, "model this many nodes (the file's node shapes repeat past its end)");
  app.add_option("--gpus-per-node", per_node, "use this many GPUs of each node");
  app.add_option("--ranks", ranks, "use the first N ranks");
  app.add_option("--datatype", dtype, "element type, for the count column")->capture_default_str();
  app.add_option("--root", root, "root rank of rooted collectives")->capture_default_str();
  app.add_option("--algo", algo, "force algorithms, NCCL_ALGO syntax: ring, tree, nvls, nvlstree, pat, ^tree ...");
  app.add_option("--proto", proto, "force protocols, NCCL_PROTO syntax: ll, ll128, simple, ^ll ...");
  app.add_option("--nccl-version", nccl_version,
                 "model this NCCL release's rules, 2.18 to 2.30 (default: FAKEGPU_NCCL_VERSION, the cluster's "
                 "cluster.nccl_version, else the newest)");
  app.add_option("--nearest-nccl-version", nearest_nccl_version,
                 "model the release nearest this one, for a run of an NCCL older or newer than those modeled");
  app.add_flag("--json", json_out, "print JSON instead of the table");
  app.add_flag("--flows", flows_out, "list each size's flow plan: per channel and step, who sends how much to whom");
  CLI11_PARSE(app, argc, argv);

  try {
    if (config_path.empty()) throw std::invalid_argument("no cluster: give --cluster-config FILE (or, to fgpu model, --gpu NAME)");
    if (step <= 1) throw std::invalid_argument("--step-factor must be > 1");
    dtype = datatype_named(dtype);
    std::vector<std::string> colls;
    if (coll_name == "all") {
      for (auto& [name, info] : kCollectives) colls.push_back(name);
    } else {
      colls.push_back(collective_named(coll_name));
    }
    auto cluster = shape_cluster(fakegpu::load_cluster_config(config_path), nodes, per_node, ranks);
    auto topo = planner::Topology::from_config(cluster);
    auto env = planner::tuning_from_env(cluster);
    if (!nccl_version.empty()) env.nccl_version = planner::parse_nccl_version(nccl_version, "--nccl-version");
    if (!nearest_nccl_version.empty())
      env.nccl_version = planner::nearest_nccl_modeled(planner::read_nccl_version(nearest_nccl_version, "--nearest-nccl-version"));
    if (!algo.empty()) env.set_algo(algo);
    if (!proto.empty()) env.set_proto(proto);
    std::vector<int> gpus;
    for (int r = 0; r < cluster.world_size(); ++r) gpus.push_back(r);
    planner::CommModel model(topo, gpus, env);
    const int n = model.nranks();
    if (root < 0 || root >= n) throw std::invalid_argument(fmt::format("--root {} is not a rank of {}", root, n));
    const int tsize = kTypeSizes.at(dtype);
    uint64_t lo = parse_size(min_text), hi = parse_size(max_text);
    if (lo > hi)
      throw std::invalid_argument(fmt::format("--min-bytes {} is larger than --max-bytes {}: no size to model", min_text,
                                              max_text));

    nlohmann::json doc = {{"cluster", cluster.name}, {"ranks", n}, {"nodes", model.nnodes()}, {"datatype", dtype},
                          {"channels", model.channels()}, {"nccl_version", planner::nccl_version_name(env.nccl_version)},
                          {"results", nlohmann::json::array()}};
    // The NCCL settings the cluster gives every job, which the environment and --algo/--proto override.
    nlohmann::json conf = nlohmann::json::object();
    std::string conf_text;
    for (const auto& s : cluster.nccl_conf) {
      conf[s.name] = s.value;
      conf_text += fmt::format("{}{}={}", conf_text.empty() ? "" : ", ", s.name, s.value);
    }
    doc["nccl_conf"] = conf;
    if (!json_out) {
      fmt::print("# fakegpu model: {}, {} ranks on {} node{}, {} channels, NCCL {}\n", cluster.name, n,
                 model.nnodes(), model.nnodes() == 1 ? "" : "s", model.channels(),
                 planner::nccl_version_name(env.nccl_version));
      if (!conf_text.empty()) fmt::print("# the cluster's NCCL settings (nccl_conf): {}\n", conf_text);
    }
    for (const auto& name : colls) {
      const CollInfo& info = kCollectives.at(name);
      if (!json_out) {
        fmt::print("# {}\n", name);
        fmt::print("#{:>12} {:>13} {:>9} {:>6} {:>6} {:>10} {:>8} {:>8}  {:<9} {:<7} {:>8}\n", "size", "count", "type",
                   "redop", "root", "time", "algbw", "busbw", "algo", "proto", "channels");
        fmt::print("#{:>12} {:>13} {:>9} {:>6} {:>6} {:>10} {:>8} {:>8}\n", "(B)", "(elements)", "", "", "", "(us)",
                   "(GB/s)", "(GB/s)");
      }
      for (double s = static_cast<double>(lo); s <= static_cast<double>(hi) * 1.0000001; s = s == 0 ? 1 : s * step) {
        uint64_t size = static_cast<uint64_t>(s);
        uint64_t count = info.per_rank_count ? size / (tsize * static_cast<uint64_t>(n)) : size / tsize;
        uint64_t bytes = info.per_rank_count ? count * tsize * n : count * tsize;
        auto est = model.estimate(info.type, bytes, root);
        nlohmann::json flows = nlohmann::json::array();
        if (flows_out)
          for (const planner::Flow& f : model.flow_plan(info.type, est.algo, root))
            flows.push_back({{"channel", f.channel}, {"step", f.step}, {"steps", f.steps}, {"src", endpoint(f.src)},
                             {"dst", endpoint(f.dst)}, {"bytes_per_step", f.bytes * bytes}});
        std::string redop = info.reduces ? "sum" : "none";
        int shown_root = info.rooted ? root : -1;
        if (json_out) {
          doc["results"].push_back({{"collective", name}, {"size", bytes}, {"count", count}, {"type", dtype},
                                    {"redop", redop}, {"root", shown_root}, {"time_us", est.time_us},
                                    {"algbw_gbs", est.algbw_gbs}, {"busbw_gbs", est.busbw_gbs},
                                    {"algorithm", est.algo_label()}, {"protocol", planner::proto_name(est.proto)},
                                    {"channels", est.channels}, {"latency_us", est.latency_us},
                                    {"data_us", est.data_us}, {"fill_us", est.fill_us}});
          if (flows_out) doc["results"].back()["flows"] = flows;
        } else {
          fmt::print(" {:>12} {:>13} {:>9} {:>6} {:>6} {:>10.2f} {:>8.2f} {:>8.2f}  {:<9} {:<7} {:>8}\n", bytes, count,
                     dtype, redop, shown_root, est.time_us, est.algbw_gbs, est.busbw_gbs, est.algo_label(),
                     planner::proto_name(est.proto), est.channels);
          for (const auto& f : flows)
            fmt::print("#   channel {:>2}  step {:>4} x{:<5} {:>8} -> {:<8} {:>14.0f} B per step\n", f["channel"].get<int>(),
                       f["step"].get<int>(), f["steps"].get<int>(), f["src"].get<std::string>(),
                       f["dst"].get<std::string>(), f["bytes_per_step"].get<double>());
        }
      }
    }
    if (json_out) fmt::print("{}\n", doc.dump(2));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fgpu model: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
