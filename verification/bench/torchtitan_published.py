#!/usr/bin/env python3
"""torchtitan's published Llama 3.1 8B runs on H100s, predicted from one process: torchtitan's own
`llama3_8b` config (8192 tokens, selective activation checkpointing, no torch.compile) at local
batch 2 under `fgpu --representative` in shapes mode, on clusters of 8-GPU H100 servers. Prints,
per run, the predicted tokens per second per GPU and PyTorch's peak reserved memory beside the
published figures, with what the prediction cost here (wall time, peak host memory).

    python3 verification/bench/torchtitan_published.py          # 8 and 128 GPUs
    python3 verification/bench/torchtitan_published.py --gpus 8

Published: torchtitan's benchmarks/llama3_h100_202412_torchtitan.md (torch, torchao and
torchtitan of December 2024), Tables 1 and 3, the rows "FSDP": throughput read at iteration 90,
memory as torchtitan logs it (the caching allocator's peak reserved). Their GPUs are Grand Teton
H100s, 96 GB of HBM2e at 2.4 TB/s, power-limited to 500 W, whose peak TFLOPS the authors place
between the SXM's and the NVL's; `--gpu h100` models the SXM (80 GB of HBM3, 3.35 TB/s, 700 W),
so the SXM should be faster. torchtitan 0.3.0's config also differs from theirs (its loss is
chunked over the vocabulary, so the logits are never whole). Needs torchtitan in build/torch-venv
(skips, exit 77, without it).
"""

import argparse

from torchtitan_bench import train, workspace_or_skip

LOCAL_BATCH, SEQUENCE = 2, 8192
# GPUs -> (published tokens per second per GPU, published memory in GiB)
PUBLISHED = {8: (5762, 82.4), 128: (5605, 67.0)}


def run(gpus, workspace):
    r, wall, host = train(gpus, workspace, "llama3", "llama3_8b", "--training.local-batch-size", str(LOCAL_BATCH),
                          "--training.disable-cuda-graphs")
    step_s = r["steps"]["median_time_us"] / 1e6
    reserved = max(m["pytorch"]["max_reserved"] for m in r["memory"]["ranks"])
    return LOCAL_BATCH * SEQUENCE / step_s, reserved / 2**30, wall, host


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", default="8,128", help="which published runs: 8, 128 or both (default)")
    args = p.parse_args()
    workspace = workspace_or_skip()
    print(f"{'GPUs':>5} {'TPS/GPU':>8} {'published':>9} {'ratio':>6} {'GiB':>6} {'published':>9} {'wall s':>7} "
          f"{'host GB':>8}")
    for gpus in map(int, args.gpus.split(",")):
        tps, gib, wall, host = run(gpus, workspace)
        published_tps, published_gib = PUBLISHED[gpus]
        print(f"{gpus:>5} {tps:>8.0f} {published_tps:>9} {tps / published_tps:>6.2f} {gib:>6.1f} {published_gib:>9.1f} "
              f"{wall:>7.1f} {host / 1e9:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
