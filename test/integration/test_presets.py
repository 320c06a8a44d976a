"""The bundled cluster presets: each loads, has the shape its name says, and models sanely."""

import json
import re
import subprocess
import unittest

from rank_jobs import REPO, built

PRESETS = REPO / "configs" / "presets"
FGPU = str(REPO / "fgpu")

# Public spec figures, independent of the cost model: GPUs per node, NVLink GB/s each way per
# GPU, and the line rate of a node's NICs together in GB/s.
FAMILIES = {
    "dgx-a100": (8, 300, 8 * 25),
    "dgx-h100": (8, 450, 8 * 50),
    "hgx-h200": (8, 450, 8 * 50),
    "h20": (8, 450, 4 * 50),
    "dgx-b200": (8, 900, 8 * 50),
    "gb200-nvl72": (72, 900, 72 * 50),
    "aws-p5": (8, 450, 32 * 12.5),
    "aws-p4de": (8, 300, 4 * 12.5),
    "gcp-a3-mega": (8, 450, 8 * 25),
}
NODE_COUNTS = (1, 2, 3, 4)


def run(*args):
    return subprocess.run([*map(str, args)], capture_output=True, text=True, timeout=120)


def model(path, *extra):
    r = run(built("fakegpu-model"), "--cluster-config", path, "--collective", "all_reduce",
            "-b", "1M", "-e", "1G", "-f", 32, "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def presets():
    for family, shape in FAMILIES.items():
        for nodes in NODE_COUNTS:
            yield PRESETS / f"{family}-{nodes}node.yaml", nodes, shape


class Presets(unittest.TestCase):
    def test_one_file_per_family_and_node_count(self):
        expected = {p.name for p, _, _ in presets()}
        self.assertEqual({p.name for p in PRESETS.glob("*.yaml")}, expected)

    def test_validate_and_shape_match_the_name(self):
        for path, nodes, (per_node, _, _) in presets():
            with self.subTest(preset=path.name):
                r = run(FGPU, "validate", path)
                self.assertEqual(r.returncode, 0, r.stderr)
                m = re.search(r"cluster '([^']+)', (\d+) nodes?, world size (\d+)", r.stdout)
                self.assertIsNotNone(m, r.stdout)
                self.assertEqual(m.group(1), path.stem)
                self.assertEqual((int(m.group(2)), int(m.group(3))), (nodes, nodes * per_node))

    def test_all_reduce_bus_bandwidth_is_physical(self):
        for path, nodes, (per_node, nvlink, node_nics) in presets():
            with self.subTest(preset=path.name):
                doc = model(path)
                self.assertEqual((doc["nodes"], doc["ranks"]), (nodes, nodes * per_node))
                busbw = [row["busbw_gbs"] for row in doc["results"]]
                self.assertEqual([row["size"] for row in doc["results"]], [1 << 20, 1 << 25, 1 << 30])
                self.assertGreater(busbw[0], 0)
                self.assertEqual(busbw, sorted(set(busbw)), "busbw must grow with size")
                # Whatever the algorithm, a GPU sends (n-1)/n of its buffer and receives (n-1)/n
                # of the result even when the switch reduces; across nodes, each node sends and
                # receives 2(N-1)/N of it through its NICs, as no preset's network reduces.
                # Either way busbw (2(n-1)/n of the buffer per unit time) stays under 2 x the link.
                self.assertLess(busbw[-1], 2 * (nvlink if nodes == 1 else node_nics))

                # A ring reduces nothing in flight: each rank sends 2(n-1)/n of the buffer on its
                # one link, and each channel's ring leaves every node at least once.
                ring = model(path, "--algo", "ring")["results"]
                self.assertEqual({row["algorithm"] for row in ring}, {"Ring"})
                self.assertLess(max(row["busbw_gbs"] for row in ring), nvlink if nodes == 1 else node_nics)


if __name__ == "__main__":
    unittest.main()
