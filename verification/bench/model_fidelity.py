#!/usr/bin/env python3
"""Cost-model fidelity: model every public NCCL measurement of the calibration set and print
predicted, measured and error.

The rows restate shared/reference/calibration-measurements.md (public nccl-tests runs). The
model is not fitted to them row by row: it uses NCCL's own constants and the link physics in
docs/cost-model.md. With --check it exits non-zero when the median absolute error exceeds 10%
or any row exceeds 25%, the project's fidelity targets.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAL = ROOT / "verification" / "calibration"
GIB = 1 << 30
MIB = 1 << 20

H100 = "h100-sxm-1x8.yaml"
A100 = "a100-80gb-1x8.yaml"
P4D = "a100-40gb-p4d-4x8.yaml"
HDR = "a100-hdr-3x8.yaml"
NDR = "h100-ndr-2x1.yaml"

# (id, config, shape flags, collective, size in bytes, metric, measured, note)
# metric: busbw in GB/s as nccl-tests prints it, or time in microseconds.
ROWS = [
    ("C1", H100, [], "all_reduce", 1024, "time", 25.6, "8 x H100, NCCL picks"),
    ("C1", H100, [], "all_reduce", MIB, "busbw", 43.70, ""),
    ("C1", H100, [], "all_reduce", 16 * MIB, "busbw", 234.45, ""),
    ("C1", H100, [], "all_reduce", 128 * MIB, "busbw", 400.61, ""),
    ("C1", H100, [], "all_reduce", GIB, "busbw", 466.35, ""),
    ("C1", H100, [], "all_reduce", 8 * GIB, "busbw", 478.87, ""),
    ("C2", A100, [], "all_reduce", MIB, "busbw", 36.22, "8 x A100"),
    ("C2", A100, [], "all_reduce", GIB, "busbw", 228.10, ""),
    ("C2", A100, [], "all_reduce", 8 * GIB, "busbw", 231.58, ""),
]
for gpus in range(2, 9):
    ROWS.append(("C3", H100, ["--gpus-per-node", str(gpus), "--algo", "ring"], "all_reduce", 4 * GIB, "busbw",
                 367.5, f"{gpus} x H100, Ring forced"))
for gpus, busbw in ((2, 370), (3, 370), (4, 370), (5, 420), (6, 440), (7, 460), (8, 480)):
    ROWS.append(("C3", H100, ["--gpus-per-node", str(gpus)], "all_reduce", 4 * GIB, "busbw", busbw,
                 f"{gpus} x H100, NCCL picks"))
ROWS += [
    ("C4", H100, [], "all_gather", 8 * GIB, "busbw", 370, "8 x H100"),
    ("C4", H100, [], "reduce_scatter", 8 * GIB, "busbw", 370, ""),
    ("C5", P4D, ["--nodes", "1"], "all_reduce", GIB, "time", 8142.6, "p4dn, 8 ranks"),
    ("C5", P4D, ["--nodes", "2"], "all_reduce", GIB, "time", 35215, "16 ranks"),
    ("C5", P4D, ["--nodes", "3"], "all_reduce", GIB, "time", 64782, "24 ranks"),
    ("C5", P4D, ["--nodes", "4"], "all_reduce", GIB, "time", 70253, "32 ranks"),
    ("C6", HDR, ["--nodes", "2"], "all_reduce", 4 * GIB, "busbw", 91, "2 x 8 A100, 4 x HDR"),
    ("C7", HDR, ["--nodes", "3"], "all_reduce", 128 * MIB, "busbw", 96, "3 x 8 A100, 4 x HDR"),
    ("C8", NDR, [], "sendrecv", GIB, "busbw", 47, "one NDR NIC"),
]


def model(config, flags, collective, size):
    exe = Path(os.environ.get("FAKEGPU_BUILD_DIR") or ROOT / "build") / "fakegpu-model"
    cmd = [str(exe), "--cluster-config", str(CAL / config), "--collective", collective, "-b", str(size), "-e",
           str(size), "--json"] + flags
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out)["results"][0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail when the fidelity targets are missed")
    args = ap.parse_args()
    errors = []
    print(f"{'id':<4} {'collective':<15} {'size':>8} {'metric':<6} {'predicted':>10} {'measured':>10} {'error':>7}  "
          f"{'algo/proto':<15} note")
    for rid, config, flags, coll, size, metric, measured, note in ROWS:
        r = model(config, flags, coll, size)
        predicted = r["time_us"] if metric == "time" else r["busbw_gbs"]
        err = (predicted - measured) / measured
        errors.append(abs(err))
        size_text = f"{size // GIB}G" if size >= GIB else f"{size // MIB}M" if size >= MIB else f"{size // 1024}K"
        print(f"{rid:<4} {coll:<15} {size_text:>8} {metric:<6} {predicted:>10.2f} {measured:>10.2f} {err:>+7.1%}  "
              f"{r['algorithm'] + '/' + r['protocol']:<15} {note}")
    median, worst = statistics.median(errors), max(errors)
    print(f"rows {len(errors)}: median |error| {median:.1%}, worst {worst:.1%} (targets: 10%, 25%)")
    if args.check and (median > 0.10 or worst > 0.25):
        print("fidelity targets missed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
