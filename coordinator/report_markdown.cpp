#include "report_markdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace fakegpu::coord {
namespace {

using nlohmann::json;

// A table from a header and rows of cells; pipes inside cells are escaped.
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  auto line = [](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::string c : cells) {
      for (size_t at = c.find('|'); at != std::string::npos; at = c.find('|', at + 2)) c.replace(at, 1, "\\|");
      out += " " + c + " |";
    }
    return out + "\n";
  };
  std::string out = line(header) + "|";
  for (size_t i = 0; i < header.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : rows) out += line(row);
  return out + "\n";
}

// Microseconds as the tables print them.
std::string us(const json& v) { return fmt::format("{:.1f}", v.get<double>()); }

std::string mix(const json& algorithms) {
  std::string out;
  for (const auto& [name, calls] : algorithms.items()) out += (out.empty() ? "" : ", ") + name + " x" + calls.dump();
  return out;
}

// Per step, as its slowest rank took it, then per rank on average; times on the modeled clock.
std::string steps_section(const nlohmann::json& steps) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : steps["per_step"])
    rows.push_back({s["step"].dump(), us(s["time_us"]), s["slowest_rank"].dump(), us(s["compute_us"]), us(s["comm_us"]),
                    us(s["exposed_comm_us"])});
  std::string md = fmt::format(
      "## Steps\n\nMarked by {}; {} steps, median {} us{}. Communication counts from when a rank's stream reaches "
      "a call (waiting for peers included); exposed: while no kernel ran.\n\n",
      steps["marked_by"].get<std::string>(), steps["count"].dump(), us(steps["median_time_us"]),
      steps["count"].get<int>() > 1 ? " after the first (which also holds the set-up)" : "");
  md += table({"step", "modeled us", "slowest rank", "compute us", "communication us", "exposed us"}, rows);
  rows.clear();
  for (const auto& k : steps["ranks"]) {
    const auto& m = k["mean"];
    rows.push_back({k["global_rank"].dump(), k["steps"].dump(), us(m["time_us"]), us(m["compute_us"]), us(m["comm_us"]),
                    us(m["exposed_comm_us"])});
  }
  return md + "\nPer rank, the mean over its steps:\n\n" +
         table({"rank", "steps", "modeled us", "compute us", "communication us", "exposed us"}, rows);
}

// The operators of the first rank listed by modeled GPU time, and every rank's split by kind.
std::string operators_section(const json& operators) {
  const json& first = operators["ranks"][0];
  std::vector<std::vector<std::string>> rows;
  for (const auto& o : first["rows"])
    rows.push_back({o["name"].get<std::string>(), o["calls"].dump(), us(o["gpu_us"]),
                    fmt::format("{:.1f}%", 100 * o["share"].get<double>()), us(o["host_us"]),
                    o["category"].get<std::string>(), o["bound"].get<std::string>()});
  std::string md = fmt::format(
      "## Operators\n\nRank {}'s PyTorch operators by modeled GPU time ({} operators, {} us on the GPU, {} us "
      "launching them on the host). Bound: what held most of an operator's time; host where launching it took "
      "longer than its kernels.\n\n",
      first["global_rank"].dump(), first["operators"].dump(), us(first["gpu_us"]), us(first["host_us"]));
  if (const double measured = first["measured_gpu_us"].get<double>(); measured > 0) {
    const json source = operators.value("kernel_times", json::object());
    const json on = source.value("measured_on", json());
    md += fmt::format("{:.0f}% of that GPU time comes from kernel times measured on {} ({}), carried to the "
                      "cluster's GPU; the kernel model prices the rest.\n\n",
                      100 * measured / std::max(first["gpu_us"].get<double>(), 1e-9),
                      on.is_string() ? on.get<std::string>() : "a real GPU",
                      source.contains("table") ? source["table"].get<std::string>() : "fgpu --kernel-times");
  }
  md += table({"operator", "calls", "GPU us", "share", "host us", "kind", "bound"}, rows);
  rows.clear();
  for (const auto& k : operators["ranks"]) {
    const json& split = k["gpu_us_by_category"];
    const double total = std::max(k["gpu_us"].get<double>(), 1e-9);
    auto share = [&](const char* key) { return fmt::format("{:.0f}%", 100 * split[key].get<double>() / total); };
    rows.push_back({k["global_rank"].dump(), us(k["gpu_us"]), share("matrix"), share("attention"), share("memory"),
                    share("host_copy"), us(k["host_us"])});
  }
  return md + "\nPer rank, its operators' GPU time by kind:\n\n" +
         table({"rank", "GPU us", "matrix math", "attention", "memory-bound", "host copies", "host us"}, rows);
}

