// Writes one node of a Topology in NCCL's topology XML format (what NCCL_TOPO_DUMP_FILE
// produces and NCCL_TOPO_FILE reads), so a modeled node can be handed to NCCL or read back.
#pragma once

#include <string>

#include "topology.h"

namespace fakegpu::planner {

// The node's GPUs with their NVLinks (one NVSwitch target, or a mesh spread evenly over the
// peers) and PCIe links, and each NIC on a PCI switch shared with the GPUs of its rail, so
// that reading the file back gives the same fabric, NVLink counts, PCIe bandwidth, NIC line
// rates and rails. PCIe is written as the widest, fastest standard link not above the GPU's
// bandwidth; NVLink counts are the GPU's bandwidth over NCCL's per-link rate, rounded.
std::string topology_xml(const Topology& topo, int node);

}  // namespace fakegpu::planner
