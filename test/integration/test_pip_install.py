"""fakegpu installed as any Python tool is: `pip install .` into a fresh virtual environment
builds the C++ (scikit-build-core) into the package, and that environment's `fgpu`, run from
another directory with nothing of this checkout on its paths, runs an NCCL program and a PyTorch
DDP script whose ranks load the installed libraries and hook. Skips (exit 77), saying why, without
PyTorch's CUDA build or where the package index (for the build backend) cannot be reached."""

import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from rank_jobs import REPO, built
from torch_jobs import PYTHON, require_torch

# Enough of a DDP job to show where its pieces came from: the hook's module, the libraries' folder,
# an exact all-reduce and two optimizer steps.
DDP_JOB = """
import json, os, sys
import torch, torch.distributed as dist
import fakegpu.torch_hook

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
rank = dist.get_rank()
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4).cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    optimizer.zero_grad()
    model(torch.randn(16, 8, device="cuda")).square().mean().backward()
    optimizer.step()
total = torch.full((4,), float(rank + 1), device="cuda")
dist.all_reduce(total)
with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump({"hook": fakegpu.torch_hook.__file__, "libraries": os.environ["FAKEGPU_BUILD_DIR"],
               "sum": total.tolist()}, f)
dist.destroy_process_group()
"""

UNREACHABLE = ("Could not find a version that satisfies", "Failed to establish a new connection",
               "No matching distribution found", "Temporary failure in name resolution")


class PipInstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = Path(tempfile.mkdtemp(prefix="fakegpu-pip-install-"))
        venv = cls.tmp / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
        # The CMake build is kept beside the test's build, so that a second run only rebuilds what changed.
        build = Path(os.environ.get("FAKEGPU_BUILD_DIR") or REPO / "build") / "wheel-build"
        r = subprocess.run([str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "-q", str(REPO),
                            "-C", f"build-dir={build}"], capture_output=True, text=True, timeout=1500)
        if r.returncode != 0 and any(s in r.stderr for s in UNREACHABLE):
            print("skipped: pip cannot reach the package index for scikit-build-core, the build backend:\n"
                  + r.stderr[-2000:])
            sys.exit(77)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
        cls.fgpu = venv / "bin" / "fgpu"
        site = subprocess.run([str(venv / "bin" / "python"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        cls.package = Path(site) / "fakegpu"
        # Nothing of this checkout: no PYTHONPATH, no build folder, and another working directory.
        cls.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FAKEGPU_BUILD_DIR")}
        cls.env["PYTHONWARNINGS"] = "ignore::FutureWarning"

    def run_fgpu(self, *args):
        work = Path(tempfile.mkdtemp(dir=self.tmp))
        r = subprocess.run([str(self.fgpu), *map(str, args)], capture_output=True, text=True, env=self.env,
                           cwd=work, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-6000:])
        return r, work

    def test_the_package_holds_the_libraries_and_configs(self):
        for name in ("libnccl.so.2", "libcudart.so.12", "libcudart.so.13", "libcuda.so.1", "libcublas.so.13",
                     "fakegpu-coordinator", "fakegpu-model"):
            self.assertTrue((self.package / "native" / name).is_file(), name)
        self.assertTrue((self.package / "configs" / "presets" / "dgx-h100-1node.yaml").is_file())
        self.assertTrue((self.package / "python_hook" / "sitecustomize.py").is_file())

    def test_an_nccl_program(self):
        r, work = self.run_fgpu("--nproc", 2, "--gpu", "h100", "--report", "r.json", built("nccl_check"), "id")
        report = json.loads((work / "r.json").read_text())
        self.assertEqual(report["world_size"], 2)
        self.assertEqual(report["errors"], [])
        self.assertIn("AllReduce:", r.stdout)

    def test_a_pytorch_ddp_script(self):
        job = self.tmp / "ddp_job.py"
        job.write_text(DDP_JOB)
        _, work = self.run_fgpu("--nproc", 2, "--report", "r.json", PYTHON, job, ".")
        for rank in (0, 1):
            seen = json.loads((work / f"rank{rank}.json").read_text())
            self.assertEqual(Path(seen["hook"]).parent, self.package / "torch_hook")
            self.assertEqual(Path(seen["libraries"]), self.package / "native")
            self.assertEqual(seen["sum"], [3.0] * 4)
        report = json.loads((work / "r.json").read_text())
        self.assertEqual(report["steps"]["count"], 2)


if __name__ == "__main__":
    require_torch()
    unittest.main()
