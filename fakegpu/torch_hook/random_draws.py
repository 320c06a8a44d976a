"""Random operators on fake GPUs draw from their CUDA generator's state, as on a GPU.

A CUDA generator is a seed and an offset: each random kernel takes the numbers at the current
offset and moves the offset past them. Programs lean on that: torch.cuda.manual_seed and
get_rng_state/set_rng_state replay dropout masks (activation checkpointing recomputes a layer so),
DTensor's random ops move the offset to each shard's place so that shards differ and replicas
agree, and a CPU data pipeline seeded by torch.manual_seed must not shift when the model draws on
the GPU. PyTorch's CPU kernels draw from the CPU generator instead, so for each random operator
the CPU generator is seeded from the CUDA generator's (seed, offset), the CUDA offset moves past
the operator's draws, and the CPU generator gets its own state back. The numbers differ from a
GPU's (Philox), the discipline is the same."""

import contextlib

import torch

from fakegpu.torch_hook import cost

# Operators with a CUDA kernel that draw random numbers without a generator argument.
_WITHOUT_GENERATOR_ARGUMENT = {"aten::native_dropout"}

_MASK = (1 << 64) - 1


def draws_random(schema):
    """Whether an operator draws random numbers."""
    return schema.name in _WITHOUT_GENERATOR_ARGUMENT or any("Generator" in str(a.type) for a in schema.arguments)


def _mix(seed, offset):
    """One CPU seed per (seed, offset): splitmix64 of the pair."""
    x = (seed + (offset + 1) * 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def _source(args, kwargs):
    """The CUDA generator an operator draws from: the one passed, or its device's default."""
    values = list(args) + list(kwargs.values())
    for v in values:
        if isinstance(v, torch.Generator) and v.device.type == "cuda":
            return v
    index = next((v.device.index for v in values if isinstance(v, torch.Tensor) and v.is_cuda), None)
    return torch.cuda.default_generators[torch.cuda.current_device() if index is None else index]


def elementwise_draws(args):
    """How many numbers an operator over args draws, as a function of its results: one per
    element of its largest tensor, as an elementwise random kernel does."""

    def draws(results):
        values = list(args) + cost.tree_leaves(results)
        return max((v.numel() for v in values if isinstance(v, torch.Tensor)), default=1)

    return draws


class Drawing:
    """A random operator's CPU work, drawing from its CUDA generator when it runs: at the call, or
    at each replay of a CUDA graph that captured it (a replay draws afresh and moves the
    generator on, as a GPU's does; while the graph is captured, the generator stays as it is).
    draws(results) is how many numbers the operator drew."""

    def __init__(self, op, draws, args, kwargs):
        self.op, self.draws, self.args, self.kwargs = op, draws, args, kwargs

    def __call__(self, *args, **kwargs):
        with drawing_from_cuda(self.args, self.kwargs) as drawn:
            results = self.op(*args, **kwargs)
            drawn(self.draws(results))
        return results

    def __str__(self):
        return str(self.op)


@contextlib.contextmanager
def drawing_from_cuda(args, kwargs):
    """Runs the body with the CPU generator standing in for the operator's CUDA generator; yields a
    function the caller gives the count of numbers drawn, which moves the CUDA offset past them
    (CUDA's kernels reserve them in fours). Under stream capture the body only computes shapes and
    the generator, which CUDA then locks, is left alone."""
    if torch.cuda.is_current_stream_capturing():
        yield lambda count: None
        return
    cuda = _source(args, kwargs)
    seed, offset = cuda.initial_seed(), cuda.get_offset()
    cpu = torch.default_generator
    saved = cpu.get_state()
    cpu.manual_seed(_mix(seed, offset))
    try:
        yield lambda count: cuda.set_offset(offset + 4 * ((count + 3) // 4))
    finally:
        cpu.set_state(saved)
