"""How fgpu turns --gpu, --nodes, --gpus-per-node and --nproc into a cluster (fakegpu/clusters.py),
from a server described here: no coordinator needed."""

import unittest

from fakegpu import clusters
from fakegpu.paths import SetupError

# Eight GPUs, a NIC per pair of GPUs at 400 Gbit/s, a storage NIC serving none.
SERVER = clusters.NodeTemplate(
    family="test-server", about="# a test server\n", profile="h100", gpus=8,
    nics=[(400, [0, 1]), (400, [2, 3]), (400, [4, 5]), (400, [6, 7]), (100, [])],
    fabric={"intra_node": {"type": "nvlink", "bandwidth_gbps": 3600, "latency_us": 1.0},
            "inter_node": {"type": "ib", "bandwidth_gbps": 400, "latency_us": 5.0, "rails": 4}},
    nccl_conf={"NCCL_NVLS_ENABLE": "0"}, nccl_version="2.27.3")


class PlanNodes(unittest.TestCase):
    def test_shapes(self):
        cases = [((None, None, None), [8]), ((16, None, None), [8, 8]), ((12, None, None), [8, 4]),
                 ((3, None, None), [3]), ((None, 2, 4), [4, 4]), ((8, 2, 4), [4, 4]), ((None, 3, None), [8, 8, 8])]
        for (world, nodes, per_node), shape in cases:
            with self.subTest(world=world, nodes=nodes, per_node=per_node):
                self.assertEqual(clusters.plan_nodes(SERVER, world, nodes, per_node), shape)

    def test_refusals_name_the_flag(self):
        cases = [((0, None, None), "--nproc 0: must be at least 1"), ((None, 0, None), "--nodes 0"),
                 ((None, None, 16), "--gpus-per-node 16: a test-server node has 8 GPUs"),
                 ((10, 2, 4), "--nproc 10 does not match --nodes 2 x 4 GPUs")]
        for args, says in cases:
            with self.subTest(args=args), self.assertRaisesRegex(SetupError, says):
                clusters.plan_nodes(SERVER, *args)


class ClusterYaml(unittest.TestCase):
    def test_nodes_ranks_and_rails(self):
        text = clusters.cluster_yaml(SERVER, [8, 3])
        lines = text.splitlines()
        self.assertEqual(lines[0], "# 11 GPUs on 2 test-server nodes, built by fgpu from its one-node preset:")
        self.assertIn('cluster: {name: "test-server-11gpu", default_backend: nccl, '
                      'nccl_conf: {NCCL_NVLS_ENABLE: "0"}, nccl_version: "2.27.3"}', lines)
        node0 = next(line for line in lines if "id: node0" in line)
        node1 = next(line for line in lines if "id: node1" in line)
        self.assertIn("ranks: [0, 1, 2, 3, 4, 5, 6, 7]", node0)
        self.assertIn("ranks: [8, 9, 10]", node1)
        self.assertEqual(node0.count("{profile: h100}"), 8)
        self.assertEqual(node1.count("{profile: h100}"), 3)
        # A partial node keeps the NICs of the GPUs it uses, serving only those.
        self.assertIn("nics: [{bandwidth_gbps: 400, gpus: [0, 1]}, {bandwidth_gbps: 400, gpus: [2]}]", node1)
        self.assertIn("  inter_node: {type: \"ib\", bandwidth_gbps: 400, latency_us: 5, rails: 4}", lines)

    def test_full_nodes_take_the_preset_name(self):
        self.assertIn('name: "test-server-2node"', clusters.cluster_yaml(SERVER, [8, 8]))

    def test_flow_mapping_scalars(self):
        self.assertEqual(clusters.flow_mapping({"a": True, "b": 0.1, "c": 'x "y"', "d": 3}),
                         '{a: true, b: 0.1, c: "x \\"y\\"", d: 3}')


class Presets(unittest.TestCase):
    def test_a_preset_by_name_or_family(self):
        self.assertEqual(clusters.preset_path("dgx-h100-2node").name, "dgx-h100-2node.yaml")
        self.assertEqual(clusters.preset_path("dgx-h100").name, "dgx-h100-1node.yaml")
        self.assertIsNone(clusters.preset_path("configs/dgx-h100"))
        self.assertIn("dgx-h100", clusters.family_names())

    def test_an_unknown_config_lists_the_presets(self):
        with self.assertRaisesRegex(SetupError, r"no such file, nor a preset of that name \(presets: .*dgx-h100-1node"):
            clusters.cluster_config_path("no-such-cluster")


if __name__ == "__main__":
    unittest.main()
