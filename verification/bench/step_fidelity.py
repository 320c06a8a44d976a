#!/usr/bin/env python3
"""Whole-step fidelity: the training and inference steps of fakegpu/step_cases.py run under fgpu
(FAKEGPU_TORCH_COMPUTE=shapes: nothing computed, the same allocations and modeled time), each on
one fake GPU, beside the same steps measured on a real GPU by `fgpu calibrate --steps`
(verification/steps/<gpu>.jsonl): the step time, the GPU's memory in use after the steps (its
peak), and PyTorch's max_memory_reserved and max_memory_allocated, with the error of each and the
median and worst over the cases measured.

    python3 verification/bench/step_fidelity.py                          # every case, on an H100
    python3 verification/bench/step_fidelity.py --gpu h200 --cases gpt-train-bf16,mlp-train-fp32
    python3 verification/bench/step_fidelity.py --gpu h200 --table steps.jsonl --measured-kernels hybrid

With --measured-kernels hybrid (on a machine with a GPU) each case first runs on that GPU under
`fgpu --mode hybrid --measure-kernels`, and its prediction prices the operators at the times
measured there (`--kernel-times`): against a table of the same GPU's steps (`fgpu calibrate
--steps`), it shows how close kernel times measured one operator at a time come to whole steps.

Where a table holds several runs of a case, the fastest step time stands for it: a shared
machine's noise only ever slows a step (the host-bound cases vary most between runs).

The issues' targets: step time within 10% at the median and 25% at worst; memory in use within 5%
at the median, allocator figures within 2%. Printed, not enforced. A case without a measured line
prints its prediction alone. Needs PyTorch's CUDA build in build/torch-venv (skips, exit 77,
without it); exits 1 when a case could not run.
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
TABLES = {"h100": "h100-sxm.jsonl", "h200": "h200.jsonl"}
MEMORY = ("in_use", "max_reserved", "max_allocated")
TARGETS = {"step_ms": 0.10, "in_use": 0.05, "max_reserved": 0.02, "max_allocated": 0.02}


def run_case(case, timed_steps, fgpu_args=(), env_extra=None):
    """fakegpu.step_cases' line for the case under fgpu with the given options, and its stderr."""
    env = dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
               **(env_extra or {}))
    workdir = tempfile.mkdtemp(prefix="fakegpu-step-")  # for the job's report, which nothing here reads
    try:
        r = subprocess.run([str(ROOT / "fgpu"), *map(str, fgpu_args), "--nproc", "1", str(PYTHON), "-m",
                            "fakegpu.step_cases", "--case", case, "--timed-steps", str(timed_steps)],
                           capture_output=True, text=True, env=env, cwd=workdir, timeout=900)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{case} failed under fgpu {' '.join(map(str, fgpu_args))} (exit {r.returncode}): "
                           f"{r.stderr.strip()[-2000:]}")
    return json.loads(lines[-1]), r.stderr


def predict(case, gpu, timed_steps, kernel_times=None):
    """The case's figures under fgpu on one fake GPU of the named kind (its operators priced at the
    times in kernel_times, where given), and what fgpu said of those times."""
    extra = ("--kernel-times", kernel_times) if kernel_times else ()
    line, stderr = run_case(case, timed_steps, ("--gpu", gpu) + extra)
    said = [text for text in stderr.splitlines() if text.startswith("fakegpu: kernel times:")]
    return line, said[-1][len("fakegpu: "):] if said else None


def measure_kernels(case, gpu, how, table):
    """Writes the table of the case's operators' times: timed on this machine's GPU (fgpu --mode
    hybrid --measure-kernels), or, with how == "simulate", over fakegpu's runtime, whose events give
    the kernel model's times (the same path, for machines without a GPU)."""
    if how == "hybrid":
        run_case(case, 1, ("--mode", "hybrid", "--measure-kernels", table))
        return
    sys.path.insert(0, str(ROOT))
    from fakegpu import kernel_times

    kernel_times.measure_over_runtime(lambda extra_env: run_case(case, 1, ("--gpu", gpu), extra_env), Path(table))


