#!/usr/bin/env python3
"""A mixture of experts predicted from one process: torchtitan's own `deepseek_v3_16b` config
(DeepSeek-V3 16B: 64 routed experts, 6 per token, expert parallel 8 borrowed from FSDP, 4 x 4096
tokens a rank, selective activation checkpointing) under `fgpu --representative` in shapes mode,
on clusters of 8-GPU H100 servers. In shapes mode the router spreads tokens evenly over the
experts (balanced routing), so the all-to-all's messages and the experts' products are those of a
balanced router. Prints, per world size, the predicted step, tokens per second per GPU, the
communication not hidden behind compute and the peak GPU memory, with what the prediction cost
here (wall time, peak host memory of every process fgpu started, summed).

    python3 verification/bench/torchtitan_moe_scale.py                  # 16, 64 and 1024 GPUs
    python3 verification/bench/torchtitan_moe_scale.py --worlds 16

No public measurement of this config on H100s is set beside it. Needs torchtitan in
build/torch-venv (skips, exit 77, without it).
"""

import argparse

from torchtitan_bench import train, workspace_or_skip

LOCAL_BATCH, SEQUENCE = 4, 4096  # the config's own


def run(gpus, workspace):
    r, wall, host = train(gpus, workspace, "deepseek_v3", "deepseek_v3_16b")
    step_us = r["steps"]["median_time_us"]
    exposed_us = r["steps"]["ranks"][0]["mean"]["exposed_comm_us"]
    gpu = max(m["peak"]["bytes"] for m in r["memory"]["ranks"])
    return step_us, LOCAL_BATCH * SEQUENCE / (step_us / 1e6), exposed_us, gpu, wall, host


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worlds", default="16,64,1024", help="GPUs, multiples of 8 (default 16,64,1024)")
    args = p.parse_args()
    workspace = workspace_or_skip()
    print(f"{'GPUs':>5} {'step ms':>8} {'TPS/GPU':>8} {'exposed comm ms':>15} {'GPU GiB':>8} {'wall s':>7} "
          f"{'host GB':>8}")
    for gpus in map(int, args.worlds.split(",")):
        step_us, tps, exposed_us, gpu, wall, host = run(gpus, workspace)
        print(f"{gpus:>5} {step_us / 1e3:>8.1f} {tps:>8.0f} {exposed_us / 1e3:>15.1f} {gpu / 2**30:>8.1f} "
              f"{wall:>7.1f} {host / 1e9:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
