"""fgpu's hybrid mode, driven on a machine without a GPU. A stand-in driver library reports one
GPU, and fakegpu's runtime, which the rank program finds through its own run path, stands in for
NVIDIA's: one device (FAKEGPU_DEVICE_COUNT=1) whose memory the host is treated as unable to touch
(FAKEGPU_FORCE_STAGING=1). The check on a real GPU is test/run_hybrid_multinode.sh."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from rank_jobs import TWO_BY_TWO, Coordinator, built, fgpu, single_node_config

def with_one_gpu(**extra):
    """fgpu's environment on a machine whose driver reports one GPU."""
    kept = ("FAKEGPU_BUILD_DIR", "FAKEGPU_SANITIZER_PRELOAD")  # which build the suite tests
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKEGPU_") or k in kept}
    driver_dir = str(built("nccl_check").parent / "standin-driver")
    env["LD_LIBRARY_PATH"] = driver_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env.update(extra)
    return env


class HybridMode(unittest.TestCase):
    def setUp(self):
        self.tmp = Path(tempfile.mkdtemp(prefix="fakegpu-hybrid-"))

    def test_ranks_share_the_gpu_and_communicate_through_the_simulator(self):
        config = self.tmp / "c.yaml"
        config.write_text(TWO_BY_TWO)
        # Two ranks per node on one GPU: each rank sees two devices (fakegpu's hybrid-devices
        # library); the rank program selects LOCAL_RANK % device count, its LOCAL_RANK, and both
        # devices run on the one GPU.
        r = fgpu("--mode", "hybrid", "--cluster-config", config, "--report", self.tmp / "r.json", "--nproc", "4",
                 "env", "FAKEGPU_DEVICE_COUNT=1", built("nccl_check"), self.tmp / "id", "--tp", "2", "--iters", "3",
                 env=with_one_gpu(FAKEGPU_FORCE_STAGING="1", NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="ALLOC"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count(": OK ("), 4, r.stdout)
        self.assertIn("2 ranks per node share this machine's 1 GPU(s): each rank sees 2 devices, device d on GPU d % 1\n",
                      r.stderr)
        self.assertIn("device 1 of 2", r.stdout, "rank 1 of each node selected its LOCAL_RANK")
        self.assertIn("Staging pool: new", r.stderr, "device data is staged through host blocks")
        report = json.loads((self.tmp / "r.json").read_text())
        self.assertEqual(report["world_size"], 4)
        # The report names the GPU the ranks computed on (fakegpu's stand-in runtime's one device,
        # an H100 by default) and the cluster's GPUs the communication was modeled on.
        self.assertEqual(report["hybrid"]["computed_on"], ["NVIDIA H100 80GB HBM3"])
        self.assertEqual(report["hybrid"]["modeled_gpus"], ["h100-sxm"])
        self.assertEqual({rank["computed_on"] for rank in report["ranks"]}, {"NVIDIA H100 80GB HBM3"})
        self.assertIn("computed on this machine's NVIDIA H100 80GB HBM3; communication modeled on the cluster's "
                      "h100-sxm", r.stdout + r.stderr)
        self.assertGreater(report["collectives"]["AllReduce"]["calls"], 0)
        # The staged copies are shared with the coordinator, which works on them in place.
        self.assertGreater(report["data_plane"]["shared_memory_bytes"], 0)
        self.assertEqual(report["data_plane"]["socket_bytes"], 0)

    def test_ranks_keep_their_own_cuda_runtime(self):
        # The first folder on the library path, where fgpu links the driver found for shared devices.
        probe = ('echo "$LD_PRELOAD|${LD_LIBRARY_PATH:-}|$FAKEGPU_MODE|${FAKEGPU_HYBRID_DEVICES:-}|'
                 '$(readlink "${LD_LIBRARY_PATH%%:*}/libfakegpu-cuda-driver.so.1")"')
        driver = str(built("nccl_check").parent / "standin-driver" / "libcuda.so.1")
        # NVML's count is shared too where the machine has NVML (a machine with a GPU).
        has_nvml = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libnvidia-ml.so.1')"],
                                  env=with_one_gpu(), capture_output=True).returncode == 0
        sharing = [built("libfakegpu-hybrid-devices.so")] + ([built("libfakegpu-hybrid-nvml.so")] if has_nvml else [])
        for ranks, preload, devices, linked in (
                ("1", [built("libnccl.so.2")], "", ""),
                ("2", sharing + [built("libnccl.so.2")], "2", driver)):
            r = fgpu("--mode", "hybrid", "--nproc", ranks, "sh", "-c", probe, env=with_one_gpu())
            self.assertEqual(r.returncode, 0, r.stderr)
            lines = [line for line in r.stdout.splitlines() if line.count("|") == 4]
            self.assertEqual(len(lines), int(ranks), r.stdout)
            for line in lines:
                seen_preload, library_path, mode, seen_devices, seen_driver = line.split("|")
                # Shared devices stand before the driver fgpu found, which they reach under another name.
                self.assertEqual(seen_driver, linked)
                # fakegpu's NCCL, and where ranks outnumber the GPUs its device sharing: not its runtime.
                self.assertEqual(seen_preload, ":".join(map(str, preload)))
                self.assertNotIn(str(built("libnccl.so.2").parent) + ":", library_path + ":",
                                 "the directory with fakegpu's libcudart stays off the search path")
                self.assertEqual(mode, "hybrid")
                self.assertEqual(seen_devices, devices)

    def test_device_count_is_the_gpus_business(self):
        r = fgpu("--mode", "hybrid", "--device-count", "4", "true", env=with_one_gpu())
        self.assertEqual(r.returncode, 2)
        self.assertIn("with --mode hybrid the ranks see this machine's 1 GPU(s)", r.stderr)

    def test_modes_not_implemented_say_so_on_a_machine_with_a_gpu(self):
        r = fgpu("--mode", "hybrid", "--dist-mode", "proxy", "true", env=with_one_gpu())
        self.assertEqual(r.returncode, 2)
        self.assertIn("set FAKEGPU_REAL_NCCL_PATH", r.stderr)
        real = self.tmp / "libnccl.so.2"
        real.write_bytes(b"")
        r = fgpu("--mode", "hybrid", "--dist-mode", "proxy", "true", env=with_one_gpu(FAKEGPU_REAL_NCCL_PATH=str(real)))
        self.assertEqual(r.returncode, 2)
        self.assertIn("this machine has 1 GPU(s), but fakegpu does not implement this mode yet", r.stderr)

    def test_measured_kernels_install_the_timing_in_each_python_rank(self):
        # fgpu --measure-kernels in hybrid mode: each Python rank that imports torch runs under the
        # operators' timing (fakegpu's sitecustomize, put on its path); operators on the CPU are
        # not timed, so no table is written, and fgpu says so. The timing on the GPU itself is
        # checked by torch_kernel_times over fakegpu's runtime.
        python = Path(os.environ.get("FAKEGPU_TORCH_VENV") or Path(__file__).resolve().parents[2] / "build" /
                      "torch-venv") / "bin" / "python"
        if not python.exists():
            self.skipTest(f"needs PyTorch in {python.parent.parent}")
        probe = ("import torch; from torch.utils._python_dispatch import _get_current_dispatch_mode as mode; "
                 "x = torch.ones(3) * 2; print('timing:', type(mode()).__name__, float(x.sum()))")
        table = self.tmp / "times.json"
        r = fgpu("--mode", "hybrid", "--measure-kernels", table, "--nproc", "2", python, "-c", probe,
                 env=with_one_gpu())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("timing: KernelTimer 6.0"), 2, r.stdout)
        self.assertIn("fgpu: --measure-kernels: no rank timed a PyTorch operator on the GPU", r.stderr)
        self.assertFalse(table.exists())
        # Without the flag, hybrid mode leaves the ranks' Python alone.
        r = fgpu("--mode", "hybrid", "--nproc", "1", python, "-c", probe, env=with_one_gpu())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("timing: NoneType 6.0", r.stdout)

    def test_a_rank_without_a_cuda_runtime_is_refused(self):
        # Only libnccl.so.2 is loaded: in hybrid mode its buffers would be GPU memory it cannot copy.
        program = """
import ctypes, sys
class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]
nccl = ctypes.CDLL(sys.argv[1])
nccl.ncclGetLastError.restype = ctypes.c_char_p
uid, comm = UniqueId(), ctypes.c_void_p()
assert nccl.ncclGetUniqueId(ctypes.byref(uid)) == 0
print(nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0), nccl.ncclGetLastError(None).decode())
"""
        with Coordinator(single_node_config(1), "unix") as coord:
            env = dict(os.environ, FAKEGPU_MODE="hybrid", FAKEGPU_COORDINATOR_TRANSPORT="unix",
                       FAKEGPU_COORDINATOR_ADDR=coord.address, RANK="0", WORLD_SIZE="1", NCCL_DEBUG="NONE")
            r = subprocess.run([sys.executable, "-c", program, str(built("libnccl.so.2"))], env=env,
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        code, message = r.stdout.strip().split(" ", 1)
        self.assertEqual(code, "2")  # ncclSystemError
        self.assertIn("FAKEGPU_MODE=hybrid, but this process has no CUDA runtime that fakegpu can call", message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
