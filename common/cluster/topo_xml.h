// One node's hardware as NCCL describes it in a topology XML file (the NCCL_TOPO_FILE format:
// system / cpu / pci / gpu / nvlink / nic / net). Only what the cost model needs is kept:
// each GPU's NVLinks and PCIe bandwidth, each NIC's speed, the rails, and NCCL's path type
// between devices. It lives beside the cluster config so the loader can validate the file.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace fakegpu {

// NCCL's path types, nearest first. PIX: through one PCI switch; PXB: through several,
// without the CPU; PHB: through the CPU's host bridge; SYS: across CPUs (NUMA nodes); NET:
// through the network, to another node.
enum class PathType { kLoc, kNvl, kPix, kPxb, kPhb, kSys, kNet };
const char* path_type_name(PathType type);  // "LOC", "NVL", "PIX", ...

struct XmlGpu {
  int dev = 0;
  std::string bus_id;  // of the <pci> holding the <gpu>, lower case
  int sm = 0;          // compute capability as major*10+minor
  int rank = -1;       // the rank attribute, -1 when absent
  int cpu = 0;         // index of its <cpu> in the file
  double pcie_gbs = 0; // narrowest PCIe link between the GPU and its CPU, as NCCL credits it
  int nvswitch_links = 0;
  std::map<std::string, int> peer_links;  // peer GPU bus id -> NVLink count
  int nic = -1;        // index into NodeXml::nics of the NIC on its rail; -1 without NICs

  int nvlink_count() const;
};

struct XmlNic {
  std::string name;
  int dev = 0;
  double gbytes = 0;      // line rate, GB/s (the speed attribute is Mbit/s)
  std::vector<int> gpus;  // indices into NodeXml::gpus of the GPUs on its rail
};

struct NodeXml {
  std::string source;         // file it came from, for messages
  std::vector<XmlGpu> gpus;   // in order of dev
  std::vector<XmlNic> nics;   // one per <net>, in order of dev
  std::vector<std::vector<PathType>> gpu_gpu;  // [gpu][gpu]: kNvl where NVLink joins them
  std::vector<std::vector<PathType>> gpu_nic;  // [gpu][nic]

  // The node's GPU fabric in the cluster YAML's words: "nvswitch" when any GPU links to an
  // NVSwitch, "nvlink_bridge" when GPUs 2k and 2k+1 link only to each other, "nvlink" when
  // GPUs link to each other otherwise, "pcie" without NVLink.
  std::string fabric() const;
};

// Throws ConfigError ("FILE:LINE: ELEMENT: what is wrong") on malformed input.
NodeXml parse_topology_xml(const std::string& text, const std::string& source_name);
NodeXml load_topology_xml(const std::string& path);

}  // namespace fakegpu
