"""Clusters without writing YAML (fgpu --nodes/--gpus-per-node/--gpu, --nproc alone), and fgpu
model's side-by-side comparison and SVG plot."""

import json
import os
import shutil
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

from rank_jobs import CONFIGS, built, fgpu

PRESETS = CONFIGS / "presets"
FAMILIES = {"h100": "dgx-h100", "a100": "dgx-a100", "h200": "hgx-h200", "h20": "h20", "b200": "dgx-b200",
            "gb200": "gb200-nvl72",
            "aws-p5": "aws-p5", "aws-p4de": "aws-p4de", "gcp-a3-mega": "gcp-a3-mega"}


def placements(tmp: Path):
    """{rank: (world size, node)} that each rank of `fgpu --nproc` wrote."""
    out = {}
    for f in tmp.glob("rank.*"):
        rank, world, node = f.read_text().split()
        out[int(rank)] = (int(world), node)
    return out


def fgpu_layout(path):
    """The cluster as the coordinator's parser reads it."""
    import subprocess
    r = subprocess.run([str(built("fakegpu-coordinator")), "--print-layout", "--cluster-config", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def model_json(*args):
    r = fgpu("model", "-b", "8", "-e", "1G", "-f", "32", "--collective", "all", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class ClustersFromFlags(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="fakegpu-clusters-"))
        self.addCleanup(shutil.rmtree, self.tmp)

    def run_ranks(self, *flags):
        """Each rank writes its rank, world size and node; no NCCL needed to see the layout."""
        return fgpu(*flags, "--report", self.tmp / "r.json", "sh", "-c",
                    f'echo "$RANK $WORLD_SIZE $FAKEGPU_NODE" > {self.tmp}/rank.$RANK')

    def test_nproc_alone_fills_servers_of_eight(self):
        r = self.run_ranks("--nproc", "12")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(placements(self.tmp), {g: (12, "0" if g < 8 else "1") for g in range(12)})

    def test_nodes_gpus_per_node_and_gpu(self):
        r = fgpu("--nproc", "4", "--nodes", "2", "--gpus-per-node", "2", "--gpu", "a100", "--report",
                 self.tmp / "r.json", built("nccl_check"), self.tmp / "id", "--tp", "2", "--iters", "2", "--count", "64")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        cluster = json.loads((self.tmp / "r.json").read_text())["cluster"]
        self.assertEqual([(n["id"], n["ranks"], n["gpus"]) for n in cluster["nodes"]],
                         [("node0", [0, 1], ["a100-80gb"] * 2), ("node1", [2, 3], ["a100-80gb"] * 2)])
        self.assertEqual(cluster["nccl_conf"], {})

    def test_the_report_names_the_nccl_settings_the_cluster_gives(self):
        r = self.run_ranks("--nproc", "2", "--gpu", "gcp-a3-mega")
        self.assertEqual(r.returncode, 0, r.stderr)
        cluster = json.loads((self.tmp / "r.json").read_text())["cluster"]
        self.assertEqual(cluster["nccl_conf"], {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0",
                                                "NCCL_MIN_NCHANNELS": "4", "NCCL_BUFFSIZE": "8388608"})

    def test_the_report_names_the_nccl_release_modeled(self):
        r = self.run_ranks("--nproc", "2", "--nccl-version", "2.21.5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads((self.tmp / "r.json").read_text())["cluster"]["nccl_version_modeled"], "2.21.5")
        self.assertIn("Times follow NCCL 2.21.5's rules.", (self.tmp / "r.md").read_text())
        r = self.run_ranks("--nproc", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads((self.tmp / "r.json").read_text())["cluster"]["nccl_version_modeled"], "2.30.7")
        # A cluster's own release, which the job's flag overrides.
        yaml = self.tmp / "c.yaml"
        yaml.write_text((PRESETS / "dgx-h100-1node.yaml").read_text().replace(
            "default_backend: nccl", "default_backend: nccl, nccl_version: 2.23"))
        layout = json.loads(fgpu_layout(yaml))
        self.assertEqual(layout["nccl_version"], "2.23")
        for flags, modeled in ((), "2.23"), (("--nccl-version", "2.27.7"), "2.27.7"):
            r = self.run_ranks("--cluster-config", yaml, "--nproc", "8", *flags)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(json.loads((self.tmp / "r.json").read_text())["cluster"]["nccl_version_modeled"], modeled)
        for f in self.tmp.glob("rank.*"):
            f.unlink()
        r = self.run_ranks("--nproc", "2", "--nccl-version", "2.12")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("FAKEGPU_NCCL_VERSION '2.12': fakegpu models NCCL 2.18 to 2.30", r.stderr)
        self.assertEqual(placements(self.tmp), {}, "the refused job started no rank")

    def test_bad_combinations_are_named(self):
        for flags, message in [
            (["--cluster-config", CONFIGS / "cluster_valid.yaml", "--nodes", "2"], "give one or the other"),
            (["--nproc", "3", "--nodes", "2"], "--nproc 3 does not match --nodes 2 x 8 GPUs"),
            (["--nproc", "4", "--gpu", "tpu"], "--gpu tpu: no preset server for it; use one of a100, b200, gb200, h100"),
            (["--nproc", "4", "--gpus-per-node", "9"], "--gpus-per-node 9: a dgx-h100 node has 8 GPUs"),
            (["--nproc", "4", "--nodes", "0"], "--nodes 0: must be at least 1"),
        ]:
            with self.subTest(flags=flags):
                r = self.run_ranks(*flags)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertEqual(placements(self.tmp), {}, "no rank may start")


class ModelOnClusters(unittest.TestCase):
    def test_a_gpu_and_node_count_model_as_the_preset_of_that_size(self):
        for gpu, family in FAMILIES.items():
            for nodes in (1, 3):
                with self.subTest(gpu=gpu, nodes=nodes):
                    built_one = model_json("--gpu", gpu, "--nodes", str(nodes))
                    preset = model_json("--cluster-config", PRESETS / f"{family}-{nodes}node.yaml")
                    self.assertEqual(built_one, preset)

    def test_fewer_gpus_per_node_keep_each_nic_at_its_rate(self):
        # The GPUs used on a server keep the NICs on their rails at their own rate: 4 GPUs of a
        # DGX H100 have 4 NICs of 400 Gbit/s, not the server's 3200 shared by 4; 3 GPUs of an H20
        # server (a NIC per 2 GPUs) have 2.
        from fakegpu.clusters import cluster_yaml, template
        h100 = cluster_yaml(template("h100"), [4, 4])
        self.assertEqual(h100.count("{bandwidth_gbps: 400, gpus: [0]}, {bandwidth_gbps: 400, gpus: [1]}, "
                                    "{bandwidth_gbps: 400, gpus: [2]}, {bandwidth_gbps: 400, gpus: [3]}]}"), 2, h100)
        h20 = cluster_yaml(template("h20"), [8, 3])
        self.assertIn("ranks: [8, 9, 10], gpus: [{profile: h20}, {profile: h20}, {profile: h20}], nics: "
                      "[{bandwidth_gbps: 400, gpus: [0, 1]}, {bandwidth_gbps: 400, gpus: [2]}]}", h20)
        self.assertNotIn("nics_per_node", h20.split("\nfabric:")[1], "each node lists its NICs")
        # fgpu model's --gpus-per-node on a preset leaves out the same NICs.
        for gpu, family in (("h100", "dgx-h100"), ("h20", "h20")):
            with self.subTest(gpu=gpu):
                reshaped = model_json("--cluster-config", f"{family}-2node", "--gpus-per-node", "3")
                built_one = model_json("--gpu", gpu, "--nodes", "2", "--gpus-per-node", "3")
                self.assertEqual({**reshaped, "cluster": ""}, {**built_one, "cluster": ""})
        for text in (h100, h20):
            path = Path(tempfile.mkstemp(suffix=".yaml")[1])
            self.addCleanup(path.unlink)
            path.write_text(text)
            r = fgpu("validate", path)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_a_clusters_nccl_conf_holds_unless_the_job_sets_its_own(self):
        # The A3 Mega presets carry Google's TCPXO profile (Ring and Tree, Simple only, no NVLS),
        # and so does a cluster fgpu builds from them; a job's own NCCL_PROTO still wins.
        def choices(env=None):
            r = fgpu("model", "--gpu", "gcp-a3-mega", "--nodes", "2", "-b", "1K", "-e", "1G", "-f", "1024", "--json",
                     env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            return {(row["algorithm"], row["protocol"]) for row in json.loads(r.stdout)["results"]}
        self.assertEqual(choices(), {("Tree", "Simple")})
        self.assertIn(("Tree", "LL"), choices({**os.environ, "NCCL_PROTO": "LL,Simple"}))
        dgx = model_json("--gpu", "h100", "--nodes", "2")
        self.assertIn("NVLSTree", {row["algorithm"] for row in dgx["results"]}, "a cluster without nccl_conf: NCCL's own choice")

    def test_nccl_releases_side_by_side(self):
        # 8 x H100 at 1 MiB: NCCL 2.20's tuner rated ring LL at a quarter of the bus bandwidth and
        # ran NVLS; 2.21 and later run ring LL. Each line is that release's own answer.
        r = fgpu("model", "--gpu", "h100", "--nccl-version", "2.20", "--nccl-version", "2.30", "-b", "1M", "-e", "1M",
                 "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = json.loads(r.stdout)
        self.assertEqual([line["label"] for line in lines], ["NCCL 2.20", "NCCL 2.30"])
        self.assertEqual([line["results"][0]["algorithm"] for line in lines], ["NVLS", "Ring"])
        for line, version in zip(lines, ("2.20", "2.30")):
            alone = fgpu("model", "--gpu", "h100", "--nccl-version", version, "-b", "1M", "-e", "1M", "--json")
            self.assertEqual(alone.returncode, 0, alone.stderr)
            self.assertEqual(line["results"], json.loads(alone.stdout)["results"])
        bad = fgpu("model", "--gpu", "h100", "--nccl-version", "2.31")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("--nccl-version '2.31': fakegpu models NCCL 2.18 to 2.30 (the default is 2.30.7)", bad.stderr)

    def test_clusters_side_by_side(self):
        r = fgpu("model", "--cluster-config", "dgx-h100-2node", "--cluster-config", PRESETS / "dgx-a100-2node.yaml",
                 "-b", "1M", "-e", "1G", "-f", "32")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("[1] dgx-h100-2node (16 GPUs)", r.stdout)
        self.assertIn("[2] dgx-a100-2node (16 GPUs)", r.stdout)
        rows = [line.split() for line in r.stdout.splitlines() if line and not line.startswith("#")]
        self.assertEqual([int(row[0]) for row in rows], [1 << 20, 1 << 25, 1 << 30])
        h100, a100 = float(rows[-1][2]), float(rows[-1][5])
        self.assertGreater(h100, a100, "a DGX H100 pair outruns a DGX A100 pair at 1 GiB")
        bad = fgpu("model", "--cluster-config", "dgx-h100-9node")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("no such file, nor a preset of that name (presets: aws-p4de-1node,", bad.stderr)
        self.assertIn("or a family alone: aws-p4de, aws-p5,", bad.stderr)

    def test_a_preset_family_names_its_one_node_preset_wherever_a_cluster_is_named(self):
        family = model_json("--cluster-config", "aws-p5", "--nodes", "2")
        preset = model_json("--cluster-config", "aws-p5-2node")
        self.assertEqual(family["results"], preset["results"])
        self.assertEqual(family["ranks"], 16)
        r = fgpu("--cluster-config", "aws-p5", "--nproc", "8", sys.executable, "-c", "pass")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("aws-p5-1node", r.stdout + r.stderr)
        help_text = fgpu("model", "--help").stdout
        self.assertNotIn("REQUIRED", help_text)

    def test_plot_has_a_line_per_cluster_or_algorithm(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-plot-"))
        self.addCleanup(shutil.rmtree, tmp)
        r = fgpu("model", "--gpu", "h100", "--nodes", "2", "--cluster-config", "dgx-a100-1node", "-b", "8", "-e", "1G",
                 "--plot", tmp / "clusters.svg")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = ET.parse(tmp / "clusters.svg").getroot().findall("{http://www.w3.org/2000/svg}polyline")
        self.assertEqual([line.find("{http://www.w3.org/2000/svg}title").text for line in lines],
                         ["dgx-a100-1node (8 GPUs)", "dgx-h100-2node (16 GPUs)"])
        self.assertEqual(len(lines[0].get("points").split()), 28, "8 B to 1 GiB, doubling")

        r = fgpu("model", "--gpu", "h100", "--nodes", "2", "--each-algo", "-b", "8", "-e", "1G", "-f", "8",
                 "--json", "--plot", tmp / "algos.svg")
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = json.loads(r.stdout)
        labels = [line["label"] for line in doc]
        self.assertIn("Ring", labels)
        self.assertIn("Tree", labels)
        for line in doc:
            self.assertEqual({row["algorithm"] for row in line["results"]}, {line["label"]})
        lines = ET.parse(tmp / "algos.svg").getroot().findall("{http://www.w3.org/2000/svg}polyline")
        self.assertEqual(len(lines), len(labels))
        r = fgpu("model", "--gpu", "h100", "--collective", "all", "--plot", tmp / "x.svg", "--each-algo")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--plot draws one collective", r.stderr)


if __name__ == "__main__":
    unittest.main()
