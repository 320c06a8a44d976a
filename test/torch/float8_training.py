"""Float8 training with torchao on fake GPUs: a small MLP's linear layers converted by
torchao.float8.convert_to_float8_training train three steps, and the same model trains on the
CPU in this process (no autocast, whose rules differ between the two devices). The losses and weights must agree exactly (the fake
GPU's operators are PyTorch's CPU kernels), and the Float8 products must reach the kernel model
as torch._scaled_mm. With --price (in shapes mode): a Float8 product's modeled time against a
bf16 product's of the same shape, from CUDA events. Run as one rank under fgpu; prints one line.
Exits 77 without torchao."""

import copy
import sys

import torch

try:
    from torchao.float8 import convert_to_float8_training
except ImportError:
    print("skipped: torchao is not installed (scripts/setup-torch installs it)")
    sys.exit(77)

WIDTH, TOKENS, STEPS = 64, 128, 3


def train(model, device):
    """Three AdamW steps on fixed data; the losses."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(TOKENS, WIDTH, generator=gen).to(device)
    y = torch.randn(TOKENS, WIDTH, generator=gen).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    losses = []
    for _ in range(STEPS):
        loss = (model(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def price():
    """A Float8 product as torchao runs it, against a bf16 product of the same shape, timed as
    `fgpu calibrate` times them (fakegpu/kernel_cases.py)."""
    from fakegpu.kernel_cases import run_case
    shape = [8192, 8192, 8192]
    fp8 = run_case({"case": "gemm", "op": "scaled_mm", "dtype": "fp8", "shape": shape})["fwd_us"]
    bf16 = run_case({"case": "gemm", "op": "mm", "dtype": "bf16", "shape": shape})["fwd_us"]
    print(f"float8 product: {fp8:.1f} us, bf16 {bf16:.1f} us, ratio {fp8 / bf16:.3f}", flush=True)


def main():
    if "--price" in sys.argv:
        return price()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, 4 * WIDTH, bias=False), torch.nn.GELU(),
                                torch.nn.Linear(4 * WIDTH, WIDTH, bias=False))
    convert_to_float8_training(model)
    if type(model[0]).__name__ != "Float8Linear":
        raise AssertionError(f"torchao did not convert the linear layers: {model}")
    on_cpu = copy.deepcopy(model)

    scaled_mm = []
    original = torch._scaled_mm

    def counted(*args, **kwargs):
        scaled_mm.append(args[0].dtype)
        return original(*args, **kwargs)

    torch._scaled_mm = counted  # torchao calls it through the torch module
    try:
        gpu_losses = train(model.cuda(), "cuda")
    finally:
        torch._scaled_mm = original
    cpu_losses = train(on_cpu, "cpu")
    if gpu_losses != cpu_losses:
        raise AssertionError(f"losses differ: fake GPU {gpu_losses}, CPU {cpu_losses}")
    for (name, p), q in zip(model.named_parameters(), on_cpu.parameters()):
        if not torch.equal(p.detach().cpu(), q.detach()):
            raise AssertionError(f"{name} differs after training")
    # Each linear layer runs three Float8 products a step: forward, and the two of its backward.
    if len(scaled_mm) != 2 * 3 * STEPS or any(not str(d).startswith("torch.float8") for d in scaled_mm):
        raise AssertionError(f"expected {2 * 3 * STEPS} Float8 products, saw {scaled_mm}")
    print(f"float8 training: losses {gpu_losses[0]:.4f} -> {gpu_losses[-1]:.4f} as on the CPU, "
          f"{len(scaled_mm)} Float8 products", flush=True)


if __name__ == "__main__":
    main()
