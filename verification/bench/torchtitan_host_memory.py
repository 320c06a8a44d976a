#!/usr/bin/env python3
"""What torchtitan's parallelisms cost this machine under fgpu, beside what they would use on GPUs:
its llama3 debug model in compute mode (every value computed on the CPU) on one simulated node of
H100s, a configuration per line. Prints, per configuration, the peak host memory of each rank's
process (resident, fake device memory included), the rank's peak GPU memory as fgpu models it, the
predicted step time, and whether the loss fell.

    python3 verification/bench/torchtitan_host_memory.py                 # every configuration
    python3 verification/bench/torchtitan_host_memory.py --only fsdp,hsdp

A rank's host memory is its GPU memory plus what a PyTorch process costs on its own (the CUDA
build's libraries, Python, the data loader): printed, not enforced. Needs torchtitan in
build/torch-venv (skips, exit 77, without it).
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "test" / "integration"))
from representative_scale import resident, run_sampled  # noqa: E402
from test_torchtitan import LLAMA, TRAINING, step_losses  # noqa: E402
from torchtitan_bench import PYTHON, chosen, job_env, workspace_or_skip  # noqa: E402

# name -> (ranks, torchtitan's options beyond the shared ones)
CONFIGS = {
    "fsdp": (4, []),
    "fsdp_tp": (4, ["--parallelism.tensor-parallel-degree", "2"]),
    # torchtitan captures no CUDA graphs of pipelines: it asks for them off.
    "pp_fsdp": (4, ["--parallelism.pipeline-parallel-degree", "2", "--training.disable-cuda-graphs"]),
    "hsdp": (4, ["--parallelism.data-parallel-replicate-degree", "2", "--parallelism.data-parallel-shard-degree", "2"]),
    # Context parallelism splits a sequence in blocks of 128 tokens per rank: 256 tokens over 2.
    "cp": (4, ["--parallelism.context-parallel-degree", "2", "--training.seq-len", "256"]),
    # The debug model's config checkpoints activations selectively (so do the lines above); tyro
    # takes another policy as a subcommand, last.
    "ac_full": (4, ["activation-checkpoint:full"]),
    "ac_none": (4, ["activation-checkpoint:none"]),
    "compile": (4, ["--compile.enable"]),
}


def rank_of(pid):
    """The RANK torchrun gave a Python process, or None for any other process."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            python = b"python" in f.read().split(b"\0")[0]
    except OSError:
        return None
    if python and b"RANK" in env and b"LOCAL_RANK" in env and b"TORCHELASTIC_RUN_ID" in env:
        return int(env[b"RANK"])
    return None


def run(name, ranks, options, workspace):
    report = Path(tempfile.mkdtemp(prefix=f"fakegpu-titan-{name}-")) / "report.json"
    command = [str(ROOT / "fgpu"), "--gpu", "h100", "--nodes", "1", "--gpus-per-node", str(ranks), "--report",
               str(report), str(PYTHON.parent / "torchrun"), f"--nproc_per_node={ranks}", "-m", "torchtitan.train",
               "--module", LLAMA[0], "--config", LLAMA[1], *TRAINING, *options]
    peaks = {}  # rank -> its process's peak resident memory

    def watch(pids):
        for pid in pids:
            rank = rank_of(pid)
            if rank is not None:
                peaks[rank] = max(peaks.get(rank, 0), resident(pid))

    wall, _, output, code = run_sampled(command, job_env(), cwd=workspace, watch=watch)
    if code != 0:
        return None, output
    r = json.loads(report.read_text())
    gpu = {m["global_rank"]: m["peak"]["bytes"] for m in r["memory"]["ranks"]}
    losses = {step: min(v) for step, v in step_losses(output).items()}
    fell = bool(losses) and losses[max(losses)] < losses[min(losses)] - 0.5
    return (wall, peaks, gpu, r["steps"]["median_time_us"], fell), output


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help=f"comma-separated configurations (default all: {', '.join(CONFIGS)})")
    args = p.parse_args()
    names = chosen(p, "--only", args.only, CONFIGS)
    workspace = workspace_or_skip()
    print(f"{'configuration':<14} {'ranks':>5} {'host GB/rank':>12} {'GPU GB/rank':>11} {'host/GPU':>8} "
          f"{'step ms':>8} {'loss fell':>9} {'wall s':>7}")
    failed = []
    for name in names:
        ranks, options = CONFIGS[name]
        figures, output = run(name, ranks, options, workspace)
        if figures is None:
            tail = " ".join(output[-400:].split())
            print(f"{name:<14} {ranks:>5} failed: {tail}", flush=True)
            failed.append(name)
            continue
        wall, host, gpu, step_us, fell = figures
        host_max, gpu_max = max(host.values(), default=0), max(gpu.values(), default=0)
        print(f"{name:<14} {ranks:>5} {host_max / 1e9:>12.2f} {gpu_max / 1e9:>11.2f} "
              f"{host_max / max(gpu_max, 1):>8.2f} {step_us / 1e3:>8.2f} {'yes' if fell else 'no':>9} {wall:>7.1f}",
              flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
