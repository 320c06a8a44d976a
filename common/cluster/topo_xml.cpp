#include "topo_xml.h"

#include <pugixml.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "cluster_config.h"  // ConfigError, read_config_file

namespace fakegpu {
namespace {

constexpr const char* kNvSwitchClass = "0x068000";  // NVLink target class of an NVSwitch

// Where a GPU or NIC sits: its CPU and the <pci> element that is the device itself (-1 for
// a NIC placed directly under its CPU).
struct Place {
  int cpu = 0;
  int pci = -1;
};

struct Pci {
  int parent = -1;  // enclosing <pci>, -1 under the CPU
  double gbs = 0;   // its link towards the parent, as NCCL credits it
};

// A GPU or NIC as read, before sorting by dev.
struct RawGpu {
  XmlGpu gpu;
  Place place;
};
struct RawNic {
  XmlNic nic;
  Place place;
};

// NCCL's per-lane PCIe rate (units of 100 Mbit/s) for a link speed in GT/s; 0 if unknown.
int pcie_lane_rate(double gts) {
  const std::pair<double, int> rates[] = {{2.5, 15}, {5, 30}, {8, 60}, {16, 120}, {32, 240}, {64, 480}};
  for (auto [speed, rate] : rates)
    if (std::fabs(gts - speed) < 1e-6) return rate;
  return 0;
}

// Walks the document into a NodeXml; every problem becomes a ConfigError with its line.
class Reader {
 public:
  Reader(const std::string& text, std::string source) : text_(text), source_(std::move(source)) {}

  NodeXml read() {
    pugi::xml_document doc;
    pugi::xml_parse_result ok = doc.load_buffer(text_.data(), text_.size());
    if (!ok) fail_at(ok.offset, "(syntax)", ok.description());
    pugi::xml_node system = doc.child("system");
    if (!system) {
      pugi::xml_node first = doc.first_child();
      while (first && first.type() != pugi::node_element) first = first.next_sibling();
      fail_at(first ? first.offset_debug() : 0, "(document)",
              first ? "the root element is <" + std::string(first.name()) + ">, expected <system>" : "no <system> element");
    }
    int cpus = 0;
    for (pugi::xml_node cpu : system.children("cpu")) walk(cpu, cpus++, -1);
    if (gpus_.empty()) fail(system, "the file describes no <gpu>");
    return build();
  }

 private:
  [[noreturn]] void fail_at(std::ptrdiff_t offset, const std::string& element, const std::string& what) const {
    int line = 1 + static_cast<int>(std::count(text_.begin(), text_.begin() + std::clamp<std::ptrdiff_t>(offset, 0, text_.size()), '\n'));
    throw ConfigError(source_ + ":" + std::to_string(line) + ": " + element + ": " + what);
  }
  [[noreturn]] void fail(const pugi::xml_node& at, const std::string& what) const { fail_at(at.offset_debug(), at.name(), what); }

  std::string attr(const pugi::xml_node& at, const char* name) const {
    pugi::xml_attribute a = at.attribute(name);
    if (!a) fail(at, std::string("missing attribute '") + name + "'");
    return a.value();
  }

  // Decimal or 0x-prefixed hexadecimal, the whole value.
  long integer(const pugi::xml_node& at, const char* name) const {
    std::string s = attr(at, name);
    char* end = nullptr;
    long v = std::strtol(s.c_str(), &end, 0);
    if (s.empty() || *end) fail(at, std::string("attribute '") + name + "' is not an integer: '" + s + "'");
    return v;
  }

  double number(const pugi::xml_node& at, const char* name) const {
    std::string s = attr(at, name);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end || !std::isfinite(v)) fail(at, std::string("attribute '") + name + "' is not a number: '" + s + "'");
    return v;
  }

  static std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  }

  // NCCL credits a PCIe link width x lane rate / 80 GB/s; width 0 (unknown) counts as x16.
  double pcie_gbs(const pugi::xml_node& pci) const {
    std::string speed = attr(pci, "link_speed");
    long width = integer(pci, "link_width");
    if (width < 0) fail(pci, "link_width must be >= 0");
    char* end = nullptr;
    double gts = std::strtod(speed.c_str(), &end);
    int rate = std::string(end).rfind(" GT/s", 0) == 0 ? pcie_lane_rate(gts) : 0;
    if (rate == 0) fail(pci, "link_speed '" + speed + "' is not a PCIe rate (2.5, 5.0, 8.0, 16.0, 32.0 or 64.0 GT/s)");
    return (width == 0 ? 16 : width) * rate / 80.0;
  }

