#!/usr/bin/env python3
"""GPU-memory fidelity: the training and inference steps of fakegpu/memory_cases.py run under fgpu
(FAKEGPU_TORCH_COMPUTE=shapes: nothing computed, the same allocations), each on one fake GPU, and
their predicted figures (the GPU's memory in use after the steps, which is its peak, and PyTorch's
max_memory_reserved and max_memory_allocated) beside a table measured on a real GPU by
`fgpu calibrate --memory` (verification/memory/*.jsonl), with the error of each and the median
and worst over the cases measured.

    python3 verification/bench/memory_fidelity.py                          # every case, on an H100
    python3 verification/bench/memory_fidelity.py --cases gpt-train-bf16 --gpu h200 --table T.jsonl

The issue's targets: device memory in use within 5% at the median and 10% at worst, allocator
figures within 2%; printed, not enforced. A case without a measured line prints its prediction
alone. Needs PyTorch's CUDA build in build/torch-venv (skips, exit 77, without it); exits 1 when a
case could not run.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "build" / "torch-venv" / "bin" / "python"
TABLE = ROOT / "verification" / "memory" / "h100-sxm.jsonl"
FIGURES = ("in_use", "max_reserved", "max_allocated")
TARGETS = {"in_use": 0.05, "max_reserved": 0.02, "max_allocated": 0.02}


def predict(case, gpu):
    """The case's figures under fgpu on one fake GPU of the named kind."""
    env = dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    r = subprocess.run([str(ROOT / "fgpu"), "--nproc", "1", "--gpu", gpu, str(PYTHON), "-m", "fakegpu.memory_cases",
                        "--case", case], capture_output=True, text=True, env=env, timeout=900)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{case} failed under fgpu (exit {r.returncode}): {r.stderr.strip()[-2000:]}")
    return json.loads(lines[-1])


def read_table(path):
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {row["case"]: row for row in rows if "error" not in row}


def gib(n):
    return f"{n / (1 << 30):7.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--gpu", default="h100", help="fgpu's --gpu for the predictions (default h100)")
    p.add_argument("--table", type=Path, default=TABLE, help="the measured table (default: %(default)s)")
    a = p.parse_args()
    if not PYTHON.exists():
        print(f"memory_fidelity: skipped: {PYTHON} is missing (./scripts/setup installs PyTorch)")
        return 77
    known = subprocess.run([str(PYTHON), "-m", "fakegpu.memory_cases", "--list"], capture_output=True, text=True,
                           cwd=ROOT, check=True).stdout.split()
    names = a.cases.split(",") if a.cases else known
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"unknown cases {unknown}; known: {', '.join(known)}")
    measured = read_table(a.table)
    print(f"GPU memory under fgpu --gpu {a.gpu} against {a.table.name if measured else 'no measured table'} (GiB)")
    print(f"{'case':24} {'in use':>8} {'measured':>8} {'error':>7}   {'reserved':>8} {'measured':>8} {'error':>7}"
          f"   {'allocated':>9} {'measured':>8} {'error':>7}")
    errors = {f: [] for f in FIGURES}
    failed = 0
    for name in names:
        try:
            got = predict(name, a.gpu)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"{name:24} could not run: {e}")
            failed += 1
            continue
        real = measured.get(name)
        cells = []
        for f in FIGURES:
            if real:
                err = got[f] / real[f] - 1
                errors[f].append(abs(err))
                cells.append(f"{gib(got[f])} {gib(real[f])} {err:+6.1%}")
            else:
                cells.append(f"{gib(got[f])} {'-':>8} {'-':>7}")
        print(f"{name:24} " + "   ".join(cells))
    for f in FIGURES:
        if errors[f]:
            print(f"{f}: median error {statistics.median(errors[f]):.1%}, worst {max(errors[f]):.1%} over "
                  f"{len(errors[f])} measured cases (target {TARGETS[f]:.0%} at the median)")
    if not any(errors.values()):
        print("no case has a measured line yet: run `fgpu calibrate --memory` on a real GPU and commit its table "
              f"as {TABLE.relative_to(ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
