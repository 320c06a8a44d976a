"""Training and inference steps of common models, measured the same way on a real GPU and under
fgpu, for comparing the step time and GPU memory fakegpu predicts with a real GPU's:
`fgpu calibrate --steps` runs each on a real GPU (verification/steps/ keeps the tables), and
verification/bench/step_fidelity.py runs each under fgpu (FAKEGPU_TORCH_COMPUTE=shapes: nothing
computed, the same allocations and modeled time) and sets the two side by side.

    python -m fakegpu.step_cases --list
    python -m fakegpu.step_cases --case gpt-train-bf16      # one JSON line

Each case runs in a process of its own (a fresh CUDA context and allocator). It takes three steps
and reports PyTorch's peaks and what the GPU has in use after them (torch.cuda.mem_get_info:
context, PyTorch's pool, libraries), which is its peak, as nothing frees PyTorch's cache; then it
times more steps, each between CUDA events, and reports their median."""

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

STEPS = 3


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class GptBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.attn = Attention(dim, heads)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class LanguageModel(nn.Module):
    def __init__(self, vocab, dim, blocks):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(blocks)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def conv_net():
    """A ResNet-18-like network: a 7x7 stem and four stages of two basic blocks."""
    def stage(cin, cout, stride):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
    return nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         stage(64, 64, 1), stage(64, 128, 2), stage(128, 256, 2), stage(256, 512, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))


def mlp(width):
    return nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.GELU(),
                         nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))


def norm_stack(dim):
    layers = []
    for _ in range(8):
        layers += [nn.LayerNorm(dim), nn.GELU(), nn.Dropout(0.1)]
    return nn.Sequential(*layers)


# name -> (model, input maker, training, dtype: params' dtype ("tf32": fp32 with TF32 products), autocast: bf16
# autocast over fp32 params)
def _cases():
    gpt = lambda: LanguageModel(50304, 768, [GptBlock(768, 12) for _ in range(12)])
    llama = lambda: LanguageModel(32000, 1024, [LlamaBlock(1024, 16, 2816) for _ in range(8)])
    tokens = lambda b, t: (lambda: torch.randint(0, 32000, (b, t), device="cuda"))
    return {
        "mlp-train-fp32": (lambda: mlp(2048), lambda: torch.randn(4096, 2048, device="cuda"), True, torch.float32, False),
        "mlp-train-tf32": (lambda: mlp(2048), lambda: torch.randn(4096, 2048, device="cuda"), True, "tf32", False),
        "mlp-small-train-fp32": (lambda: mlp(256), lambda: torch.randn(64, 256, device="cuda"), True, torch.float32,
                                 False),
        "mlp-train-bf16": (lambda: mlp(2048), lambda: torch.randn(4096, 2048, device="cuda"), True, torch.float32, True),
        "mlp-infer-batch1-fp32": (lambda: mlp(4096), lambda: torch.randn(1, 4096, device="cuda"), False, torch.float32,
                                  False),
        "gpt-train-bf16": (gpt, tokens(8, 1024), True, torch.float32, True),
        "gpt-infer-bf16": (gpt, tokens(1, 1024), False, torch.bfloat16, False),
        "llama-train-bf16": (llama, tokens(4, 2048), True, torch.bfloat16, False),
        "convnet-train-fp32": (conv_net, lambda: torch.randn(64, 3, 224, 224, device="cuda"), True, torch.float32,
                               False),
        "convnet-infer-bf16": (conv_net, lambda: torch.randn(32, 3, 224, 224, device="cuda"), False, torch.bfloat16,
                               False),
        "norm-stack-train-fp32": (lambda: norm_stack(1024), lambda: torch.randn(16, 2048, 1024, device="cuda"), True,
                                  torch.float32, False),
    }


CASES = _cases()


def _step(model, opt, make_input, training, dtype, autocast):
    x = make_input()
    if x.is_floating_point():
        x = x.to(dtype)
    with torch.autocast("cuda", torch.bfloat16, enabled=autocast), torch.set_grad_enabled(training):
        y = model(x)
    if training:
        y.float().square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def _in_use():
    free, total = torch.cuda.mem_get_info()
    return total - free


def _kernel_totals(step, top=40):
    """The GPU kernels of one step by total time, from PyTorch's profiler: what the step really
    launched, for comparing with the kernels the model prices."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    totals = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            calls, us = totals.get(e.name, (0, 0.0))
            totals[e.name] = (calls + 1, us + e.device_time)
    rows = sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]
    return [{"kernel": k[:160], "calls": c, "us": round(us, 1)} for k, (c, us) in rows]


def run(name, timed_steps=10, kernels=False):
    make_model, make_input, training, dtype, autocast = CASES[name]
    if dtype == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        dtype = torch.float32
    torch.manual_seed(0)
    torch.empty(1, device="cuda")
    at_init = _in_use()
    model = make_model().to(device="cuda", dtype=dtype)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if training else None
    step = lambda: _step(model, opt, make_input, training, dtype, autocast)
    step()
    torch.cuda.synchronize()
    after_first = _in_use()
    for _ in range(STEPS - 1):
        step()
    torch.cuda.synchronize()
    line = {"case": name, "max_allocated": torch.cuda.max_memory_allocated(),
            "max_reserved": torch.cuda.max_memory_reserved(), "in_use": _in_use(),
            "capacity": torch.cuda.mem_get_info()[1], "in_use_at_init": at_init, "in_use_after_first_step": after_first,
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda}
    if timed_steps:
        # Each step between its own events (the GPU's time, host-bound gaps included, as
        # fgpu's events model it), and the host's wall clock over all of them.
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(timed_steps)]
        wall = time.perf_counter()
        for start, end in events:
            start.record()
            step()
            end.record()
        torch.cuda.synchronize()
        wall = time.perf_counter() - wall
        line["step_ms"] = round(statistics.median(s.elapsed_time(e) for s, e in events), 4)
        line["wall_ms_per_step"] = round(wall * 1000 / timed_steps, 4)
    if kernels:
        try:
            line["kernels"] = _kernel_totals(step)
        except Exception as e:  # the profiler is a bonus; the figures above stand without it
            line["kernels_error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    return line


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--case", choices=sorted(CASES))
    p.add_argument("--list", action="store_true")
    p.add_argument("--timed-steps", type=int, default=10, help="steps timed after the three measured (0: none)")
    p.add_argument("--kernels", action="store_true", help="add one step's GPU kernels from PyTorch's profiler")
    a = p.parse_args()
    if a.list or not a.case:
        print("\n".join(CASES))
        return
    print(json.dumps(run(a.case, a.timed_steps, a.kernels)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
