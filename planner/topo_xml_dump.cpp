#include "topo_xml_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace fakegpu::planner {
namespace {

struct PcieLink {
  double gts = 2.5;
  int width = 1;
  double gbs = 15 / 80.0;  // NCCL's credit: width x lane rate (100 Mbit/s units) / 80
};

// The widest, fastest standard link NCCL would credit with no more than `gbs`.
PcieLink pcie_link(double gbs) {
  const std::pair<double, int> lane_rates[] = {{64, 480}, {32, 240}, {16, 120}, {8, 60}, {5, 30}, {2.5, 15}};
  PcieLink best;
  for (int width : {16, 8, 4, 2, 1})
    for (auto [gts, rate] : lane_rates) {
      double bw = width * rate / 80.0;
      if (bw <= gbs + 1e-9 && bw > best.gbs + 1e-9) best = {gts, width, bw};
    }
  return best;
}

std::string link_attrs(const PcieLink& link) {
  char text[64];
  std::snprintf(text, sizeof text, "link_speed=\"%.1f GT/s PCIe\" link_width=\"%d\"", link.gts, link.width);
  return text;
}

// A GPU's rail NIC with the GPUs it serves; GPUs of a node without NICs stand alone.
struct Group {
  int nic = -1;
  std::vector<int> gpus;
};

}  // namespace

std::string topology_xml(const Topology& topo, int node_index) {
  const Node& node = topo.nodes.at(node_index);
  // Switches, NICs and the NVSwitch get bus ids in a range the GPUs' ids (bus l+1) never reach.
  int next_device = 0;
  auto device_bus = [&] {
    char id[32];
    std::snprintf(id, sizeof id, "%04x:%02x:%02x.0", static_cast<unsigned>(node_index), 0x80 + next_device / 32, next_device % 32);
    ++next_device;
    return std::string(id);
  };
  const std::string nvswitch = device_bus();

  std::vector<Group> groups;
  for (int nic : node.nics) groups.push_back({nic, {}});
  for (int g : node.gpus) {
    auto rail = std::find_if(groups.begin(), groups.end(), [&](const Group& x) { return x.nic >= 0 && x.nic == topo.gpus[g].nic; });
    if (rail != groups.end()) rail->gpus.push_back(g);
    else groups.push_back({-1, {g}});
  }

  std::ostringstream out;
  out << "<system version=\"1\">\n";
  out << "  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\">\n";
  for (const Group& group : groups) {
    double widest = group.gpus.empty() ? 48.0 : 0.0;  // a switch with only a NIC: Gen5 x16
    for (int g : group.gpus) widest = std::max(widest, topo.gpus[g].pcie_gbs);
    const PcieLink up = pcie_link(widest);
    out << "    <pci busid=\"" << device_bus() << "\" class=\"0x060400\" vendor=\"0x1000\" device=\"0xc030\" " << link_attrs(up)
        << ">\n";
    for (int g : group.gpus) {
      const Gpu& gpu = topo.gpus[g];
      out << "      <pci busid=\"" << gpu.bus_id << "\" class=\"0x030200\" vendor=\"0x10de\" " << link_attrs(pcie_link(gpu.pcie_gbs))
          << ">\n";
      out << "        <gpu dev=\"" << gpu.local << "\" sm=\"" << gpu.cc << "\" rank=\"" << g << "\" gdr=\"1\">\n";
      int links = node.fabric == IntraFabric::kPcie ? 0 : static_cast<int>(std::lround(gpu.nvlink_gbs / nccl_nvlink_bw(gpu.cc)));
      if (links > 0 && node.fabric == IntraFabric::kNvSwitch) {
        out << "          <nvlink target=\"" << nvswitch << "\" count=\"" << links << "\" tclass=\"0x068000\"/>\n";
      } else if (links > 0 && node.fabric == IntraFabric::kNvLinkBridge) {
        // A bridge joins the GPU to its pair partner only.
        for (int p : node.gpus)
          if (p != g && topo.nvlink_between(p, g))
            out << "          <nvlink target=\"" << topo.gpus[p].bus_id << "\" count=\"" << links << "\" tclass=\"0x030200\"/>\n";
      } else if (links > 0) {
        // A mesh: the links spread evenly over the peers, the first ones taking any remainder.
        int peers = static_cast<int>(node.gpus.size()) - 1, i = 0;
        for (int p : node.gpus) {
          if (p == g) continue;
          int count = links / std::max(peers, 1) + (i++ < links % std::max(peers, 1) ? 1 : 0);
          if (count > 0)
            out << "          <nvlink target=\"" << topo.gpus[p].bus_id << "\" count=\"" << count << "\" tclass=\"0x030200\"/>\n";
        }
      }
      out << "        </gpu>\n      </pci>\n";
    }
    if (group.nic >= 0) {
      const Nic& nic = topo.nics[group.nic];
      out << "      <pci busid=\"" << device_bus() << "\" class=\"0x020700\" vendor=\"0x15b3\" " << link_attrs(up) << ">\n";
      out << "        <nic>\n";
      out << "          <net name=\"mlx5_" << nic.local << "\" dev=\"" << nic.local << "\" speed=\""
          << std::llround(nic.line_gbytes * 8000) << "\" port=\"1\" latency=\"0\" guid=\"0x" << std::hex
          << (node_index << 8 | nic.local) << std::dec << "\" maxconn=\"131072\" gdr=\"1\"/>\n";
      out << "        </nic>\n      </pci>\n";
    }
    out << "    </pci>\n";
  }
  out << "  </cpu>\n</system>\n";
  return out.str();
}

}  // namespace fakegpu::planner
