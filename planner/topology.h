// The physical cluster the cost model reasons about: GPUs, their NVLink and PCIe ports,
// NICs with their rails, and the network between nodes. Built once from the cluster YAML.
// Bandwidths here are in GB/s per direction and are what NCCL's topology code would credit
// (NVLink per link by compute capability, PCIe by generation, NICs at line rate times the
// efficiency of their transport), not datasheet peaks.
#pragma once

#include <string>
#include <vector>

#include "cluster_config.h"

namespace fakegpu::planner {

// kNvLinkBridge: GPUs 2k and 2k+1 of a node are joined by an NVLink bridge; other pairs
// talk over PCIe.
enum class IntraFabric { kNvSwitch, kNvLinkMesh, kNvLinkBridge, kPcie };

// Every directed resource an operation can load. Per-link accounting keys on these.
enum class LinkKind { kNvlTx, kNvlRx, kPcieTx, kPcieRx, kNicTx, kNicRx };
inline bool is_nic(LinkKind k) { return k == LinkKind::kNicTx || k == LinkKind::kNicRx; }
inline bool is_pcie(LinkKind k) { return k == LinkKind::kPcieTx || k == LinkKind::kPcieRx; }
inline bool is_nvlink(LinkKind k) { return k == LinkKind::kNvlTx || k == LinkKind::kNvlRx; }

struct Link {
  LinkKind kind;
  int owner;          // GPU index for NVLink/PCIe links, NIC index for NIC links
  double gbytes = 0;  // capacity, GB/s
  std::string name;   // e.g. "node0/gpu3 nvlink tx", "node1/nic2 rx"
};

struct Gpu {
  int node = 0;   // index into Topology::nodes
  int local = 0;  // index on its node
  const GpuProfile* profile = nullptr;
  int cc = 0;            // compute capability as major*10+minor
  int nic = -1;          // NIC index of its rail, -1 when the node has none
  PathType nic_path = PathType::kPix;  // NCCL's path type to that NIC: the topology XML's, else PIX
  double nvlink_gbs = 0; // all NVLink ports together
  double pcie_gbs = 0;
  std::string bus_id;    // virtual PCI bus id: one PCI domain per node
};

struct Nic {
  int node = 0;
  int local = 0;
  double line_gbytes = 0;  // line rate, GB/s (what NCCL's search credits)
  double gbytes = 0;       // usable rate after transport efficiency and oversubscription
  std::vector<int> gpus;  // global GPU indices on its rail
};

struct Node {
  std::string id;
  IntraFabric fabric = IntraFabric::kNvSwitch;
  std::vector<int> gpus;  // global GPU indices, local order
  std::vector<int> nics;  // NIC indices
  std::vector<std::vector<PathType>> gpu_paths;  // [local][local] from the topology XML, if any
};

// The NICs of a node that lists none: the fabric's count (one per GPU by default) sharing the
// node's bandwidth, each serving an equal, contiguous block of GPUs, or, where NICs outnumber
// GPUs, each GPU an equal block of NICs.
std::vector<NicConfig> fabric_nics(const LinkConfig& net, int gpus);

struct Topology {
  std::vector<Node> nodes;
  std::vector<Gpu> gpus;  // indexed by global rank of the cluster config
  std::vector<Nic> nics;
  std::vector<Link> links;
  bool sharp = false;         // the network reduces in its switches (SHARP): CollNet, NVLS across nodes
  double net_latency_us = 0;     // one-way latency of the network between nodes
  double plugin_latency_us = 0;  // the latency NCCL's net plugin reports, which its tuner adds
  bool net_simple_only = false;  // the net plugin sets NCCL_PROTO=Simple (EFA without in-order 128 B)

  // Whether two GPUs of one node talk over NVLink (else PCIe).
  bool nvlink_between(int a, int b) const;
  // NCCL's path type between two GPUs. Without a topology XML a node's PCIe tree is unknown:
  // GPUs without NVLink between them count as PHB (through one CPU).
  PathType path_type(int a, int b) const;

  static Topology from_config(const ClusterConfig& config);

  int nvl_tx(int gpu) const { return link_base_[gpu] + 0; }
  int nvl_rx(int gpu) const { return link_base_[gpu] + 1; }
  int pcie_tx(int gpu) const { return link_base_[gpu] + 2; }
  int pcie_rx(int gpu) const { return link_base_[gpu] + 3; }
  int nic_tx(int nic) const { return nic_link_base_ + 2 * nic; }
  int nic_rx(int nic) const { return nic_link_base_ + 2 * nic + 1; }

 private:
  std::vector<int> link_base_;
  int nic_link_base_ = 0;
};

// NCCL's per-link NVLink bandwidth for a compute capability (major*10+minor).
double nccl_nvlink_bw(int cc);
// An NVLink link's signalling rate per direction, GB/s, the figure link ratings add up.
double nvlink_line_rate(int cc);
// NCCL's PCIe x16 bandwidth for a generation.
double nccl_pcie_bw(int gen);

}  // namespace fakegpu::planner
