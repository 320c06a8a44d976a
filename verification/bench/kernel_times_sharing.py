#!/usr/bin/env python3
"""Do ranks sharing a GPU distort each other's kernel times? The same DDP job
(test/torch/kernel_times.py) timed by `fgpu --mode hybrid --measure-kernels` with one rank on the
GPU and with N ranks sharing it: each operator's time measured by N ranks over its time measured
alone, printed as the median and the spread over the operators both tables hold. Timing takes
every operator alone on the GPU (torch_hook/kernel_timing.py), so the ratios should stay near 1.

    python3 verification/bench/kernel_times_sharing.py               # on a machine with a GPU
    python3 verification/bench/kernel_times_sharing.py --simulate    # the same path over fakegpu's runtime

--simulate times over fakegpu's runtime, whose events give modeled times: it checks the path, not
the GPU. Needs PyTorch's CUDA build in build/torch-venv (skips, exit 77, without it or, in hybrid
mode, without a GPU); exits 1 when a run fails.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "build" / "torch-venv" / "bin" / "python"
JOB = ROOT / "test" / "torch" / "kernel_times.py"
sys.path.insert(0, str(ROOT))
from fakegpu import kernel_times  # noqa: E402


def measure(ranks, simulate, workdir):
    """The table of one run of the job on `ranks` ranks: {key: us}."""
    table = workdir / f"times-{ranks}.json"
    job = ["--nproc", str(ranks), str(PYTHON), str(JOB), "--part", "train", "--out", str(workdir / "losses.json")]

    def run(fgpu_args, extra_env=None):
        path = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        env = dict(os.environ, PYTHONPATH=path, **(extra_env or {}))
        r = subprocess.run([str(ROOT / "fgpu"), *fgpu_args, *job], capture_output=True, text=True, env=env,
                           cwd=workdir, timeout=900)
        if r.returncode != 0:
            raise RuntimeError(f"{ranks} rank(s) failed (exit {r.returncode}): {r.stderr.strip()[-2000:]}")

    if simulate:
        kernel_times.measure_over_runtime(lambda extra_env: run((), extra_env), table)
    else:
        run(("--mode", "hybrid", "--measure-kernels", str(table)))
    return {k: v["us"] for k, v in json.loads(table.read_text())["operators"].items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=4, help="ranks sharing the GPU in the second run (default 4)")
    p.add_argument("--simulate", action="store_true", help="over fakegpu's runtime instead of a GPU")
    a = p.parse_args()
    if not PYTHON.exists():
        print(f"kernel_times_sharing: skipped: {PYTHON} is missing (./scripts/setup installs PyTorch)")
        return 77
    if not a.simulate and shutil.which("nvidia-smi") is None:
        print("kernel_times_sharing: skipped: no GPU here (nvidia-smi); --simulate runs the same path without one")
        return 77
    workdir = Path(tempfile.mkdtemp(prefix="fakegpu-sharing-"))
    try:
        alone = measure(1, a.simulate, workdir)
        shared = measure(a.ranks, a.simulate, workdir)
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(f"kernel_times_sharing: {e}")
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    common = sorted(set(alone) & set(shared))
    if not common:
        print("kernel_times_sharing: the two runs timed no operator in common")
        return 1
    ratios = sorted(shared[k] / alone[k] for k in common if alone[k] > 0)
    decile = max(1, len(ratios) // 10)
    print(f"{len(common)} operators timed both alone and with {a.ranks} ranks sharing the "
          f"{'modeled ' if a.simulate else ''}GPU: time shared / time alone, median {statistics.median(ratios):.3f}, "
          f"10th to 90th percentile {ratios[decile - 1]:.3f} to {ratios[-decile]:.3f}")
    for k in sorted(common, key=lambda k: -alone[k])[:8]:
        print(f"  {k.split('|')[0]:50} alone {alone[k]:9.1f} us   shared {shared[k]:9.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