def read_table(path):
    """case -> its measured line, the fastest step of its runs standing for its time."""
    if not path.exists():
        return {}
    table = {}
    for text in path.read_text().splitlines():
        row = json.loads(text) if text.strip() else {}
        if not row or "error" in row:
            continue
        seen = table.setdefault(row["case"], row)
        if "step_ms" in row:
            seen["step_ms"] = min(seen.get("step_ms", row["step_ms"]), row["step_ms"])
    return table


def gib(n):
    return f"{n / (1 << 30):7.2f}"


def cell(got, real, show):
    if real is None:
        return f"{show(got)} {'-':>8} {'-':>7}", None
    err = got / real - 1
    return f"{show(got)} {show(real)} {err:+6.1%}", abs(err)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", help="comma-separated case names (default: all)")
    p.add_argument("--gpu", default="h100", help="fgpu's --gpu for the predictions (default h100)")
    p.add_argument("--table", type=Path, help="the measured table (default: verification/steps/ for --gpu)")
    p.add_argument("--timed-steps", type=int, default=10, help="steps timed under fgpu (default 10)")
    p.add_argument("--measured-kernels", choices=("hybrid", "simulate"),
                   help="price each case's operators at times measured first: on this machine's GPU (hybrid, "
                        "fgpu --measure-kernels), or over fakegpu's runtime (simulate: the same path without a GPU)")
    a = p.parse_args()
    if not PYTHON.exists():
        print(f"step_fidelity: skipped: {PYTHON} is missing (./scripts/setup installs PyTorch)")
        return 77
    table = a.table or ROOT / "verification" / "steps" / TABLES.get(a.gpu, f"{a.gpu}.jsonl")
    known = subprocess.run([str(PYTHON), "-m", "fakegpu.step_cases", "--list"], capture_output=True, text=True,
                           cwd=ROOT, check=True).stdout.split()
    names = a.cases.split(",") if a.cases else known
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"unknown cases {unknown}; known: {', '.join(known)}")
    measured = read_table(table)
    print(f"Steps under fgpu --gpu {a.gpu} against {table.name if measured else 'no measured table'}: "
          f"step time (ms), GPU memory (GiB)")
    print(f"{'case':24} {'step':>8} {'measured':>8} {'error':>7}   {'in use':>7} {'measured':>8} {'error':>7}   "
          f"{'reserved':>7} {'measured':>8} {'error':>7}   {'allocated':>7} {'measured':>8} {'error':>7}")
    errors = {f: [] for f in TARGETS}
    failed = 0
    notes = []
    for name in names:
        try:
            times = None
            if a.measured_kernels:
                times = Path(tempfile.mkdtemp(prefix="fakegpu-times-")) / f"{name}.json"
                measure_kernels(name, a.gpu, a.measured_kernels, times)
            got, said = predict(name, a.gpu, a.timed_steps, times)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"{name:24} could not run: {e}")
            failed += 1
            continue
        finally:
            if times:
                shutil.rmtree(times.parent, ignore_errors=True)
        if said:
            notes.append(f"{name}: {said}")
        real = measured.get(name, {})
        cells = []
        for f in TARGETS:
            if f not in got:
                cells.append(f"{'-':>8} {'-':>8} {'-':>7}")
                continue
            text, err = cell(got[f], real.get(f), (lambda v: f"{v:8.3f}") if f == "step_ms" else gib)
            cells.append(text)
            if err is not None:
                errors[f].append(err)
        print(f"{name:24} " + "   ".join(cells))
    for note in notes:
        print(note)
    for f, errs in errors.items():
        if errs:
            print(f"{f}: median error {statistics.median(errs):.1%}, worst {max(errs):.1%} over {len(errs)} measured "
                  f"cases (target {TARGETS[f]:.0%} at the median)")
    if not any(errors.values()):
        print(f"no case has a measured line in {table}: run `fgpu calibrate --steps` on a real GPU and commit its "
              f"table there")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
