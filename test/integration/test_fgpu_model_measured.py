"""fgpu model --measured: nccl-tests output read in its formats (old and new columns, launcher
prefixes, NCCL's tuning lines of 2.21 to 2.30), the model set beside each size, the run's shape
reshaping the cluster, and bad input named. The runs here are written by the test from the
model's own times scaled by a known factor, so every expected error is exact."""

import json
import shutil
import tempfile
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

from rank_jobs import fgpu

from fakegpu.nccl_tests_output import parse

MIB = 1 << 20
SLOWER = 1.25  # the written run takes this much longer than the model says


def model_row(collective, size, *flags, cluster="dgx-h100-2node"):
    r = fgpu("model", "--cluster-config", cluster, "--collective", collective, "-b", size, "-e", size, "--json",
             *flags)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["results"][0]


def nccl_tests_log(collective, sizes_and_times, hosts, tuning=(), root_column=True, prefix="", library=None):
    """nccl-tests' output for one run: its header (naming the NCCL library's code, as nccl-tests from
    2.14 does), its ranks, NCCL's tuning lines, its table."""
    lines = ([f"# nccl-tests version 2.17.6 nccl-headers={library} nccl-library={library}"] if library else []) + [
             f"# Collective test starting: {collective}_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    for rank, host in enumerate(hosts):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {4000 + rank:6d} on {host:>10} device {rank % 8:2d} "
                     f"[0000:{rank:02x}:00] NVIDIA H100 80GB HBM3")
    lines += [f"host0:4000:4100 [0] NCCL INFO {t}" for t in tuning]
    lines += ["#", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
                   "algbw   busbw #wrong"]
    for size, us in sizes_and_times:
        algbw = size / us / 1e3
        root = "      -1" if root_column else ""
        lines.append(f"{size:12d} {size // 4:12d}     float     sum{root} {us:8.2f} {algbw:7.2f} {algbw:7.2f}      0 "
                     f"{us * 1.01:8.2f} {algbw:7.2f} {algbw:7.2f}      0")
    return "\n".join(prefix + line for line in lines) + "\n"