// Each rank's peak GPU memory with its parts, and any out-of-memory error.
std::string memory_section(const json& memory) {
  auto gib = [](const json& bytes) { return fmt::format("{:.2f}", bytes.get<double>() / double(uint64_t{1} << 30)); };
  std::vector<std::vector<std::string>> rows;
  for (const auto& k : memory["ranks"]) {
    const json& peak = k["peak"];
    const json& parts = peak["parts"];
    const bool torch = k.contains("pytorch");
    rows.push_back({k["global_rank"].dump(), gib(peak["bytes"]), gib(k["capacity"]), peak["step"].dump(),
                    gib(parts["program"]), gib(parts["nccl"]), gib(parts["context"]), gib(parts["libraries"]),
                    torch ? gib(k["pytorch"]["max_allocated"]) : "", torch ? gib(k["pytorch"]["max_reserved"]) : ""});
  }
  std::string md =
      "## GPU memory\n\nPer rank, the most of its GPU's memory in use at once (GiB), as cudaMemGetInfo and NVML "
      "report it, and its parts then: the program's allocations (PyTorch's reserved pool in a PyTorch job), NCCL's "
      "buffers, the CUDA context with the kernels loaded into it, and libraries' own memory; PyTorch's own peaks "
      "beside them.\n\n" +
      table({"rank", "peak", "capacity", "step", "program", "NCCL", "context", "libraries", "PyTorch max allocated",
             "PyTorch max reserved"},
            rows);
  for (const auto& k : memory["ranks"]) {
    if (!k.contains("out_of_memory")) continue;
    const json& oom = k["out_of_memory"];
    const json& in_use = oom["in_use"];
    auto part = [&](const char* name) { return in_use[name].get<double>(); };
    std::string largest;
    for (const auto& b : oom["largest_live_blocks"]) largest += (largest.empty() ? "" : ", ") + bytes_text(b.get<double>());
    md += fmt::format(
        "\n**Out of memory on rank {}** in step {}: PyTorch asked for {} with {} of {} in use (program {}, NCCL {}, "
        "context {}, libraries {}).{}\n",
        k["global_rank"].dump(), oom["step"].dump(), bytes_text(oom["requested_bytes"].get<double>()),
        bytes_text(part("context") + part("program") + part("nccl") + part("libraries")),
        bytes_text(k["capacity"].get<double>()), bytes_text(part("program")), bytes_text(part("nccl")),
        bytes_text(part("context")), bytes_text(part("libraries")),
        largest.empty() ? "" : " Its largest live blocks: " + largest + ".");
  }
  return md;
}

}  // namespace

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}