  void walk(const pugi::xml_node& parent, int cpu, int parent_pci) {
    for (pugi::xml_node child : parent.children()) {
      std::string name = child.name();
      if (name == "pci") {
        if (attr(child, "busid").empty()) fail(child, "attribute 'busid' is empty");
        pcis_.push_back({parent_pci, pcie_gbs(child)});
        walk(child, cpu, static_cast<int>(pcis_.size()) - 1);
      } else if (name == "gpu") {
        read_gpu(child, cpu, parent_pci);
      } else if (name == "nic") {
        for (pugi::xml_node net : child.children("net")) read_net(net, cpu, parent_pci);
      }
      // Other elements (pcilink, c2c, ...) carry nothing the cost model reads.
    }
  }

  void read_gpu(const pugi::xml_node& at, int cpu, int pci) {
    if (pci < 0) fail(at, "a <gpu> must sit inside the <pci> element of its device");
    RawGpu raw;
    raw.place = {cpu, pci};
    raw.gpu.cpu = cpu;
    raw.gpu.bus_id = lower(at.parent().attribute("busid").value());
    raw.gpu.dev = static_cast<int>(integer(at, "dev"));
    raw.gpu.sm = static_cast<int>(integer(at, "sm"));
    if (raw.gpu.dev < 0) fail(at, "dev must be >= 0");
    if (raw.gpu.sm <= 0) fail(at, "sm must be > 0");
    if (at.attribute("rank")) raw.gpu.rank = static_cast<int>(integer(at, "rank"));
    for (const RawGpu& other : gpus_) {
      if (other.gpu.dev == raw.gpu.dev) fail(at, "a second GPU with dev " + std::to_string(raw.gpu.dev));
      if (other.gpu.bus_id == raw.gpu.bus_id) fail(at, "a second GPU on bus " + raw.gpu.bus_id);
    }
    // The narrowest PCIe link between the GPU and its CPU.
    raw.gpu.pcie_gbs = pcis_[pci].gbs;
    for (int p = pcis_[pci].parent; p >= 0; p = pcis_[p].parent) raw.gpu.pcie_gbs = std::min(raw.gpu.pcie_gbs, pcis_[p].gbs);
    for (pugi::xml_node link : at.children("nvlink")) {
      long count = integer(link, "count");
      if (count < 1) fail(link, "count must be >= 1");
      attr(link, "tclass");  // checked here so a missing one is reported at its own line;
      attr(link, "target");  // targets resolve once all GPUs are known
      nvlinks_.push_back({gpus_.size(), link});
    }
    gpus_.push_back(std::move(raw));
  }

  void read_net(const pugi::xml_node& at, int cpu, int pci) {
    RawNic raw;
    raw.place = {cpu, pci};
    raw.nic.name = attr(at, "name");
    raw.nic.dev = static_cast<int>(integer(at, "dev"));
    double mbps = number(at, "speed");
    if (!(mbps > 0)) fail(at, "speed must be > 0 (Mbit/s)");
    raw.nic.gbytes = mbps / 8000.0;
    for (const RawNic& other : nics_)
      if (other.nic.dev == raw.nic.dev) fail(at, "a second <net> with dev " + std::to_string(raw.nic.dev));
    nics_.push_back(std::move(raw));
  }

  // NCCL's path type between two devices: count the PCI switches on the way through their
  // lowest common one; none in common means through the CPU, different CPUs across them.
  PathType path(const Place& a, const Place& b) const {
    if (a.cpu != b.cpu) return PathType::kSys;
    if (a.pci >= 0 && a.pci == b.pci) return PathType::kPix;
    std::vector<int> up_a, up_b;  // switches above each device, nearest first
    for (int p = a.pci >= 0 ? pcis_[a.pci].parent : -1; p >= 0; p = pcis_[p].parent) up_a.push_back(p);
    for (int p = b.pci >= 0 ? pcis_[b.pci].parent : -1; p >= 0; p = pcis_[p].parent) up_b.push_back(p);
    for (size_t i = 0; i < up_a.size(); ++i) {
      auto j = std::find(up_b.begin(), up_b.end(), up_a[i]);
      if (j != up_b.end()) return i + (j - up_b.begin()) == 0 ? PathType::kPix : PathType::kPxb;
    }
    return PathType::kPhb;
  }

  // The NIC on a GPU's rail: the closest by path type, then the fastest. Several equally close
  // NICs are spread over their GPUs as NCCL does, by the GPU's dev (bit-mirrored when their
  // count is a power of two), so two GPUs sharing a switch with two NICs use one each.
  int rail_nic(const std::vector<PathType>& paths, int dev) const {
    if (paths.empty()) return -1;
    PathType nearest = *std::min_element(paths.begin(), paths.end());
    double fastest = 0;
    for (size_t n = 0; n < paths.size(); ++n)
      if (paths[n] == nearest) fastest = std::max(fastest, nics_[n].nic.gbytes);
    std::vector<int> best;
    for (size_t n = 0; n < paths.size(); ++n)
      if (paths[n] == nearest && nics_[n].nic.gbytes == fastest) best.push_back(static_cast<int>(n));
    unsigned count = best.size(), pick = dev;
    if ((count & (count - 1)) == 0) {
      unsigned mirrored = 0;
      for (unsigned bit = 1, rev = count >> 1; bit < count; bit <<= 1, rev >>= 1)
        if (pick & bit) mirrored |= rev;
      pick = mirrored;
    }
    return best[pick % count];
  }

