"""GPU profiles from measured operator timings (fakegpu/rate_fit.py, `fgpu calibrate --fit`): each
rate is read off the figures it governs, the file written is one the C++ parser reads back with
those rates, and `fgpu --gpu FILE` builds a cluster of its base GPU's servers with it.

    test_rate_fit.py           the parts that need no PyTorch
    test_rate_fit.py --fit     a whole fit under fgpu (skips, exit 77, without build/torch-venv)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from rank_jobs import REPO, built, fgpu

sys.path.insert(0, str(REPO))
from fakegpu import kernel_table, rate_fit  # noqa: E402
from fakegpu.clusters import gpu_profile, write_cluster_config  # noqa: E402

H100_TABLE = REPO / "verification" / "kernels" / "h100-sxm.jsonl"
PYTHON = REPO / "build" / "torch-venv" / "bin" / "python"


def row(line, metric, modeled):
    return kernel_table.Row(line, metric, modeled, kernel_table.error(modeled, line[metric]))


def elementwise(measured_us, op="add"):
    return {"case": "elementwise", "op": op, "dtype": "fp32", "shape": [1 << 26], "fwd_us": measured_us}


class Refit(unittest.TestCase):
    def setUp(self):
        self.family = gpu_profile("h200")["kernel_rates"]

    def test_a_rate_moves_by_the_median_of_its_lines_and_only_it(self):
        # Modeled 20% fast on two of three elementwise lines: the share drops to 0.8 of itself.
        rows = [row(elementwise(100), "fwd_us", 80), row(elementwise(200), "fwd_us", 160),
                row(elementwise(300), "fwd_us", 330)]
        rates, host_speed, used = rate_fit.refit(self.family, self.family, 1.0, rows)
        self.assertAlmostEqual(rates["memory_share"], round(self.family["memory_share"] * 0.8, 4))
        self.assertEqual(used, {"memory_share": 3})
        self.assertEqual({k for k in rates if rates[k] != self.family[k]}, {"memory_share"})
        self.assertEqual(host_speed, 1.0)

    def test_a_stem_of_three_channels_moves_the_gather_rate_not_the_tiles(self):
        stem = {"case": "conv", "op": "conv2d", "dtype": "bf16", "shape": [64, 3, 224, 224, 64, 7, 2], "layout": "nhwc",
                "fwd_us": 500}
        wide = dict(stem, shape=[64, 64, 56, 56, 64, 3, 1], fwd_us=100)
        rates, _, used = rate_fit.refit(self.family, self.family, 1.0,
                                        [row(stem, "fwd_us", 400), row(wide, "fwd_us", 100)])
        self.assertEqual(used, {"conv_gather_per_us": 1, "conv_tile_share": 1})
        self.assertAlmostEqual(rates["conv_gather_per_us"], round(self.family["conv_gather_per_us"] * 0.8, 4))
        self.assertEqual(rates["conv_tile_share"], self.family["conv_tile_share"])

    def test_figures_too_short_to_be_the_kernels_set_no_rate(self):
        rows = [row(elementwise(rate_fit.GPU_BOUND_US["fwd_us"] / 2), "fwd_us", 10.0)]
        rates, host_speed, used = rate_fit.refit(self.family, self.family, 1.0, rows)
        self.assertEqual(used, {})
        self.assertEqual(rates, self.family)
        self.assertEqual(host_speed, 1.0)

    def test_a_change_that_took_its_own_figures_further_off_is_undone(self):
        old = (self.family, 1.0)
        new = (dict(self.family, memory_share=0.5, row_memory_share=0.7), 1.0)
        norm = {"case": "norm", "op": "softmax", "dtype": "bf16", "shape": [4096, 4096], "fwd_us": 100}
        before = [row(elementwise(100), "fwd_us", 80), row(norm, "fwd_us", 70)]
        after = [row(elementwise(100), "fwd_us", 98), row(norm, "fwd_us", 140)]
        (rates, host_speed), undone = rate_fit.keep_what_helped(old, new, before, after)
        self.assertEqual(undone, ["row_memory_share"])
        # A change that moved its own figures closer but its class's further is undone too.
        conv = {"case": "conv", "op": "conv2d", "dtype": "bf16", "shape": [64, 64, 56, 56, 64, 3, 1], "layout": "nhwc"}
        new = (dict(self.family, conv_tile_share=0.2), 1.0)
        before = [row(dict(conv, fwd_us=100), "fwd_us", 80), row(dict(conv, fwd_us=60), "fwd_us", 59)]
        after = [row(dict(conv, fwd_us=100), "fwd_us", 99), row(dict(conv, fwd_us=60), "fwd_us", 120)]
        self.assertEqual(rate_fit.keep_what_helped(old, new, before, after)[1], ["conv_tile_share"])
        self.assertEqual(rates["memory_share"], 0.5)
        self.assertEqual(rates["row_memory_share"], self.family["row_memory_share"])

    def test_shares_stay_within_the_peak_and_a_factor_of_the_family(self):
        fast = [row(elementwise(100), "fwd_us", 1000)]  # modeled ten times too slow
        self.assertEqual(rate_fit.refit(self.family, self.family, 1.0, fast)[0]["memory_share"], 1.0)
        slow = [row(elementwise(1000), "fwd_us", 10)]
        self.assertAlmostEqual(rate_fit.refit(self.family, self.family, 1.0, slow)[0]["memory_share"],
                               round(self.family["memory_share"] / rate_fit.RANGE, 4))

    def test_the_host_speed_comes_from_the_host_lines(self):
        host = {"case": "host", "op": "add_tiny", "host_us": 10.0}
        _, host_speed, _ = rate_fit.refit(self.family, self.family, 1.0, [row(host, "host_us", 12.5)])
        self.assertAlmostEqual(host_speed, 1.25)


class ProfileFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="fakegpu-rate-fit-"))
        self.addCleanup(shutil.rmtree, self.tmp)

    def write(self, rates, host_speed=1.4):
        base = gpu_profile("h200")
        device = {"case": "device", "name": "NVIDIA H200", "sms": 132, "mem_gib": 139.8, "torch": "2.11", "cuda": "13.0"}
        path = self.tmp / "h200-box.gpu.yaml"
        path.write_text(rate_fit.profile_text("h200-box", base, device, rates, host_speed, "kernels-h200.jsonl",
                                              {"memory_share": 12}))
        return path

    def test_the_parser_reads_back_what_was_written(self):
        rates = dict(gpu_profile("h200")["kernel_rates"], memory_share=0.77, attention_share_d128=0.55)
        read = gpu_profile(str(self.write(rates)))
        self.assertEqual(read["name"], "h200-box")
        self.assertEqual(read["base"], "h200")
        self.assertTrue(read["measured_rates"])
        self.assertEqual(read["kernel_rates"], rates)
        self.assertEqual(read["host_speed"], 1.4)
        self.assertEqual(read["sm_count"], 132)

    def test_the_measured_gpu_names_its_base(self):
        self.assertEqual(rate_fit.find_base("NVIDIA H200")["name"], "h200")
        self.assertEqual(rate_fit.find_base("NVIDIA H100 80GB HBM3")["name"], "h100-sxm")
        self.assertEqual(rate_fit.find_base("NVIDIA H100 PCIe")["name"], "h100-pcie")
        # An A100 by its memory, the product name first: 40 GB ones are slower.
        self.assertEqual(rate_fit.find_base("NVIDIA A100-SXM4-40GB")["name"], "a100-40gb")
        self.assertEqual(rate_fit.find_base("NVIDIA A100-PCIE-40GB")["name"], "a100-40gb")
        self.assertEqual(rate_fit.find_base("NVIDIA A100 80GB PCIe")["name"], "a100-80gb")
        self.assertEqual(rate_fit.find_base("Tesla V100-SXM2-32GB")["name"], "v100")
        with self.assertRaisesRegex(Exception, "no built-in GPU profile for 'Quadro X9': give --base"):
            rate_fit.find_base("Quadro X9")

    def test_fgpu_builds_the_base_gpus_servers_of_the_file(self):
        path = self.write(gpu_profile("h200")["kernel_rates"])
        config = write_cluster_config(str(path), None, 2, None, directory=self.tmp)
        text = Path(config).read_text()
        self.assertEqual(text.count("{profile: " + json.dumps(str(path.resolve())) + "}"), 16)  # two hgx-h200 servers
        layout = subprocess.run([str(built("fakegpu-coordinator")), "--print-layout", "--cluster-config", config],
                                capture_output=True, text=True)
        self.assertEqual(layout.returncode, 0, layout.stderr)
        self.assertEqual(json.loads(layout.stdout)["world_size"], 16)
        r = fgpu("--gpu", str(path), "--nproc", "2", sys.executable, "-c", "pass")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("hgx-h200-2gpu", r.stdout + r.stderr)

    def test_the_runtime_takes_the_file_without_a_cluster_yaml(self):
        path = self.write(gpu_profile("h200")["kernel_rates"])
        text = path.read_text().replace("sm_count: 132", "sm_count: 120")
        path.write_text(text)
        probe = (f"import ctypes, os\ncudart = ctypes.CDLL({str(built('libcudart.so.13'))!r}, mode=os.RTLD_GLOBAL)\n"
                 "v = ctypes.c_int()\nfree, total = ctypes.c_size_t(), ctypes.c_size_t()\n"
                 "assert cudart.cudaDeviceGetAttribute(ctypes.byref(v), 16, 0) == 0\n"  # multiprocessor count
                 "assert cudart.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0\n"
                 "print(v.value, round(total.value / 2**30, 1))\n")
        env = {k: v for k, v in os.environ.items() if k != "FAKEGPU_CLUSTER_CONFIG"}
        r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                           env=dict(env, FAKEGPU_GPU_PROFILE=str(path)))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.split(), ["120", "139.8"])

    def test_a_bad_file_is_named_with_its_fault(self):
        path = self.tmp / "broken.gpu.yaml"
        path.write_text("version: 1\nname: box\nbase: h200\nmemory_gib: 80\nsm_count: 132\n"
                        "compute_capability: '9.0'\nkernel_rates: {memory_shar: 0.8}\n")
        r = fgpu("--gpu", str(path), "--nproc", "1", sys.executable, "-c", "pass")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("broken.gpu.yaml:7:16: kernel_rates.memory_shar: unknown key", r.stderr)
        self.assertIn("did you mean 'memory_share'", r.stderr)
        r = fgpu("--gpu", str(self.tmp / "absent.gpu.yaml"), "--nproc", "1", sys.executable, "-c", "pass")
        self.assertIn("no such GPU profile file", r.stderr)


class WholeFit(unittest.TestCase):
    """`fgpu calibrate --fit` on a few lines of the H100 table made 1.5 times slower: the rates they
    govern come out 1.5 times lower, and the model then meets the slowed figures."""

    def test_a_slower_gpu_gets_lower_rates(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-rate-fit-"))
        self.addCleanup(shutil.rmtree, tmp)
        keep = [line for _, line in kernel_table.read_table(H100_TABLE)
                if line["case"] == "device"
                or (line["case"] == "elementwise" and line["shape"][0] in (1 << 26, 1 << 28) and line["op"] == "add")]
        for line in keep:
            if "fwd_us" in line:
                line["fwd_us"] *= 1.5
        table = tmp / "slow-h100.jsonl"
        table.write_text("".join(json.dumps(line) + "\n" for line in keep))
        profile = tmp / "slow.gpu.yaml"
        r = subprocess.run([str(REPO / "fgpu"), "calibrate", "--fit", str(table), "--profile", str(profile),
                            "--python", str(PYTHON)], capture_output=True, text=True, timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        fitted = gpu_profile(str(profile))
        family = gpu_profile("h100")["kernel_rates"]
        self.assertEqual(fitted["base"], "h100-sxm")
        self.assertAlmostEqual(fitted["kernel_rates"]["memory_share"] / family["memory_share"], 1 / 1.5, delta=0.05)
        self.assertEqual(fitted["kernel_rates"]["gemm_tile_share"], family["gemm_tile_share"])
        after = [line for line in r.stdout.splitlines() if line.startswith("elementwise/fwd")]
        self.assertEqual(len(after), 1, r.stdout)
        self.assertLess(float(after[0].split()[-1].rstrip("%")), 5.0, r.stdout)


if __name__ == "__main__":
    if "--fit" in sys.argv:
        sys.argv.remove("--fit")
        if not PYTHON.exists():
            print(f"skipped: needs PyTorch's CUDA build in {PYTHON.parents[1]} (./scripts/setup-torch installs it)")
            sys.exit(77)
        unittest.main(defaultTest="WholeFit")
    unittest.main(defaultTest=["Refit", "ProfileFiles"])
