#!/usr/bin/env python3
"""On a real GPU: some rates behind fakegpu's kernel model (common/cluster/gpu_rates.cpp), measured
with PyTorch, so they can be checked on any GPU at hand (`fgpu calibrate` measures them all).

- a bf16 product of 8192 x 8192 matrices and a device-to-device copy, against the datasheet
  peaks when given (the model gives them 79% and 90% of them on Hopper);
- bf16 products whose rows start every 16, 8, 4 and 2 bytes (4096, 4092, 4094 and 4095 columns),
  forward and both gradients, as shares of the aligned rate (the model, on Hopper and later:
  1, 1/3, 1/3 and 1/6).

Runs on the PyTorch that scripts/setup installs where the interpreter has none. Skips (exit 77)
without a GPU and a CUDA build of PyTorch.
Usage: verification/bench/gpu_kernel_rates.py [--peak-tflops 989.5] [--peak-gbs 3352]
"""

import argparse
import os
import sys
from pathlib import Path

VENV = Path(os.environ.get("FAKEGPU_TORCH_VENV") or Path(__file__).resolve().parents[2] / "build" / "torch-venv")


def timed_ms(torch, fn, iters=20):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def product_rates(torch, rows, depth, columns):
    """TFLOP/s of x @ w.T (a linear layer's forward), its input gradient and its weight gradient."""
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    x, w, g = torch.randn(rows, depth, **bf16), torch.randn(columns, depth, **bf16), torch.randn(rows, columns, **bf16)
    flops = 2 * rows * depth * columns
    runs = (lambda: x @ w.t(), lambda: g @ w, lambda: g.t() @ x)
    return [flops / timed_ms(torch, run) / 1e9 for run in runs]


def share_of_peak(got, peak, modeled):
    return f", {got / peak:.2f} of the peak (model: {modeled})" if peak else ""


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak, TFLOP/s")
    p.add_argument("--peak-gbs", type=float, help="the GPU's memory bandwidth, GB/s")
    a = p.parse_args()
    try:
        import torch
    except ImportError:
        python = VENV / "bin" / "python"
        if python.exists() and Path(sys.prefix).resolve() != VENV.resolve():
            os.execv(python, [str(python), __file__, *sys.argv[1:]])
        print("gpu_kernel_rates: skipped: needs PyTorch")
        return 77
    if not torch.cuda.is_available():
        print("gpu_kernel_rates: skipped: needs a GPU (torch.cuda.is_available() is false)")
        return 77
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")

    big = product_rates(torch, 8192, 8192, 8192)[0]
    source = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    target = torch.empty_like(source)
    copy_gbs = 2 * source.numel() / timed_ms(torch, lambda: target.copy_(source)) / 1e6  # read and written
    print(f"bf16 product 8192^3: {big:.0f} TFLOP/s{share_of_peak(big, a.peak_tflops, 0.79)}")
    print(f"device-to-device copy: {copy_gbs:.0f} GB/s{share_of_peak(copy_gbs, a.peak_gbs, 0.9)}")
    del source, target

    aligned = product_rates(torch, 4096, 4096, 4096)
    print("bf16 4096 x 4096 products, share of the 16-byte-aligned rate (forward, input gradient, weight gradient):")
    for columns, row_bytes, model_share in ((4096, 16, "1"), (4092, 8, "1/3"), (4094, 4, "1/3"), (4095, 2, "1/6")):
        rates = product_rates(torch, 4096, 4096, columns)
        shares = ", ".join(f"{r / base:.2f}" for r, base in zip(rates, aligned))
        print(f"  {columns} columns ({row_bytes}-byte rows): {shares} (model on Hopper and later: {model_share})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
