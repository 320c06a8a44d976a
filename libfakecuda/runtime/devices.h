// The virtual devices this process sees: the GPUs of its node in the cluster YAML
// (FAKEGPU_CLUSTER_CONFIG), or FAKEGPU_GPU_PROFILE GPUs without one. PCI bus ids are the
// ones the cost model and the topology use: domain = node index, bus = local index + 1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_profiles.h"

namespace fakegpu::cuda {

struct VirtualDevice {
  const GpuProfile* profile;
  int node;   // index in the cluster config's nodes
  int local;  // index on its node
  uint64_t memory_bytes;
  // PCI location, as cudaDeviceGetPCIBusId prints it: "%04x:%02x:00.0".
  int pci_domain;
  int pci_bus;
  std::string bus_id() const;
};

struct DeviceCatalogue {
  std::vector<VirtualDevice> devices;
  double host_speed = 1.0;  // the node's (cluster config nodes[].host_speed), for the kernel model
  std::string error;  // why the devices could not be set up; devices is then empty
};

// Built once, on first use.
const DeviceCatalogue& catalogue();
// The device with this ordinal, or nullptr when there is none.
const VirtualDevice* device_at(int ordinal);
// The device under one the program names, for the bridges' calls: hybrid mode's device sharing
// (libfakegpu-hybrid-devices.so), preloaded over this runtime where it stands in for NVIDIA's in
// tests, maps the devices of the runtime's API; the stub and the PyTorch hook, which name the
// program's devices, reach the runtime through a bridge that it does not see. Itself otherwise.
int runtime_device(int device);

}  // namespace fakegpu::cuda
