"""torch.compile on fake GPUs. Inductor, torch.compile's default backend, turns the captured
graphs into Triton kernels, which need a GPU to be compiled and run. A compile that asks for
inductor runs its graphs through AOTAutograd (as the aot_eager backend does: the same graph
capture, graph breaks, partitioning and autograd as under inductor) and then operator by operator,
every operator computed by fakegpu's kernels, so results are those of the eager program. The
modeled time is inductor's: its elementwise operators, reductions and norms fused into generated
kernels, each priced once (fusion.py). Inductor's own settings (mode, options) have nothing to act
on and are dropped. Other backends are the program's choice and pass through."""

import functools
import os
import sys

import torch

from fakegpu.torch_hook import fusion

_said = False


def _say_once(mode, options):
    global _said
    if _said:
        return
    _said = True
    if os.environ.get("RANK", "0") != "0":
        return
    dropped = ", ".join(f"{k}={v!r}" for k, v in (("mode", mode), ("options", options)) if v is not None)
    print("fakegpu: torch.compile runs its graphs operator by operator here (inductor's Triton kernels need a "
          "GPU): results are exact, and the modeled time is that of inductor's fused kernels"
          + (f"; inductor's {dropped} dropped" if dropped else "") + " (said once)", file=sys.stderr, flush=True)


def _fused_backend(gm, example_inputs, **kwargs):
    """aot_eager's capture and partitioning, its graphs run by fusion.compiler."""
    from torch._dynamo.backends.debugging import aot_eager
    return aot_eager(gm, example_inputs, fw_compiler=fusion.compiler, bw_compiler=fusion.compiler, **kwargs)


def install():
    """Replaces torch.compile (and so nn.Module.compile, which calls it) once per process."""
    original = torch.compile
    if getattr(original, "_fakegpu", False):
        return

    @functools.wraps(original)
    def compile(model=None, **kwargs):
        if kwargs.get("backend", "inductor") == "inductor":
            _say_once(kwargs.pop("mode", None), kwargs.pop("options", None))
            kwargs["backend"] = _fused_backend
        return original(model, **kwargs)

    compile._fakegpu = True
    torch.compile = compile
