#!/usr/bin/env python3
"""Kernel-model fidelity: every line of a table of operator timings measured on a real GPU
(verification/kernels/*.jsonl, written by `fgpu calibrate`) timed again under fgpu the same way
(fakegpu/kernel_cases.py, CUDA events around back-to-back calls, FAKEGPU_TORCH_COMPUTE=shapes),
with the model's figure, the measured one and the error for each, and the median and worst
error by operator class and over all.

    python3 verification/bench/kernel_fidelity.py                       # the H100 table, on an H100
    python3 verification/bench/kernel_fidelity.py --lines               # and every line
    python3 verification/bench/kernel_fidelity.py --table T.jsonl --gpu h200

The issue's target for operators is a median error of 15% or less; it is printed, not enforced.
Needs PyTorch's CUDA build in build/torch-venv (./scripts/setup; skips, exit 77, without it) and
takes about a minute; exits 1 when a line could not run.
"""

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "build" / "torch-venv" / "bin" / "python"
TABLE = ROOT / "verification" / "kernels" / "h100-sxm.jsonl"
TARGET = 0.15


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--table", default=str(TABLE), help="measured timings (JSON lines)")
    ap.add_argument("--gpu", default="h100", help="the GPU profile the table was measured on")
    ap.add_argument("--lines", action="store_true", help="print every line, not only the summary")
    args = ap.parse_args()
    if not PYTHON.exists():
        print(f"kernel_fidelity: skipped: no PyTorch at {PYTHON.relative_to(ROOT)} (./scripts/setup installs it)")
        return 77

    sys.path.insert(0, str(ROOT))
    from fakegpu import kernel_table
    from fakegpu.paths import SetupError

    measured = {n: case for n, case in kernel_table.read_table(args.table)}
    device = next((c for c in measured.values() if c.get("case") == "device"), {})
    print(f"{args.table}: {device.get('name', 'unknown GPU')}, torch {device.get('torch', '?')}; modeled as --gpu {args.gpu}")
    try:
        modeled_lines = kernel_table.model_table(args.table, args.gpu, PYTHON)
    except SetupError as e:
        sys.exit(f"kernel_fidelity: {e}")
    rows, failed = kernel_table.compare(measured, modeled_lines)
    by_class = {}
    for row in rows:
        real, metric = row.measured, row.metric
        by_class.setdefault(row.group, []).append(abs(row.error))
        if args.lines:
            print(f"  {real['case']:11} {real.get('op', ''):24} {real.get('dtype', ''):5} "
                  f"{str(real.get('shape', '')):28} {real.get('layout', ''):4} {metric:10} "
                  f"measured {real[metric]:9.2f}  modeled {row.modeled:9.2f}  {row.error:+7.1%}")
    everything = sorted(e for errs in by_class.values() for e in errs)
    print(f"{'class':22} {'lines':>5} {'median':>8} {'worst':>8}")
    for group in sorted(by_class):
        errs = by_class[group]
        print(f"{group:22} {len(errs):5} {statistics.median(errs):8.1%} {max(errs):8.1%}")
    if everything:
        median = statistics.median(everything)
        verdict = "met" if median <= TARGET else "not met"
        print(f"{'all':22} {len(everything):5} {median:8.1%} {max(everything):8.1%}   "
              f"(target: median {TARGET:.0%}, {verdict})")
    for line in failed:
        print(f"could not run: {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
