// Per-node NCCL topology XML: reading it, what the cost model takes from it, writing it back.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include <unistd.h>

#include "cluster_config.h"
#include "comm_model.h"
#include "topo_xml.h"
#include "topo_xml_dump.h"

namespace fakegpu::planner {
namespace {

const std::string kSource = FAKEGPU_SOURCE_DIR;
const std::string kDgxXml = kSource + "/configs/topo/dgx-h100-node.xml";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A directory of this process under the system's temporary directory, removed when it exits.
const std::filesystem::path& temp_dir() {
  static const struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("fakegpu-topo-xml-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  } dir;
  return dir.path;
}

// Writes `text` to a fresh file in temp_dir() and returns its path.
std::string temp_file(const std::string& name, const std::string& text) {
  std::string path = (temp_dir() / name).string();
  std::ofstream(path) << text;
  return path;
}

// The message of the ConfigError `fn` throws; fails the test when it throws nothing.
template <typename Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return "";
}

// One node of `gpus` GPUs of `profile` described by the XML at `xml_path`; `nodes` copies.
ClusterConfig xml_cluster(const std::string& xml_path, int nodes = 1, int gpus = 8, const std::string& profile = "h100") {
  std::string y = "version: 1\ncluster: {name: t}\nnodes:\n";
  int rank = 0;
  for (int n = 0; n < nodes; ++n) {
    y += "  - id: node" + std::to_string(n) + "\n    topology_xml: " + xml_path + "\n    ranks: [";
    for (int g = 0; g < gpus; ++g) y += (g ? ", " : "") + std::to_string(rank++);
    y += "]\n    gpus: [";
    for (int g = 0; g < gpus; ++g) y += (g ? ", " : "") + std::string("{profile: ") + profile + "}";
    y += "]\n";
  }
  y += "fabric:\n  intra_node: {type: nvswitch, bandwidth_gbps: 7200, latency_us: 1}\n";
  if (nodes > 1) y += "  inter_node: {type: infiniband, bandwidth_gbps: 3200, latency_us: 5}\n";
  return parse_cluster_config(y, "cluster.yaml");
}

std::vector<int> all_ranks(int n) {
  std::vector<int> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// A <pci> element; `inner` goes inside it.
std::string pci(const std::string& bus, const std::string& inner, const std::string& speed = "16.0 GT/s PCIe", int width = 16) {
  return "<pci busid=\"" + bus + "\" class=\"0x060400\" link_speed=\"" + speed + "\" link_width=\"" + std::to_string(width) +
         "\">\n" + inner + "</pci>\n";
}
std::string gpu(const std::string& bus, int dev, const std::string& links = "", int sm = 90) {
  return pci(bus, "<gpu dev=\"" + std::to_string(dev) + "\" sm=\"" + std::to_string(sm) + "\">\n" + links + "</gpu>\n");
}
std::string nic(const std::string& bus, const std::string& name, int dev, int mbps = 400000) {
  return pci(bus, "<nic><net name=\"" + name + "\" dev=\"" + std::to_string(dev) + "\" speed=\"" + std::to_string(mbps) +
                      "\"/></nic>\n");
}
std::string nvlink(const std::string& target, int count, const std::string& tclass = "0x030200") {
  return "<nvlink target=\"" + target + "\" count=\"" + std::to_string(count) + "\" tclass=\"" + tclass + "\"/>\n";
}
std::string cpu(int numa, const std::string& inner) {
  return "<cpu numaid=\"" + std::to_string(numa) + "\" arch=\"x86_64\" vendor=\"GenuineIntel\">\n" + inner + "</cpu>\n";
}
std::string system_xml(const std::string& inner) { return "<system version=\"1\">\n" + inner + "</system>\n"; }

TEST(TopoXml, ReadsTheDgxH100Sample) {
  NodeXml x = load_topology_xml(kDgxXml);
  ASSERT_EQ(x.gpus.size(), 8u);
  ASSERT_EQ(x.nics.size(), 8u);
  EXPECT_EQ(x.fabric(), "nvswitch");
  EXPECT_EQ(x.gpus[0].bus_id, "0000:18:00.0");
  EXPECT_EQ(x.gpus[7].bus_id, "0000:db:00.0");
  for (size_t g = 0; g < 8; ++g) {
    EXPECT_EQ(x.gpus[g].dev, static_cast<int>(g));
    EXPECT_EQ(x.gpus[g].sm, 90);
    EXPECT_EQ(x.gpus[g].nvswitch_links, 18) << "5 + 4 + 4 + 5 links to four NVSwitches";
    EXPECT_TRUE(x.gpus[g].peer_links.empty());
    EXPECT_DOUBLE_EQ(x.gpus[g].pcie_gbs, 48.0);  // Gen5 x16
    EXPECT_EQ(x.gpus[g].cpu, g < 4 ? 0 : 1);
    EXPECT_EQ(x.gpus[g].nic, static_cast<int>(g)) << "each GPU's rail is the NIC on its switch";
    EXPECT_EQ(x.nics[g].name, "mlx5_" + std::to_string(g));
    EXPECT_DOUBLE_EQ(x.nics[g].gbytes, 50.0);  // 400000 Mbit/s
    EXPECT_EQ(x.nics[g].gpus, std::vector<int>{static_cast<int>(g)});
  }
  EXPECT_EQ(x.gpu_nic[0][0], PathType::kPix);
  EXPECT_EQ(x.gpu_nic[0][3], PathType::kPhb);
  EXPECT_EQ(x.gpu_nic[0][4], PathType::kSys);
  EXPECT_EQ(x.gpu_gpu[0][5], PathType::kNvl);
  EXPECT_EQ(x.gpu_gpu[3][3], PathType::kLoc);
}

// CPU 0: switch A holds switch B (GPU 0 and NIC 0) and switch C (GPU 1); switch D holds
// GPU 2. CPU 1: switch E holds GPU 3 and NIC 1. No NVLink.
std::string pci_tree_xml() {
  std::string a = pci("0000:10:00.0", pci("0000:11:00.0", gpu("0000:12:00.0", 0) + nic("0000:13:00.0", "mlx5_0", 0)) +
                                          pci("0000:14:00.0", gpu("0000:15:00.0", 1)),
                      "8.0 GT/s PCIe");  // a Gen3 x16 uplink: 12 GB/s
  std::string d = pci("0000:20:00.0", gpu("0000:21:00.0", 2));
  std::string e = pci("0000:80:00.0", gpu("0000:81:00.0", 3) + nic("0000:82:00.0", "mlx5_1", 1));
  return system_xml(cpu(0, a + d) + cpu(1, e));
}

TEST(TopoXml, PathTypesFollowThePciTree) {
  NodeXml x = parse_topology_xml(pci_tree_xml(), "tree.xml");
  ASSERT_EQ(x.gpus.size(), 4u);
  ASSERT_EQ(x.nics.size(), 2u);
  EXPECT_EQ(x.gpu_nic[0][0], PathType::kPix);  // one switch
  EXPECT_EQ(x.gpu_nic[1][0], PathType::kPxb);  // C, A, B
  EXPECT_EQ(x.gpu_nic[2][0], PathType::kPhb);  // through CPU 0
  EXPECT_EQ(x.gpu_nic[3][0], PathType::kSys);  // across CPUs
  EXPECT_EQ(x.gpu_nic[3][1], PathType::kPix);
  EXPECT_EQ(x.gpu_gpu[0][1], PathType::kPxb);
  EXPECT_EQ(x.gpu_gpu[1][0], PathType::kPxb);
  EXPECT_EQ(x.gpu_gpu[0][2], PathType::kPhb);
  EXPECT_EQ(x.gpu_gpu[2][3], PathType::kSys);
  EXPECT_STREQ(path_type_name(x.gpu_gpu[0][1]), "PXB");
  EXPECT_EQ(x.fabric(), "pcie");
  // PCIe: the narrowest link on the way to the CPU.
  EXPECT_DOUBLE_EQ(x.gpus[0].pcie_gbs, 12.0);
  EXPECT_DOUBLE_EQ(x.gpus[2].pcie_gbs, 24.0);
  // Rails: the closest NIC; a GPU without a near one takes the best of the far ones.
  EXPECT_EQ(x.gpus[0].nic, 0);
  EXPECT_EQ(x.gpus[1].nic, 0);
  EXPECT_EQ(x.gpus[2].nic, 0);
  EXPECT_EQ(x.gpus[3].nic, 1);
  EXPECT_EQ(x.nics[0].gpus, (std::vector<int>{0, 1, 2}));
}

TEST(TopoXml, EquallyCloseNicsAreSharedOutAndFasterOnesPreferred) {
  // DGX A100 style: two GPUs and two NICs on one switch use one NIC each.
  std::string shared = pci("0000:10:00.0", gpu("0000:11:00.0", 0) + gpu("0000:12:00.0", 1) + nic("0000:13:00.0", "mlx5_0", 0) +
                                               nic("0000:14:00.0", "mlx5_1", 1));
  NodeXml x = parse_topology_xml(system_xml(cpu(0, shared)), "a100.xml");
  EXPECT_EQ(x.gpus[0].nic, 0);
  EXPECT_EQ(x.gpus[1].nic, 1);
  // Of two NICs on the GPU's switch, the 400G one wins over the 100G one listed first.
  std::string mixed = pci("0000:10:00.0", gpu("0000:11:00.0", 0) + nic("0000:13:00.0", "slow", 0, 100000) +
                                              nic("0000:14:00.0", "fast", 1, 400000));
  NodeXml y = parse_topology_xml(system_xml(cpu(0, mixed)), "mixed.xml");
  EXPECT_EQ(y.nics[y.gpus[0].nic].name, "fast");
}

TEST(TopoXml, FabricFromNvLinkTargets) {
  auto two = [](const std::string& links0, const std::string& links1) {
    return system_xml(cpu(0, gpu("0000:01:00.0", 0, links0) + gpu("0000:02:00.0", 1, links1)));
  };
  NodeXml sw = parse_topology_xml(two(nvlink("0000:05:00.0", 12, "0x068000"), nvlink("0000:05:00.0", 12, "0x068000")), "sw.xml");
  EXPECT_EQ(sw.fabric(), "nvswitch");
  EXPECT_EQ(sw.gpus[1].nvlink_count(), 12);
  EXPECT_EQ(sw.gpu_gpu[0][1], PathType::kNvl);

  NodeXml mesh = parse_topology_xml(two(nvlink("0000:02:00.0", 4), nvlink("0000:01:00.0", 4)), "mesh.xml");
  EXPECT_EQ(mesh.fabric(), "nvlink");
  EXPECT_EQ(mesh.gpus[0].peer_links.at("0000:02:00.0"), 4);
  EXPECT_EQ(mesh.gpus[0].nvswitch_links, 0);
  EXPECT_EQ(mesh.gpu_gpu[1][0], PathType::kNvl);

  NodeXml plain = parse_topology_xml(two("", ""), "pcie.xml");
  EXPECT_EQ(plain.fabric(), "pcie");
  EXPECT_EQ(plain.gpu_gpu[0][1], PathType::kPhb);
}

TEST(TopoXml, ErrorsNameFileLineAndProblem) {
  auto err = [](const std::string& text) { return error_of([&] { parse_topology_xml(text, "bad.xml"); }); };
  std::string e = err("<system version=\"1\">\n<cpu>\n<pci busid=\"0000:01:00.0\" link_speed=\"16.0 GT/s PCIe\" "
                      "link_width=\"16\">\n<gpu dev=\"0\"/>\n</pci></cpu></system>\n");
  EXPECT_NE(e.find("bad.xml:4: gpu: missing attribute 'sm'"), std::string::npos) << e;
  e = err("<system>\n<cpu>\n<pci busid=\"0000:01:00.0\">\n</cpu>\n</system>\n");
  EXPECT_NE(e.find("bad.xml:4: (syntax):"), std::string::npos) << e;
  e = err("\n<topology/>\n");
  EXPECT_NE(e.find("bad.xml:2: (document): the root element is <topology>, expected <system>"), std::string::npos) << e;
  e = err(system_xml(cpu(0, gpu("0000:01:00.0", 0, nvlink("0000:05:00.0", 0, "0x068000")))));
  EXPECT_NE(e.find("bad.xml:5: nvlink: count must be >= 1"), std::string::npos) << e;
  e = err(system_xml(cpu(0, gpu("0000:01:00.0", 0, "<nvlink target=\"0000:05:00.0\" count=\"two\" tclass=\"0x068000\"/>\n"))));
  EXPECT_NE(e.find("bad.xml:5: nvlink: attribute 'count' is not an integer: 'two'"), std::string::npos) << e;
  e = err(system_xml(cpu(0, gpu("0000:01:00.0", 0, nvlink("0000:09:00.0", 2)))));
  EXPECT_NE(e.find("bad.xml:5: nvlink: target '0000:09:00.0' is neither another GPU"), std::string::npos) << e;
  e = err(system_xml(cpu(0, pci("0000:01:00.0", "", "fast"))));
  EXPECT_NE(e.find("bad.xml:3: pci: link_speed 'fast' is not a PCIe rate"), std::string::npos) << e;
  e = err(system_xml(cpu(0, gpu("0000:01:00.0", 0) + gpu("0000:02:00.0", 0))));
  EXPECT_NE(e.find("bad.xml:8: gpu: a second GPU with dev 0"), std::string::npos) << e;
  e = err(system_xml(cpu(0, gpu("0000:01:00.0", 0) + nic("0000:02:00.0", "mlx5_0", 0, 0))));
  EXPECT_NE(e.find("bad.xml:8: net: speed must be > 0"), std::string::npos) << e;
  e = err(system_xml(cpu(0, "<gpu dev=\"0\" sm=\"90\"/>\n")));
  EXPECT_NE(e.find("bad.xml:3: gpu: a <gpu> must sit inside the <pci> element"), std::string::npos) << e;
  e = err(system_xml(cpu(0, "")));
  EXPECT_NE(e.find("bad.xml:1: system: the file describes no <gpu>"), std::string::npos) << e;
  e = error_of([] { load_topology_xml(kSource + "/configs/topo/no-such-node.xml"); });
  EXPECT_NE(e.find("no-such-node.xml: cannot open"), std::string::npos) << e;
}

TEST(TopoXml, ClusterYamlValidatesTheKey) {
  // Relative paths resolve against the YAML file's directory.
  ClusterConfig c = load_cluster_config(kSource + "/configs/topo/dgx-h100-2node-xml.yaml");
  ASSERT_EQ(c.nodes.size(), 2u);
  ASSERT_TRUE(c.nodes[0].topology);
  EXPECT_EQ(c.nodes[0].topology, c.nodes[1].topology) << "one file, parsed once";
  EXPECT_EQ(std::filesystem::path(c.nodes[1].topology_xml).filename(), "dgx-h100-node.xml");

  auto yaml_error = [](const std::string& yaml) { return error_of([&] { parse_cluster_config(yaml, "cluster.yaml"); }); };
  const std::string head = "version: 1\ncluster: {name: t}\nnodes:\n  - id: node0\n    ranks: [0, 1]\n"
                           "    gpus: [{profile: h100}, {profile: h100}]\n";
  const std::string fabric = "fabric:\n  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}\n";
  std::string e = yaml_error(head + "    topology_xml: " + kDgxXml + "\n" + fabric);
  EXPECT_NE(e.find("cluster.yaml:7:19: nodes[0].topology_xml: " + kDgxXml + " describes 8 GPUs but node 'node0' has 2"),
            std::string::npos) << e;
  e = yaml_error(head + "    topology_xml: " + kSource + "/configs/topo/missing.xml\n" + fabric);
  EXPECT_NE(e.find("cluster.yaml:7:19: nodes[0].topology_xml: cannot open"), std::string::npos) << e;
  e = yaml_error(head + "    topology_xml: /dev/zero\n" + fabric);  // would be read forever
  EXPECT_NE(e.find("cluster.yaml:7:19: nodes[0].topology_xml: '/dev/zero' is not a regular file"), std::string::npos) << e;
  e = yaml_error(head + "    topology_xml: [a, b]\n" + fabric);
  EXPECT_NE(e.find("cluster.yaml:7:19: nodes[0].topology_xml: expected a file path"), std::string::npos) << e;

  // The XML's own problems keep their file and line behind the YAML location.
  std::string bad = temp_file("bad-node.xml", "<system>\n<cpu>\n<pci busid=\"0000:01:00.0\" link_speed=\"16.0 GT/s PCIe\" "
                                              "link_width=\"16\">\n<gpu dev=\"0\"/>\n</pci></cpu></system>\n");
  e = yaml_error(head + "    topology_xml: " + bad + "\n" + fabric);
  EXPECT_NE(e.find("cluster.yaml:7:19: nodes[0].topology_xml: " + bad + ":4: gpu: missing attribute 'sm'"), std::string::npos) << e;

  std::string a100_node = head;
  a100_node.replace(a100_node.find("{profile: h100}"), 15, "{profile: a100}");
  std::string two_h100 = temp_file("two-h100.xml", system_xml(cpu(0, gpu("0000:01:00.0", 0) + gpu("0000:02:00.0", 1))));
  e = yaml_error(a100_node + "    topology_xml: " + two_h100 + "\n" + fabric);
  EXPECT_NE(e.find("GPU dev 0 has sm 90 but gpus[0] is a100-80gb (sm 80)"), std::string::npos) << e;
  e = yaml_error(head + "    topology_xml: " + two_h100 + "\n    nics: [{bandwidth_gbps: 400, gpus: [0]}]\n" + fabric);
  EXPECT_NE(e.find("nodes[0].nics: the node's NICs come from its topology_xml"), std::string::npos) << e;
}

// The sample XML describes what the h100 profile and the default one-NIC-per-GPU layout
// describe, so the model must see the same cluster either way.
TEST(TopoXml, XmlClusterModelsLikeTheEquivalentProfileCluster) {
  ClusterConfig with_xml = load_cluster_config(kSource + "/configs/topo/dgx-h100-2node-xml.yaml");
  ClusterConfig with_profiles = load_cluster_config(kSource + "/configs/demo_2node_16gpu.yaml");
  Topology tx = Topology::from_config(with_xml), tp = Topology::from_config(with_profiles);
  ASSERT_EQ(tx.gpus.size(), tp.gpus.size());
  ASSERT_EQ(tx.nics.size(), tp.nics.size());
  for (size_t g = 0; g < tx.gpus.size(); ++g) {
    EXPECT_DOUBLE_EQ(tx.gpus[g].nvlink_gbs, tp.gpus[g].nvlink_gbs);
    EXPECT_DOUBLE_EQ(tx.gpus[g].pcie_gbs, tp.gpus[g].pcie_gbs);
    EXPECT_EQ(tx.gpus[g].nic, tp.gpus[g].nic);
  }
  for (size_t n = 0; n < tx.nics.size(); ++n) EXPECT_DOUBLE_EQ(tx.nics[n].gbytes, tp.nics[n].gbytes);
  for (const auto& groups : {all_ranks(16), all_ranks(8), std::vector<int>{0, 8}}) {
    CommModel mx(tx, groups, {}), mp(tp, groups, {});
    for (int a : {kRing, kTree, kNvls}) {
      EXPECT_EQ(mx.graph(a).channels, mp.graph(a).channels) << a;
      EXPECT_DOUBLE_EQ(mx.graph(a).bw_intra, mp.graph(a).bw_intra) << a;
      EXPECT_DOUBLE_EQ(mx.graph(a).bw_inter, mp.graph(a).bw_inter) << a;
    }
    EXPECT_EQ(mx.channels(), mp.channels());
    EXPECT_EQ(mx.rings(), mp.rings());
  }
  // The XML's rails (NIC g on GPU g's switch) make ring c enter each node at GPU c % 8.
  CommModel all(tx, all_ranks(16), {});
  ASSERT_GE(all.rings().size(), 8u);
  for (size_t c = 0; c < all.rings().size(); ++c) EXPECT_EQ(all.rings()[c][8], 8 + static_cast<int>(c % 8));
}

TEST(TopoXml, XmlOverridesTheProfile) {
  // Fewer NVLinks than the h100 profile's 18: 2 + 4 + 4 + 2 = 12 per GPU.
  std::string text = read_text(kDgxXml);
  for (size_t at; (at = text.find("count=\"5\"")) != std::string::npos;) text.replace(at, 9, "count=\"2\"");
  ClusterConfig thin = xml_cluster(temp_file("thin-nvlink.xml", text));
  ClusterConfig full = xml_cluster(kDgxXml);
  Topology tt = Topology::from_config(thin), tf = Topology::from_config(full);
  EXPECT_DOUBLE_EQ(tt.gpus[0].nvlink_gbs, 12 * 20.6);
  EXPECT_DOUBLE_EQ(tf.gpus[0].nvlink_gbs, 18 * 20.6);
  CommModel mt(tt, all_ranks(8), {}), mf(tf, all_ranks(8), {});
  double thin_bw = mt.graph(kRing).channels * mt.graph(kRing).bw_intra;
  double full_bw = mf.graph(kRing).channels * mf.graph(kRing).bw_intra;
  EXPECT_DOUBLE_EQ(full_bw, 360.0);  // 12 channels x 30 GB/s, as the profile gives
  EXPECT_LT(thin_bw, full_bw);
  EXPECT_LE(thin_bw, 12 * 20.6);

  // A mesh XML makes the node a mesh, a PCIe-only XML a PCIe node, whatever the YAML says.
  std::string mesh_xml, pcie_xml;
  for (int g = 0; g < 2; ++g) {
    std::string bus = "0000:0" + std::to_string(g + 1) + ":00.0", peer = "0000:0" + std::to_string(2 - g) + ":00.0";
    mesh_xml += gpu(bus, g, nvlink(peer, 6));
    pcie_xml += gpu(bus, g);
  }
  Topology mesh = Topology::from_config(xml_cluster(temp_file("mesh.xml", system_xml(cpu(0, mesh_xml))), 1, 2));
  EXPECT_EQ(mesh.nodes[0].fabric, IntraFabric::kNvLinkMesh);
  EXPECT_DOUBLE_EQ(mesh.gpus[1].nvlink_gbs, 6 * 20.6);
  Topology pcie = Topology::from_config(xml_cluster(temp_file("pcie.xml", system_xml(cpu(0, pcie_xml))), 1, 2));
  EXPECT_EQ(pcie.nodes[0].fabric, IntraFabric::kPcie);
  EXPECT_DOUBLE_EQ(pcie.gpus[0].pcie_gbs, 24.0);  // Gen4 x16 in the XML, though the profile is Gen5
  CommModel over_pcie(pcie, all_ranks(2), {});
  EXPECT_EQ(over_pcie.graph(kNvls).channels, 0) << "no NVLS without an NVSwitch";
  EXPECT_LE(over_pcie.graph(kRing).channels * over_pcie.graph(kRing).bw_intra, 24.0 + 1e-9);

  // The XML's NICs replace the default one NIC per GPU: one 200G NIC for both GPUs.
  std::string one_nic = system_xml(cpu(0, pci("0000:10:00.0", pcie_xml + nic("0000:13:00.0", "mlx5_0", 0, 200000))));
  Topology nics = Topology::from_config(xml_cluster(temp_file("one-nic.xml", one_nic), 2, 2));
  ASSERT_EQ(nics.nics.size(), 2u);
  EXPECT_DOUBLE_EQ(nics.nics[0].line_gbytes, 25.0);
  EXPECT_DOUBLE_EQ(nics.nics[0].gbytes, 25.0 * 0.95);
  EXPECT_EQ(nics.nics[1].gpus, (std::vector<int>{2, 3}));
}

// NCCL enables LL128 across nodes only where a GPU reaches its NIC within a PCIe switch tree: two
// nodes of two NVLinked H100s take LL128 for some mid size when the NIC shares the GPUs' switch,
// and never when it hangs off the CPU (PHB), as in a virtual machine's flattened PCI tree.
TEST(TopoXml, LL128AcrossNodesNeedsANicNearAGpu) {
  std::string gpus;
  for (int g = 0; g < 2; ++g) {
    std::string bus = "0000:1" + std::to_string(g + 1) + ":00.0", peer = "0000:1" + std::to_string(2 - g) + ":00.0";
    gpus += gpu(bus, g, nvlink(peer, 6));
  }
  const std::string near = system_xml(cpu(0, pci("0000:10:00.0", gpus + nic("0000:13:00.0", "mlx5_0", 0))));
  const std::string far = system_xml(cpu(0, pci("0000:10:00.0", gpus) + nic("0000:20:00.0", "mlx5_0", 0)));
  Topology tn = Topology::from_config(xml_cluster(temp_file("nic-near.xml", near), 2, 2));
  Topology tf = Topology::from_config(xml_cluster(temp_file("nic-far.xml", far), 2, 2));
  EXPECT_EQ(tn.gpus[0].nic_path, PathType::kPix);
  EXPECT_EQ(tf.gpus[0].nic_path, PathType::kPhb);
  CommModel mn(tn, all_ranks(4), {}), mf(tf, all_ranks(4), {});
  bool near_ll128 = false;
  for (uint64_t bytes = 64 << 10; bytes <= (256ull << 20); bytes *= 2) {
    near_ll128 = near_ll128 || mn.estimate(wire::CollType::kAllReduce, bytes).proto == kLL128;
    EXPECT_NE(mf.estimate(wire::CollType::kAllReduce, bytes).proto, kLL128) << bytes;
  }
  EXPECT_TRUE(near_ll128);
  // NCCL_PROTO naming LL128 enables it anyway, as in NCCL.
  TuningEnv forced;
  forced.set_proto("LL128");
  CommModel told(tf, all_ranks(4), forced);
  EXPECT_EQ(told.estimate(wire::CollType::kAllReduce, 1 << 20).proto, kLL128);
}

// Dumping a node and loading the dump gives the same GPUs, fabric and NICs.
void expect_round_trip(const ClusterConfig& config, const std::string& name) {
  SCOPED_TRACE(name);
  Topology before = Topology::from_config(config);
  ClusterConfig again = config;
  for (size_t n = 0; n < config.nodes.size(); ++n) {
    std::string path = temp_file(name + "-node" + std::to_string(n) + ".xml", topology_xml(before, static_cast<int>(n)));
    again.nodes[n].topology = std::make_shared<const NodeXml>(load_topology_xml(path));
    again.nodes[n].nics.clear();
    const NodeXml& x = *again.nodes[n].topology;
    ASSERT_EQ(x.gpus.size(), config.nodes[n].gpus.size());
    for (size_t l = 0; l < x.gpus.size(); ++l) {
      const Gpu& g = before.gpus[config.nodes[n].ranks[l]];
      bool nvlink = before.nodes[n].fabric != IntraFabric::kPcie;
      EXPECT_EQ(x.gpus[l].nvlink_count(), nvlink ? std::lround(g.nvlink_gbs / nccl_nvlink_bw(g.cc)) : 0);
      EXPECT_DOUBLE_EQ(x.gpus[l].pcie_gbs, g.pcie_gbs);
    }
  }
  Topology after = Topology::from_config(again);
  for (size_t n = 0; n < before.nodes.size(); ++n) EXPECT_EQ(after.nodes[n].fabric, before.nodes[n].fabric);
  for (size_t g = 0; g < before.gpus.size(); ++g) {
    EXPECT_DOUBLE_EQ(after.gpus[g].nvlink_gbs, before.gpus[g].nvlink_gbs) << g;
    EXPECT_DOUBLE_EQ(after.gpus[g].pcie_gbs, before.gpus[g].pcie_gbs) << g;
    EXPECT_EQ(after.gpus[g].nic, before.gpus[g].nic) << g;
  }
  ASSERT_EQ(after.nics.size(), before.nics.size());
  for (size_t n = 0; n < before.nics.size(); ++n) {
    EXPECT_DOUBLE_EQ(after.nics[n].line_gbytes, before.nics[n].line_gbytes);
    EXPECT_EQ(after.nics[n].gpus, before.nics[n].gpus);
  }
}

TEST(TopoXml, TopologyXmlRoundTrips) {
  expect_round_trip(load_cluster_config(kSource + "/configs/topo/dgx-h100-2node-xml.yaml"), "dgx");
  // Profiles only: an A100 NVLink mesh with two GPUs per 200G NIC, and PCIe-only L40S.
  auto yaml = [](const std::string& profile, const std::string& fabric, const std::string& nics) {
    std::string y = "version: 1\ncluster: {name: t}\nnodes:\n";
    for (int n = 0; n < 2; ++n) {
      y += "  - id: node" + std::to_string(n) + "\n    ranks: [";
      for (int g = 0; g < 4; ++g) y += (g ? ", " : "") + std::to_string(4 * n + g);
      y += "]\n    gpus: [";
      for (int g = 0; g < 4; ++g) y += (g ? ", " : "") + std::string("{profile: ") + profile + "}";
      y += "]\n" + nics;
    }
    y += "fabric:\n  intra_node: {type: " + fabric + ", bandwidth_gbps: 7200, latency_us: 1}\n";
    y += "  inter_node: {type: roce, bandwidth_gbps: 800, latency_us: 5}\n";
    return parse_cluster_config(y, "t.yaml");
  };
  expect_round_trip(yaml("a100", "nvlink", "    nics: [{bandwidth_gbps: 200, gpus: [0, 1]}, {bandwidth_gbps: 200, gpus: [2, 3]}]\n"),
                    "a100-mesh");
  expect_round_trip(yaml("l40s", "pcie", ""), "l40s-pcie");
  std::string dump = topology_xml(Topology::from_config(yaml("a100", "nvlink", "")), 1);
  EXPECT_NE(dump.find("<gpu dev=\"0\" sm=\"80\" rank=\"4\""), std::string::npos) << dump;
  EXPECT_NE(dump.find("speed=\"200000\""), std::string::npos) << dump;
}

}  // namespace
}  // namespace fakegpu::planner
