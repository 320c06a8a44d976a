#!/usr/bin/env python3
"""PyTorch DDP on fake GPUs: where the time goes from launch to the first gradient all-reduce,
the time per training step, and the memory of each rank process, for 4 ranks of a small MLP.

Three cases in one run, so that their ratios are fair on a shared machine:
- fakegpu: `fgpu --nproc 4`, CUDA tensors computed by PyTorch's CPU kernels (the default);
- fakegpu, no compute: the same with FAKEGPU_TORCH_COMPUTE=0 (kernels accepted, not run);
- CPU + gloo: the same script on CPU tensors with the gloo backend, started by torchrun, without
  fakegpu: what the same training costs on this machine with no GPU pretence at all.
Then the cost fakegpu adds to one operator: a one-element in-place add on a fake-GPU tensor
against the same on a CPU tensor. Prints one table and that line. Needs PyTorch's CUDA build in build/torch-venv (./scripts/setup-torch).
Usage: verification/bench/torch_ddp_bench.py [--steps 30]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("FAKEGPU_TORCH_VENV") or REPO / "build" / "torch-venv")

RANK_SCRIPT = r'''
import json, os, resource, sys, time
t0 = float(os.environ["BENCH_T0"])
import torch, torch.distributed as dist
t_import = time.time()
device_type, backend, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
local = int(os.environ["LOCAL_RANK"])
if device_type == "cuda":
    torch.cuda.set_device(local)
device = torch.device(device_type, local if device_type == "cuda" else 0)
dist.init_process_group(backend)
t_init = time.time()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 10)).to(device)
ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local] if device_type == "cuda" else None)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x, y = torch.randn(64, 256).to(device), torch.randint(0, 10, (64,)).to(device)
def step():
    opt.zero_grad()
    torch.nn.functional.cross_entropy(ddp(x), y).backward()
    opt.step()
    if device_type == "cuda":
        torch.cuda.synchronize()
step()
t_first = time.time()
times = []
for _ in range(steps):
    s = time.perf_counter()
    step()
    times.append(time.perf_counter() - s)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with open(os.path.join(out, f"rank{dist.get_rank()}.json"), "w") as f:
    json.dump({"import": t_import - t0, "init": t_init - t0, "first": t_first - t0, "steps": times, "rss_kib": rss}, f)
dist.destroy_process_group()
'''


OVERHEAD_SCRIPT = r'''
import time, torch
def per_call(x, n=3000):
    for _ in range(200):
        x.add_(1)
    start = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    return (time.perf_counter() - start) / n * 1e6
cpu = per_call(torch.zeros(1))
cuda = per_call(torch.zeros(1).cuda())
print(f"OVERHEAD {cpu:.2f} {cuda:.2f}")
'''


def op_overhead(python, tmp):
    """(us per tiny in-place add on a CPU tensor, the same on a fake-GPU tensor under fgpu)."""
    script = tmp / "overhead.py"
    script.write_text(OVERHEAD_SCRIPT)
    r = subprocess.run([str(REPO / "fgpu"), "--nproc", "1", "--report", str(tmp / "overhead.json"), str(python),
                        str(script)], capture_output=True, text=True, timeout=600)
    line = [l for l in r.stdout.splitlines() if l.startswith("OVERHEAD")]
    if r.returncode != 0 or not line:
        sys.exit(f"bench: the per-operator overhead run failed:\n{r.stderr[-3000:]}")
    cpu, cuda = map(float, line[0].split()[1:])
    return cpu, cuda


def run_case(command, env, out, steps, tries=1):
    for attempt in range(tries):
        env = dict(env, BENCH_T0=repr(time.time()), PYTHONWARNINGS="ignore")
        r = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode == 0:
            break
        # The rank's own error comes first; torchrun's summary of it last.
        why = r.stderr if len(r.stderr) <= 6000 else r.stderr[:3000] + "\n...\n" + r.stderr[-3000:]
        if attempt + 1 == tries:
            sys.exit(f"bench: {' '.join(map(str, command[:3]))} failed:\n{why}")
        print(f"bench: {' '.join(map(str, command[:3]))} failed, trying again:\n{why}", file=sys.stderr)
    ranks = [json.loads((out / f"rank{i}.json").read_text()) for i in range(4)]
    return {
        "import": max(r["import"] for r in ranks),
        "init": max(r["init"] for r in ranks),
        "first": max(r["first"] for r in ranks),
        "step_ms": 1000 * statistics.median(t for r in ranks for t in r["steps"]),
        "rss_mib": max(r["rss_kib"] for r in ranks) / 1024,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    a = p.parse_args()
    python = VENV / "bin" / "python"
    if not python.exists():
        print(f"bench: skipped: needs PyTorch's CUDA build in {VENV} (./scripts/setup-torch)")
        sys.exit(77)  # ctest's SKIP_RETURN_CODE
    with tempfile.TemporaryDirectory(prefix="fakegpu-torch-bench-") as tmp:
        tmp = Path(tmp)
        script = tmp / "rank.py"
        script.write_text(RANK_SCRIPT)
        rows = []
        for name, device, backend, extra, launcher in (
                ("fakegpu", "cuda", "nccl", {}, "fgpu"),
                ("fakegpu, no compute", "cuda", "nccl", {"FAKEGPU_TORCH_COMPUTE": "0"}, "fgpu"),
                ("CPU + gloo", "cpu", "gloo", {}, "torchrun")):
            out = tmp / name.replace(" ", "_").replace(",", "").replace("+", "")
            out.mkdir()
            args = [str(script), device, backend, str(a.steps), str(out)]
            if launcher == "fgpu":
                command = [str(REPO / "fgpu"), "--nproc", "4", "--report", str(out / "r.json"), str(python), *args]
            else:
                command = [str(VENV / "bin" / "torchrun"), "--standalone", "--nproc_per_node=4", *args]
            # The CPU reference is PyTorch's alone, and its gloo ranks sometimes abort on a busy
            # machine ("terminate called without an active exception"): it is tried three times.
            rows.append((name, run_case(command, dict(os.environ, **extra), out, a.steps,
                                        tries=3 if launcher == "torchrun" else 1)))
        cpu_us, cuda_us = op_overhead(python, tmp)
    base = rows[-1][1]["step_ms"]
    print("4 ranks, DDP, MLP 256-512-512-10 (0.4 M parameters), batch 64 per rank; times from launch")
    print(f"{'case':<22}{'import torch':>14}{'init PG':>10}{'1st all-reduce':>16}{'step (median)':>15}"
          f"{'x gloo':>8}{'RSS/rank':>10}")
    for name, f in rows:
        print(f"{name:<22}{f['import']:>12.2f} s{f['init']:>8.2f} s{f['first']:>14.2f} s{f['step_ms']:>12.1f} ms"
              f"{f['step_ms'] / base:>8.2f}{f['rss_mib']:>7.0f} MiB")
    print(f"one operator (x.add_(1), one element): {cpu_us:.1f} us on a CPU tensor, {cuda_us:.1f} us on a fake GPU; "
          f"fakegpu adds {cuda_us - cpu_us:.1f} us per operator")


if __name__ == "__main__":
    main()
