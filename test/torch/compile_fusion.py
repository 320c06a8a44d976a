"""torch.compile's fused kernels in the modeled time (fakegpu/torch_hook/fusion.py): the same work
eager or compiled, for the report's operator table to compare.

--part pointwise: (x * 2 + 1).relu() over 2**20 floats, three times: three elementwise kernels a
  call eager, one compiled.
--part dynamic: the same over 2**18, 2**20 and 2**19 floats, compiled for dynamic shapes: each
  call priced at its own size.
--part block: a layer norm, a Linear, GELU and a Linear, forward and backward, three times."""

import argparse

import torch


def pointwise(compiled):
    x = torch.randn(1 << 20, device="cuda")

    def f(x):
        return (x * 2 + 1).relu()

    g = torch.compile(f) if compiled else f
    for _ in range(3):
        g(x)


def dynamic(compiled):
    def f(x):
        return (x * 2 + 1).relu()

    g = torch.compile(f, dynamic=True) if compiled else f
    for n in (1 << 18, 1 << 20, 1 << 19):
        g(torch.randn(n, device="cuda"))


def block(compiled):
    layers = torch.nn.Sequential(torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                 torch.nn.Linear(4096, 1024)).cuda()
    model = torch.compile(layers) if compiled else layers
    x = torch.randn(8, 512, 1024, device="cuda", requires_grad=True)
    for _ in range(3):
        model(x).sum().backward()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--part", choices=("pointwise", "dynamic", "block"), required=True)
    p.add_argument("--compiled", action="store_true")
    args = p.parse_args()
    {"pointwise": pointwise, "dynamic": dynamic, "block": block}[args.part](args.compiled)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
