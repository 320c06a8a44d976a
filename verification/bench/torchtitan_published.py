#!/usr/bin/env python3
"""torchtitan's published Llama 3 and 3.1 runs, predicted from one process (one per pipeline
stage): torchtitan's own configs under `fgpu --representative` in shapes mode, on clusters of
8-GPU servers. Prints, per run, the predicted tokens per second per GPU and PyTorch's peak
reserved memory beside the published figures, with what the prediction cost here (wall time, peak
host memory).

    python3 verification/bench/torchtitan_published.py                 # every run below
    python3 verification/bench/torchtitan_published.py --runs 8b-8

The runs, none of which the kernel model was calibrated on:
- 8b-64-a100, 70b-64-a100: torchtitan's docs/performance.md of mid 2024, "Llama 3 performance
  numbers": Llama 3 8B and 70B, FSDP over 64 A100s of 80 GB, local batch 1 of 8192 tokens,
  selective (per-operator) and full activation checkpointing, no torch.compile; throughput only.
- 405b-128: the same page's Llama 3.1 405B row without optimizations: FSDP 16 x TP 8 over 128
  H100s of 94 GB (HBM2e parts, by their memory, like the Grand Teton's below), local batch 2, full
  activation checkpointing, bf16, no torch.compile. torchtitan 0.3.0's own 405B config converts
  the linear layers to Float8 and compiles them, so the benchmark runs it without either
  (llama3_405b_bf16 in CONFIGS below).
- 8b-8, 8b-128, 70b-256: torchtitan's benchmarks/llama3_h100_202412_torchtitan.md (torch, torchao
  and torchtitan of December 2024), throughput read at iteration 90, memory as torchtitan logs it
  (the caching allocator's peak reserved).
  - 8b-8, 8b-128: Tables 1 and 3, the rows "FSDP": Llama 3.1 8B, FSDP over 8 and 128 GPUs, local
    batch 2 of 8192 tokens, selective activation checkpointing, no torch.compile; 8b-8-compile and
    8b-8-float8: Table 1's "FSDP + torch.compile" and "FSDP + torch.compile + Float8".
  - 70b-256: Table 4, the row "2D": Llama 3.1 70B, FSDP 32 x TP 8, local batch 16, full
    activation checkpointing. Published with Float8 linear layers and torch.compile: 70b-256
    predicts the same job in bf16, eagerly, and 70b-256-float8 with both, as published (torchao's
    Float8 layers but the output layer's, torch.compile on the model).
  - 405b-512-pp, 405b-512-ipp: Table 5: Llama 3.1 405B, FSDP 8 x TP 8 x PP 8 over 512 GPUs, local
    batch 32 (32 microbatches of one), full activation checkpointing, the 1F1B and interleaved
    1F1B schedules; memory the largest of any GPU. Published with Float8, torch.compile and async
    TP, which these rows leave out, as 70b-256 does. fgpu runs a process for each stage.
  Their GPUs are Grand Teton H100s, 96 GB of HBM2e at 2.4 TB/s, power-limited to 500 W, whose
  peak TFLOPS the authors place between the SXM's and the NVL's; `--gpu h100` models the SXM
  (80 GB of HBM3, 3.35 TB/s, 700 W), so the SXM should be faster.
Their loss takes the whole logits at once, as torchtitan's then did (`--loss.num-chunks 1`;
torchtitan 0.3.0 chunks them by default), but for the pipelines' (RUNS below). Attention is
torchtitan 0.3.0's FlexAttention where the runs had PyTorch's SDPA. Needs torchtitan in
build/torch-venv (skips, exit 77, without it).
"""

import argparse
from pathlib import Path
from typing import NamedTuple

from torchtitan_bench import chosen, train, workspace_or_skip

SEQUENCE = 8192
# Configs of torchtitan's written for these runs (WRITTEN): a module the job imports from its
# workspace.
CONFIG_MODULE = "fakegpu_published_configs"
WRITTEN = {"llama3_405b_bf16", "llama3_70b_float8", "llama3_8b_float8"}
CONFIGS = """
from torchtitan.components.quantization import Float8LinearConverter
from torchtitan.config import CompileConfig
from torchtitan.models.llama3 import config_registry, model_registry


def llama3_405b_bf16():
    config = config_registry.llama3_405b()
    config.model_spec = model_registry("405B")  # without the Float8 converter
    config.compile = CompileConfig(enable=False)
    return config


# Float8 linear layers but the output layer's, for a model that is compiled (Run.compiled).
def float8(config, flavor):
    config.model_spec = model_registry(flavor, converters=[
        Float8LinearConverter.Config(filter_fqns=["lm_head"], model_compile_enabled=True)])
    return config


def llama3_70b_float8():
    return float8(config_registry.llama3_70b(), "70B")


def llama3_8b_float8():
    return float8(config_registry.llama3_8b(), "8B")
"""