  NodeXml build() {
    // NVLink targets are resolved once every GPU's bus id is known.
    for (auto& [g, link] : nvlinks_) {
      std::string target = lower(link.attribute("target").value());
      int count = static_cast<int>(link.attribute("count").as_int());
      XmlGpu& gpu = gpus_[g].gpu;
      bool to_gpu = std::any_of(gpus_.begin(), gpus_.end(), [&](const RawGpu& r) { return r.gpu.bus_id == target; });
      if (lower(link.attribute("tclass").value()) == kNvSwitchClass) gpu.nvswitch_links += count;
      else if (to_gpu && target != gpu.bus_id) gpu.peer_links[target] += count;
      else fail(link, "target '" + target + "' is neither another GPU of this file nor an NVSwitch (tclass " + kNvSwitchClass + ")");
    }
    std::sort(gpus_.begin(), gpus_.end(), [](const RawGpu& a, const RawGpu& b) { return a.gpu.dev < b.gpu.dev; });
    std::sort(nics_.begin(), nics_.end(), [](const RawNic& a, const RawNic& b) { return a.nic.dev < b.nic.dev; });

    NodeXml out;
    out.source = source_;
    for (const RawNic& n : nics_) out.nics.push_back(n.nic);
    for (const RawGpu& g : gpus_) out.gpus.push_back(g.gpu);
    const size_t ng = gpus_.size();
    out.gpu_gpu.assign(ng, std::vector<PathType>(ng, PathType::kLoc));
    for (size_t a = 0; a < ng; ++a)
      for (size_t b = 0; b < ng; ++b) {
        if (a == b) continue;
        const XmlGpu &ga = out.gpus[a], &gb = out.gpus[b];
        bool nvlink = ga.peer_links.count(gb.bus_id) || gb.peer_links.count(ga.bus_id) ||
                      (ga.nvswitch_links > 0 && gb.nvswitch_links > 0);
        out.gpu_gpu[a][b] = nvlink ? PathType::kNvl : path(gpus_[a].place, gpus_[b].place);
      }
    out.gpu_nic.assign(ng, std::vector<PathType>(nics_.size()));
    for (size_t g = 0; g < ng; ++g) {
      for (size_t n = 0; n < nics_.size(); ++n) out.gpu_nic[g][n] = path(gpus_[g].place, nics_[n].place);
      out.gpus[g].nic = rail_nic(out.gpu_nic[g], out.gpus[g].dev);
      if (out.gpus[g].nic >= 0) out.nics[out.gpus[g].nic].gpus.push_back(static_cast<int>(g));
    }
    return out;
  }

  const std::string& text_;
  std::string source_;
  std::vector<Pci> pcis_;
  std::vector<RawGpu> gpus_;
  std::vector<RawNic> nics_;
  std::vector<std::pair<size_t, pugi::xml_node>> nvlinks_;  // (index into gpus_, element)
};

}  // namespace

const char* path_type_name(PathType type) {
  switch (type) {
    case PathType::kLoc: return "LOC";
    case PathType::kNvl: return "NVL";
    case PathType::kPix: return "PIX";
    case PathType::kPxb: return "PXB";
    case PathType::kPhb: return "PHB";
    case PathType::kSys: return "SYS";
    case PathType::kNet: return "NET";
  }
  return "?";
}

int XmlGpu::nvlink_count() const {
  int n = nvswitch_links;
  for (const auto& [peer, count] : peer_links) n += count;
  return n;
}

std::string NodeXml::fabric() const {
  bool mesh = false, pairs_only = true;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const XmlGpu& g = gpus[i];
    if (g.nvswitch_links > 0) return "nvswitch";
    mesh = mesh || !g.peer_links.empty();
    // GPUs 2k and 2k+1 joined to each other and nothing else: NVLink bridges.
    size_t partner = i ^ 1;
    pairs_only = pairs_only && g.peer_links.size() <= 1 &&
                 (g.peer_links.empty() || (partner < gpus.size() && g.peer_links.count(gpus[partner].bus_id)));
  }
  // Two GPUs linked to each other are a mesh and a bridged pair alike: call that a mesh.
  return !mesh ? "pcie" : pairs_only && gpus.size() >= 4 ? "nvlink_bridge" : "nvlink";
}

NodeXml parse_topology_xml(const std::string& text, const std::string& source_name) {
  return Reader(text, source_name).read();
}

NodeXml load_topology_xml(const std::string& path) {
  return parse_topology_xml(read_config_file(path, "topology XML file"), path);
}

}  // namespace fakegpu
