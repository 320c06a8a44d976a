#!/usr/bin/env python3
"""How far `fgpu --representative` reaches on this machine: an FSDP2 x TP transformer
(test/torch/representative_job.py --style tp_dp; tensor parallel over each node's 8 GPUs, FSDP2
across nodes) on clusters of 8-GPU H100 servers, from one process, in shapes mode. Prints, for
each world size, the wall time, the peak host memory of the whole job (every process fgpu
started, the coordinator among them, summed) and the predicted step and peak GPU memory.

    python3 verification/bench/representative_scale.py                    # 8, 128 and 1024 ranks
    python3 verification/bench/representative_scale.py --worlds 8192 --size 1,2048,4096,32,2

The issue's target: 1024 ranks in under 10 minutes and 8 GB. Printed, not enforced. Needs
PyTorch's CUDA build in build/torch-venv (skips, exit 77, without it).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "build" / "torch-venv" / "bin" / "python"
JOB = ROOT / "test" / "torch" / "representative_job.py"


def descendants(pid):
    """A process and all its descendants (from /proc)."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(entry))
        except (OSError, ValueError, IndexError):
            pass
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def resident(pid):
    """A process's resident memory in bytes; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def run_sampled(command, env, cwd=None, watch=None):
    """Runs a command; (wall seconds, peak host memory of it and its descendants in bytes, its
    output, its exit code). watch(pids), where given, sees the processes at every sample."""
    start = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)
    peak = [0]

    def sample():
        while proc.poll() is None:
            pids = descendants(proc.pid)
            peak[0] = max(peak[0], sum(resident(p) for p in pids))
            if watch is not None:
                watch(pids)
            time.sleep(0.5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.communicate()[0]
    wall = time.monotonic() - start
    sampler.join()
    return wall, peak[0], output, proc.returncode


def run(world, size):
    report = Path(tempfile.mkdtemp(prefix="fakegpu-scale-")) / "report.json"
    command = [str(ROOT / "fgpu"), "--representative", "--gpu", "h100", "--nodes", str(world // 8),
               "--gpus-per-node", "8", "--nproc", str(world), "--report", str(report), str(PYTHON), str(JOB),
               "--style", "tp_dp", "--size", size]
    wall, peak, output, code = run_sampled(command, dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes"))
    if code != 0:
        sys.exit(f"{world} ranks failed:\n{output[-3000:]}")
    r = json.loads(report.read_text())
    gpu = max(m["peak"]["bytes"] for m in r["memory"]["ranks"])
    return wall, peak, r["steps"]["median_time_us"], gpu


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", default="8,128,1024", help="world sizes, multiples of 8 (default 8,128,1024)")
    p.add_argument("--size", default="1,2048,4096,32,2",
                   help="BATCH,SEQ,DIM,HEADS,LAYERS per rank (default: Llama 3 8B's width, 2 layers, 2048 tokens)")
    args = p.parse_args()
    if not PYTHON.exists():
        print(f"skipped: needs PyTorch's CUDA build in {PYTHON.parent.parent} (./scripts/setup-torch installs it)")
        sys.exit(77)
    print(f"{'ranks':>6} {'wall s':>8} {'host GB':>8} {'step ms':>9} {'GPU GiB':>8}")
    for world in map(int, args.worlds.split(",")):
        wall, host, step_us, gpu = run(world, args.size)
        print(f"{world:>6} {wall:>8.1f} {host / 1e9:>8.2f} {step_us / 1e3:>9.2f} {gpu / 2**30:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