class Run(NamedTuple):
    gpu: str               # preset family
    gpus: int
    config: str
    batch: int             # local batch size
    tp: int                # tensor-parallel degree
    published_tps: int     # tokens/s/GPU
    published_gib: float | None
    pp: int = 1            # pipeline stages
    schedule: str = ""     # torchtitan's pipeline schedule
    loss_chunks: int = 1   # the loss's chunks: 1, the whole logits, as torchtitan's loss then took them
    compiled: bool = False  # torch.compile on the model and loss


RUNS = {
    "8b-64-a100": Run("a100", 64, "llama3_8b", 1, 1, 2973, None),
    "70b-64-a100": Run("a100", 64, "llama3_70b", 1, 1, 331, None),
    "8b-8": Run("h100", 8, "llama3_8b", 2, 1, 5762, 82.4),
    "8b-8-compile": Run("h100", 8, "llama3_8b", 2, 1, 6667, 77.0, compiled=True),
    "8b-8-float8": Run("h100", 8, "llama3_8b_float8", 2, 1, 8532, 76.8, compiled=True),
    "8b-128": Run("h100", 128, "llama3_8b", 2, 1, 5605, 67.0),
    "70b-256": Run("h100", 256, "llama3_70b", 16, 8, 829, 71.9),
    "70b-256-float8": Run("h100", 256, "llama3_70b_float8", 16, 8, 829, 71.9, compiled=True),
    "405b-128": Run("h100", 128, "llama3_405b_bf16", 2, 8, 109, None),
    # FSDP2's reduce-scatter on the last stage stops a pipeline whose loss takes the whole logits
    # ("expects uniform gradient dtype", in torchtitan 0.3.0): torchtitan's own 8 chunks.
    "405b-512-pp": Run("h100", 512, "llama3_405b_bf16", 32, 8, 100, 82.5, pp=8, schedule="1F1B", loss_chunks=8),
    "405b-512-ipp": Run("h100", 512, "llama3_405b_bf16", 32, 8, 128, 72.7, pp=8, schedule="Interleaved1F1B",
                        loss_chunks=8),
}


def run(name, workspace):
    job = RUNS[name]
    module = "llama3"
    if job.config in WRITTEN:
        (Path(workspace) / f"{CONFIG_MODULE}.py").write_text(CONFIGS)
        module = CONFIG_MODULE
    pipeline = ("--parallelism.pipeline-parallel-degree", str(job.pp),
                "--parallelism.pipeline-parallel-schedule", job.schedule) if job.pp > 1 else ()
    r, wall, host = train(job.gpus, workspace, module, job.config, "--training.local-batch-size", str(job.batch),
                          "--parallelism.tensor-parallel-degree", str(job.tp), *pipeline,
                          "--training.disable-cuda-graphs", "--loss.num-chunks", str(job.loss_chunks),
                          *(("--compile.enable",) if job.compiled else ()), gpu=job.gpu)
    step_s = r["steps"]["median_time_us"] / 1e6
    reserved = max(m["pytorch"]["max_reserved"] for m in r["memory"]["ranks"])
    # torchtitan's count: a data-parallel rank's tokens over the GPUs that share them (its TP group
    # and pipeline stages).
    return job.batch * SEQUENCE / step_s / (job.tp * job.pp), reserved / 2**30, wall, host


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default=",".join(RUNS), help=f"which published runs (default all: {','.join(RUNS)})")
    args = p.parse_args()
    names = chosen(p, "--runs", args.runs, RUNS)
    workspace = workspace_or_skip()
    print(f"{'run':>14} {'GPUs':>10} {'TPS/GPU':>8} {'published':>9} {'ratio':>6} {'GiB':>6} {'published':>9} "
          f"{'wall s':>7} {'host GB':>8}")
    for name in names:
        tps, gib, wall, host = run(name, workspace)
        job = RUNS[name]
        shown_gib = f"{job.published_gib:.1f}" if job.published_gib else "-"
        print(f"{name:>14} {f'{job.gpus} x {job.gpu}':>10} {tps:>8.0f} {job.published_tps:>9} "
              f"{tps / job.published_tps:>6.2f} {gib:>6.1f} {shown_gib:>9} {wall:>7.1f} {host / 1e9:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
