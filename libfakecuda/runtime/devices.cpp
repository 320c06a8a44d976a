#include "devices.h"

#include <dlfcn.h>

#include <cstdio>

#include "cluster_config.h"
#include "env.h"
#include "identity.h"

namespace fakegpu::cuda {
namespace {

constexpr int kDefaultDeviceCount = 8;

// FAKEGPU_NODE names the node by index or id; else the node holding this process's rank;
// else the first node.
int pick_node(const ClusterConfig& config) {
  std::string wanted = env::get(env::kNode);
  if (!wanted.empty()) {
    for (size_t n = 0; n < config.nodes.size(); ++n)
      if (config.nodes[n].id == wanted || std::to_string(n) == wanted) return static_cast<int>(n);
    throw std::runtime_error("FAKEGPU_NODE=" + wanted + ": no such node in " + config.source);
  }
  int rank = rank_from_environment();
  int node = rank >= 0 ? config.node_of_rank(rank) : -1;
  return node >= 0 ? node : 0;
}

VirtualDevice make_device(const GpuProfile* profile, int node, int local) {
  return VirtualDevice{profile, node, local, uint64_t(profile->memory_mib) << 20, node, local + 1};
}

std::vector<VirtualDevice> build(double* host_speed) {
  // Every setting the runtime reads, some only later (FAKEGPU_TIME_MODE), is checked here: a
  // malformed one leaves the process without devices, which every CUDA call then reports.
  env::check(env::kRuntime);
  std::vector<VirtualDevice> devices;
  std::string config_path = env::get(env::kClusterConfig);
  if (!config_path.empty()) {
    ClusterConfig config = load_cluster_config(config_path);
    int node = pick_node(config);
    *host_speed = config.nodes[node].host_speed;
    for (size_t l = 0; l < config.nodes[node].gpus.size(); ++l)
      devices.push_back(make_device(config.nodes[node].gpus[l], node, static_cast<int>(l)));
  } else {
    const std::string name = env::get(env::kGpuProfile);
    const GpuProfile* profile = is_profile_file(name) ? load_gpu_profile(name) : find_gpu_profile(name);
    if (!profile) throw std::runtime_error("FAKEGPU_GPU_PROFILE=" + name + ": unknown GPU model");
    if (profile->host_speed > 0) *host_speed = profile->host_speed;
    for (int l = 0; l < kDefaultDeviceCount; ++l) devices.push_back(make_device(profile, 0, l));
  }
  // FAKEGPU_DEVICE_COUNT, when set, overrides how many devices there are; extra ones repeat
  // the last device's model.
  if (int n = static_cast<int>(env::get(env::kDeviceCount))) {
    while (static_cast<int>(devices.size()) < n) {
      const VirtualDevice& last = devices.back();
      devices.push_back(make_device(last.profile, last.node, last.local + 1));
    }
    devices.resize(n);
  }
  return devices;
}

}  // namespace

std::string VirtualDevice::bus_id() const {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:00.0", static_cast<unsigned>(pci_domain), static_cast<unsigned>(pci_bus));
  return text;
}

const DeviceCatalogue& catalogue() {
  static const DeviceCatalogue* built = [] {
    auto* c = new DeviceCatalogue;  // never destroyed: CUDA calls may come from static destructors
    try {
      c->devices = build(&c->host_speed);
    } catch (const std::exception& e) {
      c->error = e.what();
      std::fprintf(stderr, "fakegpu: CUDA runtime has no devices: %s\n", e.what());
    }
    return c;
  }();
  return *built;
}

int runtime_device(int device) {
  using GpuOf = int (*)(int);
  static const GpuOf gpu_of = reinterpret_cast<GpuOf>(dlsym(RTLD_DEFAULT, "fakegpu_hybrid_gpu_of"));
  return gpu_of ? gpu_of(device) : device;
}

const VirtualDevice* device_at(int ordinal) {
  const auto& devices = catalogue().devices;
  return ordinal >= 0 && ordinal < static_cast<int>(devices.size()) ? &devices[ordinal] : nullptr;
}

}  // namespace fakegpu::cuda