class MeasuredRuns(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="fakegpu-measured-"))
        self.addCleanup(shutil.rmtree, self.tmp)

    def write(self, name, text):
        path = self.tmp / name
        path.write_text(text)
        return path

    def measured(self, *args):
        r = fgpu("model", *args, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def test_each_size_beside_the_model(self):
        sizes = [8, 64 * 1024, MIB, 16 * MIB, 256 * MIB]
        times = [(s, round(model_row("all_reduce", s)["time_us"] * SLOWER, 2)) for s in sizes]
        log = self.write("ar.log", nccl_tests_log("all_reduce", times, ["a"] * 8 + ["b"] * 8))
        [run] = self.measured("--cluster-config", "dgx-h100-2node", "--measured", log)
        self.assertEqual((run["collective"], run["ranks"], run["hosts"]), ("all_reduce", 16, 2))
        self.assertEqual(run["cluster"], "dgx-h100-2node (2 x 8 GPUs)")
        self.assertEqual([row["size"] for row in run["rows"]], sizes)
        for row, (size, us) in zip(run["rows"], times):
            self.assertAlmostEqual(row["model_us"], model_row("all_reduce", size)["time_us"], places=6)
            self.assertEqual(row["measured_us"], us)
            self.assertAlmostEqual(row["in_place_us"], round(us * 1.01, 2), places=6)
            self.assertAlmostEqual(row["error"], row["model_us"] / us - 1, places=12)
            self.assertAlmostEqual(row["error"], 1 / SLOWER - 1, delta=1e-3)
        self.assertAlmostEqual(run["median_abs_error"], 1 - 1 / SLOWER, delta=1e-3)
        self.assertEqual(run["nccl_choices_logged"], 0)

        text = fgpu("model", "--cluster-config", "dgx-h100-2node", "--measured", log).stdout
        self.assertIn("all_reduce, 16 ranks on 2 hosts, against dgx-h100-2node (2 x 8 GPUs)", text)
        self.assertIn("median |error| 20.0%", text)
        self.assertIn("NCCL_DEBUG_SUBSYS=TUNING", text, "it says how to see NCCL's choices")

    def test_nccl_choice_from_its_tuning_lines(self):
        mine = model_row("all_reduce", MIB)
        other = ("RING", "SIMPLE") if (mine["algorithm"], mine["protocol"]) != ("Ring", "Simple") else ("TREE", "LL")
        forced = model_row("all_reduce", MIB, "--algo", other[0], "--proto", other[1])
        big = model_row("all_reduce", 256 * MIB)
        nccl_name = {"Tree": "TREE", "Ring": "RING", "NVLS": "NVLS", "NVLSTree": "NVLS_TREE"}[big["algorithm"]]
        tuning = [f"AllReduce: {MIB} Bytes -> Algo {other[0]} proto {other[1]} channel{{Lo..Hi}}={{0..15}}",
                  f"AllReduce: {256 * MIB} Bytes -> Algo {nccl_name} proto {big['protocol'].upper()} "
                  f"channel{{Lo..Hi}}={{0..15}}"]
        times = [(MIB, 100.0), (256 * MIB, 1500.0), (4 * MIB, 150.0)]
        log = self.write("tuning.log", nccl_tests_log("all_reduce", times, ["a"] * 8 + ["b"] * 8, tuning))
        [run] = self.measured("--cluster-config", "dgx-h100-2node", "--measured", log)
        one, large, unlogged = run["rows"]
        self.assertEqual((one["nccl_algorithm"], one["nccl_protocol"]), (forced["algorithm"], forced["protocol"]))
        self.assertAlmostEqual(one["model_us_nccl_choice"], forced["time_us"], places=6)
        self.assertAlmostEqual(one["error_nccl_choice"], forced["time_us"] / 100.0 - 1, places=12)
        self.assertAlmostEqual(large["model_us_nccl_choice"], large["model_us"], places=9)
        self.assertNotIn("nccl_algorithm", unlogged)
        self.assertEqual((run["nccl_choices_logged"], run["model_chose_as_nccl"]), (2, 1))
        text = fgpu("model", "--cluster-config", "dgx-h100-2node", "--measured", log).stdout
        self.assertIn("NCCL's choice logged at 2, the model's the same at 1", text)

    def test_older_formats_and_launcher_prefixes(self):
        # nccl-tests before 2.13 (no root column) under srun, NCCL 2.30's tuning line for a gather, which
        # counts its bytes per rank, and 2.23's, numbered, which count the whole buffer; then NCCL
        # 2.21's, which name no collective.
        text = nccl_tests_log("all_gather", [(16 * MIB, 120.5), (32 * MIB, 200.0)], ["n1"] * 4 + ["n2"] * 4,
                              [f"AllGather: {2 * MIB} Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..15}}",
                               f"AllGather: {32 * MIB} Bytes -> Algo 6 proto 2 time 190.1"], root_column=False,
                              prefix="0: ")
        text += nccl_tests_log("all_reduce", [(MIB, 80.0)], ["n1"] * 4 + ["n2"] * 4,
                               [f"{MIB} Bytes -> Algo 0 proto 1 time 71.2"]).replace(
            "# Collective test starting: all_reduce_perf\n", "mpirun -np 8 ./build/all_reduce_perf -b 8 -e 1G\n")
        first, second = parse(text)
        self.assertEqual((first.collective, first.ranks_per_host()), ("all_gather", {"n1": 4, "n2": 4}))
        self.assertEqual([(r.size, r.root, r.out_of_place_us) for r in first.rows],
                         [(16 * MIB, -1, 120.5), (32 * MIB, -1, 200.0)])
        self.assertEqual(first.nccl_choice(16 * MIB), ("Ring", "Simple"))
        self.assertEqual(first.nccl_choice(32 * MIB), ("PAT", "Simple"))
        # Without its ranks a gather's per-rank line cannot be placed: 2 MiB per rank is not 2 MiB.
        [bare] = parse(nccl_tests_log("all_gather", [(2 * MIB, 50.0)], [],
                                      [f"AllGather: {2 * MIB} Bytes -> Algo RING proto LL channel{{Lo..Hi}}={{0..1}}"]))
        self.assertIsNone(bare.nccl_choice(2 * MIB))
        self.assertEqual(second.collective, "all_reduce")
        self.assertEqual(second.nccl_choice(MIB), ("Tree", "LL128"))
        self.assertIsNone(second.nccl_choice(2 * MIB))

    def test_the_runs_shape_reshapes_the_cluster(self):
        log = self.write("pair.log", nccl_tests_log("reduce_scatter", [(64 * MIB, 900.0)], ["x"] * 4 + ["y"] * 4))
        [run] = self.measured("--cluster-config", "dgx-h100-1node", "--measured", log)
        self.assertEqual(run["cluster"], "dgx-h100-1node (2 x 4 GPUs)")
        expected = model_row("reduce_scatter", 64 * MIB, "--nodes", "2", "--gpus-per-node", "4",
                             cluster="dgx-h100-1node")
        self.assertAlmostEqual(run["rows"][0]["model_us"], expected["time_us"], places=6)
        # The flags win over the run's shape; --gpu builds its servers to the run's shape.
        [flagged] = self.measured("--cluster-config", "dgx-h100-1node", "--nodes", "1", "--gpus-per-node", "8",
                                  "--measured", log)
        self.assertEqual(flagged["cluster"], "dgx-h100-1node (1 x 8 GPUs)")
        [built] = self.measured("--gpu", "a100", "--measured", log)
        self.assertEqual(built["cluster"].split(" (")[1], "2 x 4 GPUs)")

    def test_bad_input_is_named(self):
        good = self.write("good.log", nccl_tests_log("all_reduce", [(MIB, 80.0)], ["a"] * 8))
        cases = [
            (("--measured", self.tmp / "missing.log"), "missing.log: No such file"),
            (("--measured", self.write("empty.log", "# nothing ran\n")), "empty.log: no nccl-tests result rows"),
            (("--measured", self.write("bare.log", f"{MIB} {MIB // 4} float sum -1 80.0 13.1 24.6 0\n")),
             "bare.log: the output names no test (such as all_reduce_perf); give --collective"),
            (("--measured", self.write("uneven.log", nccl_tests_log("all_reduce", [(MIB, 80.0)], ["a"] * 6 + ["b"] * 2))),
             "uneven.log: its ranks sit unevenly on its hosts (a: 6, b: 2)"),
            (("--measured", self.write("hc.log", nccl_tests_log("hypercube", [(MIB, 80.0)], ["a"] * 8))),
             "hypercube_perf has no counterpart in the model"),
            (("--measured", good, "-b", "8"), "-b does not apply"),
            (("--measured", good, "--cluster-config", "dgx-a100-1node"), "give one --cluster-config or --gpu"),
            (("--measured", good, "--nodes", "1", "--gpus-per-node", "9"),
             "good.log: --gpus-per-node 9: node 'node0' of"),
        ]
        for args, message in cases:
            r = fgpu("model", "--cluster-config", "dgx-h100-1node", *args)
            self.assertEqual(r.returncode, 2, (args, r.stdout))
            self.assertIn(message, r.stderr, args)
        r = fgpu("model", "--collective", "AllReduce", "--measured", self.tmp / "bare.log", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)[0]["collective"], "all_reduce")
        r = fgpu("model", "--collective", "allgatherv", "--measured", self.tmp / "bare.log")
        self.assertEqual(r.returncode, 2)
        self.assertIn("bare.log: unknown --collective 'allgatherv'", r.stderr)

    def test_the_model_follows_the_nccl_the_run_names(self):
        """The run's NCCL release picks the model's rules (a release before the oldest modeled, its
        nearest), unless --nccl-version says otherwise."""
        for library, modeled in (("22005", "2.20.5"), ("21602", "2.18"), (None, "2.30.7")):
            log = self.write(f"v{library}.log", nccl_tests_log("all_reduce", [(MIB, 40.0)], ["a"] * 8, library=library))
            [run] = self.measured("--cluster-config", "dgx-h100-1node", "--measured", log)
            self.assertEqual(run["nccl_version_modeled"], modeled, library)
            expected = model_row("all_reduce", MIB, "--nccl-version", modeled, cluster="dgx-h100-1node")
            self.assertAlmostEqual(run["rows"][0]["model_us"], expected["time_us"], places=6)
            self.assertEqual(run["rows"][0]["algorithm"], expected["algorithm"])
        self.assertEqual(run["run_nccl_version"], None)
        old = self.tmp / "v22005.log"
        [run] = self.measured("--cluster-config", "dgx-h100-1node", "--measured", old)
        self.assertEqual(run["run_nccl_version"], "2.20.5")
        # 8 x H100 at 1 MiB: NCCL 2.20's tuner ran NVLS, 2.21's and later ring LL.
        self.assertEqual(run["rows"][0]["algorithm"], "NVLS")
        [forced] = self.measured("--cluster-config", "dgx-h100-1node", "--measured", old, "--nccl-version", "2.30")
        self.assertEqual((forced["nccl_version_modeled"], forced["rows"][0]["algorithm"]), ("2.30", "Ring"))
        text = fgpu("model", "--cluster-config", "dgx-h100-1node", "--measured", old).stdout
        self.assertIn("with NCCL 2.20.5's rules (the run's NCCL 2.20.5)", text)
        r = fgpu("model", "--cluster-config", "dgx-h100-1node", "--measured", old, "--nccl-version", "2.20",
                 "--nccl-version", "2.30")
        self.assertEqual(r.returncode, 2)
        self.assertIn("give --nccl-version once", r.stderr)

    def test_plot_draws_the_run_and_the_model(self):
        times = [(s, 10.0 + s / 100e3) for s in (MIB, 16 * MIB, 256 * MIB)]
        log = self.write("plot.log", nccl_tests_log("all_gather", times, ["a"] * 8))
        r = fgpu("model", "--cluster-config", "dgx-h100-1node", "--measured", log, "--plot", self.tmp / "m.svg")
        self.assertEqual(r.returncode, 0, r.stderr)
        svg = "{http://www.w3.org/2000/svg}"
        lines = ET.parse(self.tmp / "m.svg").getroot().findall(f"{svg}polyline")
        self.assertEqual([line.find(f"{svg}title").text for line in lines], ["measured", "model"])
        self.assertEqual(len(lines[0].get("points").split()), 3)


if __name__ == "__main__":
    unittest.main()