std::string report_markdown(const json& r) {
  std::string md = fmt::format("# fakegpu cluster report: {}\n\n", r["cluster"]["name"].get<std::string>());
  const json& co = r["coordinator"];
  md += fmt::format("World size {}, {} node(s). Coordinator {} (protocol {}) on {} {}, from {} to {}.\n\n",
                    r["world_size"].get<int>(), r["cluster"]["nodes"].size(), co["version"].get<std::string>(),
                    co["protocol_version"].get<int>(), co["transport"].get<std::string>(),
                    co["address"].get<std::string>(), co["started_at"].get<std::string>(),
                    co["ended_at"].get<std::string>());
  if (r["cluster"].contains("nccl_version_modeled"))
    md += fmt::format("Times follow NCCL {}'s rules.\n\n", r["cluster"]["nccl_version_modeled"].get<std::string>());
  if (const json& conf = r["cluster"].value("nccl_conf", json::object()); !conf.empty()) {
    std::string settings;
    for (const auto& [name, value] : conf.items()) settings += (settings.empty() ? "" : ", ") + name + "=" + value.get<std::string>();
    md += "NCCL settings the cluster gives every job (the job's environment overrides them): " + settings + ".\n\n";
  }
  if (r.contains("hybrid")) {
    auto names = [](const json& list) {
      std::string out;
      for (const json& name : list) out += (out.empty() ? "" : ", ") + name.get<std::string>();
      return out;
    };
    md += fmt::format("Hybrid mode: the ranks computed on this machine's {}; their communication is modeled on the "
                      "cluster's {}.\n\n",
                      names(r["hybrid"]["computed_on"]), names(r["hybrid"]["modeled_gpus"]));
  }
  const json& t = r["totals"];
  md += fmt::format("{} collective calls of {} in all, modeled {:.1f} us of communication over a {:.1f} us timeline.\n\n",
                    t["collective_calls"].get<uint64_t>(), bytes_text(t["bytes"].get<double>()),
                    t["modeled_time_us"].get<double>(), t["modeled_makespan_us"].get<double>());

  std::vector<std::vector<std::string>> rows;
  for (const auto& [name, c] : r["collectives"].items())
    rows.push_back({name, c["calls"].dump(), bytes_text(c["bytes"].get<double>()),
                    fmt::format("{:.1f}", c["modeled_time_us"].get<double>()), mix(c["algorithms"])});
  md += "## Collectives\n\nBytes: the calls' sizes added up, each call once.\n\n" +
        table({"collective", "calls", "bytes", "modeled us", "algorithms"}, rows);

  rows.clear();
  for (const auto& o : r["operations"])
    rows.push_back({o["communicator"].dump(),
                    o["collective"].get<std::string>() + (o.contains("path") ? " over " + o["path"].get<std::string>() : ""),
                    bytes_text(o["bytes"].get<double>()),
                    o["calls"].dump(), o["algorithm"].get<std::string>() + "/" + o["protocol"].get<std::string>(),
                    o["channels"].dump(), fmt::format("{:.2f}", o["modeled_time_us"].get<double>()),
                    fmt::format("{:.2f}", o["algbw_gbs"].get<double>()), fmt::format("{:.2f}", o["busbw_gbs"].get<double>())});
  md += "## Operations\n\nOne row per communicator, collective and size (and a Send's path); times are one call's.\n\n" +
        table({"comm", "collective", "size", "calls", "algorithm", "channels", "time us", "algbw GB/s", "busbw GB/s"}, rows);

  std::vector<json> links(r["links"].begin(), r["links"].end());
  std::sort(links.begin(), links.end(), [](const json& a, const json& b) { return a["utilization"] > b["utilization"]; });
  rows.clear();
  for (size_t i = 0; i < links.size() && i < 20; ++i)
    rows.push_back({links[i]["link"].get<std::string>(), bytes_text(links[i]["bytes"].get<double>()),
                    fmt::format("{:.1f}", links[i]["busy_us"].get<double>()),
                    fmt::format("{:.0f}%", 100 * links[i]["utilization"].get<double>())});
  md += fmt::format("## Busiest links\n\n{} of {} links that carried data.\n\n", rows.size(), links.size()) +
        table({"link", "bytes", "busy us", "utilisation"}, rows);

  rows.clear();
  for (const auto& p : r["node_pairs"])
    rows.push_back({p["from"].get<std::string>(), p["to"].get<std::string>(), bytes_text(p["bytes"].get<double>())});
  md += "## Traffic between nodes\n\nA node to itself: traffic inside it. \"network\": switches that reduce.\n\n" +
        table({"from", "to", "bytes"}, rows);

  rows.clear();
  for (const auto& k : r["ranks"])
    rows.push_back({k["global_rank"].dump(), k["host"].get<std::string>(), k["pid"].dump(), k["comm_inits"].dump(),
                    k["collectives"].dump(), bytes_text(k["bytes"].get<double>()),
                    fmt::format("{:.1f}", k["modeled_wait_us"].get<double>()),
                    fmt::format("{:.1f}", k["wait_us"].get<double>()), k["timeouts"].dump(), k["errors"].dump()});
  md += "## Ranks\n\nBytes: the sizes of the calls the rank took part in. Waits: time its calls waited for slower "
        "peers (small for a straggler), modeled, and in wall-clock time on the host that ran the job.\n\n" +
        table({"rank", "host", "pid", "comm inits", "collectives", "bytes", "modeled wait us", "host wait us",
               "timeouts", "errors"},
              rows);

  if (r.contains("steps")) md += steps_section(r["steps"]);
  if (r.contains("operators")) md += operators_section(r["operators"]);
  if (r.contains("memory")) md += memory_section(r["memory"]);

  rows.clear();
  for (const auto& c : r["communicators"])
    rows.push_back({c["id"].dump(), c["name"].get<std::string>(), c["nranks"].dump(), c["global_ranks"].dump(),
                    c["parent"].dump(), c["collectives"].dump(), c.contains("failure") ? c["failure"].get<std::string>() : ""});
  md += "## Communicators\n\n" + table({"id", "name", "ranks", "global ranks", "parent", "collectives", "failure"}, rows);

  const json& plane = r["data_plane"];
  md += fmt::format(
      "## Data plane\n\n{} in place in shared memory, {} over the socket, {} not moved (FAKEGPU_PAYLOAD), {} "
      "segments mapped, {} clients on a control ring; {} payload chunks in, {} out. {} collectives ({}) exchanged "
      "among their ranks through the peer mailboxes of {} communicators.\n\n",
      bytes_text(plane["shared_memory_bytes"].get<double>()), bytes_text(plane["socket_bytes"].get<double>()),
      bytes_text(plane["payload_free_bytes"].get<double>()), plane["segments_mapped"].dump(),
      plane["control_ring_clients"].dump(), plane["payload_chunks_in"].dump(), plane["payload_chunks_out"].dump(),
      plane["peer_exchange_ops"].dump(), bytes_text(plane["peer_exchange_bytes"].get<double>()),
      plane["peer_mailboxes"].dump());
  const json& diag = r["diagnoses"];
  md += "## Diagnoses\n\n";
  if (diag["mismatches"].empty() && diag["deadlocks"].empty() && diag["timeouts"].get<uint64_t>() == 0)
    md += "No mismatch, deadlock or rendezvous timeout.\n";
  for (const auto& [kind, count] : diag["mismatches"].items()) md += fmt::format("- {}: {}\n", kind, count.dump());
  if (diag["timeouts"].get<uint64_t>() > 0)
    md += fmt::format("- rendezvous timeouts: {} (waiting ranks failed: {})\n", diag["timeouts"].dump(),
                      diag["rank_timeouts"].dump());
  for (const auto& d : diag["deadlocks"]) md += "- " + d.get<std::string>() + "\n";
  md += fmt::format("\n## Errors\n\n{}\n", r["errors"].empty() ? "None.\n" : "");
  for (const auto& e : r["errors"]) md += "- " + e.get<std::string>() + "\n";
  return md;
}

}  // namespace fakegpu::coord
