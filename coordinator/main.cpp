// fakegpu-coordinator: the daemon every rank connects to.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <cstdlib>
#include <fstream>

#include "cluster_config.h"
#include "cluster_layout.h"
#include "env.h"
#include "gpu_rates.h"
#include "report_markdown.h"
#include "server.h"
#include "status_client.h"
#include "tuning_from_env.h"

namespace {

// Writes atomically so a reader never sees half a file.
void write_file(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error(fmt::format("cannot write {}", tmp));
    out << text;
    if (!out.flush()) throw std::runtime_error(fmt::format("cannot write {}", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error(fmt::format("cannot rename {} to {}", tmp, path));
}

// Fails at start, not after the job, when the report could not be written where asked.
void check_writable(const std::string& path) {
  auto slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw std::runtime_error(fmt::format("cannot write the report {}: directory {} {}", path, dir,
                                         errno == ENOENT ? "does not exist" : "is not writable"));
}

// A GPU's figures as the models read them, for fgpu (which server a calibrated GPU's profile
// belongs in) and fgpu calibrate (the rates it starts from).
nlohmann::json gpu_profile_json(const std::string& name) {
  using namespace fakegpu;
  const GpuProfile* gpu = is_profile_file(name) ? load_gpu_profile(name) : find_gpu_profile(name);
  if (!gpu) throw std::runtime_error("--print-gpu " + name + ": unknown GPU profile (known: " +
                                     fmt::format("{}", fmt::join(gpu_profile_names(), ", ")) + "; or a GPU profile file)");
  nlohmann::json rates;
  for (const auto& field : gpu_rate_fields()) rates[field.name] = gpu_rates(*gpu).*field.member;
  return {{"name", gpu->name},
          {"product_name", gpu->product_name},
          {"base", gpu->base ? gpu->base : gpu->name},
          {"memory_mib", gpu->memory_mib},
          {"sm_count", gpu->sm_count},
          {"compute_capability", fmt::format("{}.{}", gpu->cc_major, gpu->cc_minor)},
          {"memory_gbytes_per_s", memory_gbytes_per_s(*gpu)},
          {"tflops", {{"fp64", gpu->fp64_tflops}, {"fp32", gpu->fp32_tflops}, {"tf32", gpu->tf32_tflops},
                      {"fp16", gpu->half_tflops}, {"fp8", gpu->fp8_tflops}}},
          {"measured_rates", gpu->rates != nullptr},
          {"kernel_rates", rates},
          {"host_speed", gpu->host_speed > 0 ? nlohmann::json(gpu->host_speed) : nlohmann::json()}};
}

}  // namespace

int main(int argc, char** argv) {
  using namespace fakegpu;
  // A malformed setting stops the coordinator before it listens: exit 2, as for bad arguments.
  try {
    env::check(env::kCoordinator);
    planner::tuning_from_env();  // NCCL_ALGO and NCCL_PROTO have a grammar of their own
  } catch (const env::SettingError& e) {
    fmt::print(stderr, "fakegpu-coordinator: error: {}\n", e.what());
    return 2;
  }
  CLI::App app{"fakegpu-coordinator: checks, executes and models the NCCL calls of every rank of a job"};
  std::string transport = env::get(env::kCoordinatorTransport);
  std::string address = env::get(env::kCoordinatorAddr);
  std::string cluster_path = env::get(env::kClusterConfig);
  std::string report_path = env::get(env::kClusterReportPath);
  std::string ready_file;
  bool check_only = false;
  bool exit_with_parent = false;
  bool print_layout = false;
  bool env_table = false;
  app.add_option("--transport", transport, "unix or tcp [env FAKEGPU_COORDINATOR_TRANSPORT]")->capture_default_str();
  app.add_option("--address", address,
                 "absolute socket path (unix) or host:port (tcp, binds 127.0.0.1 when host is empty) "
                 "[env FAKEGPU_COORDINATOR_ADDR]");
  app.add_option("--cluster-config", cluster_path, "cluster YAML [env FAKEGPU_CLUSTER_CONFIG]");
  app.add_option("--report", report_path, "where to write the JSON cluster report on shutdown [env FAKEGPU_CLUSTER_REPORT_PATH]");
  app.add_option("--ready-file", ready_file, "write the bound address here once listening (for launchers)");
  app.add_flag("--check-config", check_only, "validate the cluster config, print a summary and exit");
  app.add_flag("--exit-with-parent", exit_with_parent,
               "write the report and exit when the process that started this one is gone (a killed launcher)");
  app.add_flag("--print-layout", print_layout, "validate the cluster config, print it as JSON (nodes, ranks, GPUs, NICs, fabric) and exit");
  std::string print_gpu;
  app.add_option("--print-gpu", print_gpu,
                 "print a GPU profile (a built-in's name or a GPU profile file) with its kernel model rates as JSON and exit");
  app.add_flag("--env-table", env_table, "print the table of environment variables of docs/usage.md and exit");
  app.set_version_flag("--version", FAKEGPU_VERSION);
  bool status_json = false;
  CLI::App* status = app.add_subcommand("status", "ask the coordinator at --address where every rank of its job is");
  status->fallthrough();
  status->add_flag("--json", status_json, "print the status as JSON");
  CLI11_PARSE(app, argc, argv);
  const std::string token = env::get(env::kCoordinatorToken);

  try {
    if (env_table) {
      fmt::print("{}", env::markdown_table());
      return 0;
    }
    if (!print_gpu.empty()) {
      fmt::print("{}\n", gpu_profile_json(print_gpu).dump());
      return 0;
    }
    if (status->parsed()) {
      if (address.empty()) throw std::runtime_error("status: pass --address (or set FAKEGPU_COORDINATOR_ADDR)");
      nlohmann::json s = coord::query_status(parse_endpoint(transport, address), token);
      fmt::print("{}", status_json ? s.dump(2) + "\n" : coord::format_status(s));
      return 0;
    }
    if (cluster_path.empty()) throw std::runtime_error("no cluster config: pass --cluster-config or set FAKEGPU_CLUSTER_CONFIG");
    ClusterConfig cluster = load_cluster_config(cluster_path);
    planner::tuning_from_env(cluster);  // its NCCL_ALGO and NCCL_PROTO, as the environment's, and its NCCL release
    if (print_layout) {
      fmt::print("{}\n", coord::cluster_layout_json(cluster).dump());
      return 0;
    }
    if (check_only) {
      fmt::print("{}: OK: cluster '{}', {} node{}, world size {}\n", cluster_path, cluster.name, cluster.nodes.size(),
                 cluster.nodes.size() == 1 ? "" : "s", cluster.world_size());
      return 0;
    }
    Endpoint endpoint = parse_endpoint(transport, address);
    if (!report_path.empty()) check_writable(report_path);

    asio::io_context io;
    coord::Server server(io, endpoint, cluster, cluster_path, token);
    // Signals first: a launcher may stop us as soon as the ready file appears.
    const bool live = isatty(STDERR_FILENO);
    asio::signal_set signals(io, SIGINT, SIGTERM);
    auto shut_down = [&](const std::string& why) {
      fmt::print("fakegpu-coordinator: {}, shutting down\n", why);
      std::fflush(stdout);
      if (live) fmt::print(stderr, "\n");
      server.stop();
      io.stop();
    };
    signals.async_wait([&](asio::error_code, int sig) { shut_down(sig == SIGINT ? "received SIGINT" : "received SIGTERM"); });
    // A launcher killed with SIGKILL cannot stop us: notice that our parent changed, as it does
    // when ours exits, and end the job as if it had asked.
    asio::steady_timer parent_watch(io);
    const pid_t parent = getppid();
    std::function<void()> watch_parent = [&] {
      parent_watch.expires_after(std::chrono::milliseconds(200));
      parent_watch.async_wait([&](asio::error_code ec) {
        if (ec) return;
        if (getppid() != parent) return shut_down(fmt::format("the launcher (pid {}) is gone", parent));
        watch_parent();
      });
    };
    if (exit_with_parent) watch_parent();
    fmt::print("fakegpu-coordinator: listening on {}:{} (cluster '{}', world size {})\n", transport_name(endpoint.transport),
               server.bound_address(), cluster.name, cluster.world_size());
    std::fflush(stdout);
    if (!ready_file.empty()) write_file(ready_file, server.bound_address() + "\n");

    // On a terminal, a live line every half second: ranks seen, operations done, modeled time.
    asio::steady_timer ticker(io);
    std::function<void()> tick = [&] {
      coord::Job& job = server.job();
      fmt::print(stderr, "\rfakegpu-coordinator: {} ranks, {} operations, {:.1f} ms modeled   ", job.ranks_seen(),
                 job.completed_operations(), job.modeled_makespan_us() / 1e3);
      ticker.expires_after(std::chrono::milliseconds(500));
      ticker.async_wait([&](asio::error_code ec) {
        if (!ec) tick();
      });
    };
    if (live) asio::post(io, tick);
    int status = 0;
    try {
      server.run();
    } catch (const std::exception& e) {  // the report of what was done is still written
      fmt::print(stderr, "fakegpu-coordinator: error: {}; writing the report\n", e.what());
      server.stop();
      status = 1;
    }
    // Launchers such as timeout(1) signal the whole process group too: a second SIGTERM must
    // not cut the report short, so from here on stop signals are ignored.
    signals.clear();
    std::signal(SIGINT, SIG_IGN);
    std::signal(SIGTERM, SIG_IGN);

    auto report = server.job().report();
    if (!report_path.empty()) {
      // The Markdown companion and the trace sit beside the JSON: r.json, r.md, r.trace.json.
      std::string base = report_path;
      if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0) base.resize(base.size() - 5);
      write_file(report_path, report.dump(2) + "\n");
      write_file(base + ".md", coord::report_markdown(report));
      write_file(base + ".trace.json", server.job().trace().dump() + "\n");
      fmt::print("fakegpu-coordinator: report written to {} (with {}.md and {}.trace.json)\n", report_path, base, base);
    }
    fmt::print("fakegpu-coordinator: {} collectives completed, {} errors\n",
               report["totals"]["collective_calls"].get<uint64_t>(), report["errors"].size());
    return status;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fakegpu-coordinator: error: {}\n", e.what());
    return 1;
  }
}
