"""torch.compile on fake GPUs. Inductor, torch.compile's default backend, turns the captured
graphs into Triton kernels, which need a GPU to be compiled and run. A compile that asks for
inductor runs its graphs through AOTAutograd and PyTorch's own operators instead (the aot_eager
backend): the same graph capture, graph breaks and autograd as under inductor, every operator
computed by fakegpu's kernels and modeled one by one. Results are those of the eager program;
the modeled time has no fusion, so a compiled step is predicted as its eager form. Inductor's
own settings (mode, options) have nothing to act on and are dropped. Other backends are the
program's choice and pass through."""

import functools
import os
import sys

import torch

_said = False


def _say_once(mode, options):
    global _said
    if _said:
        return
    _said = True
    if os.environ.get("RANK", "0") != "0":
        return
    dropped = ", ".join(f"{k}={v!r}" for k, v in (("mode", mode), ("options", options)) if v is not None)
    print("fakegpu: torch.compile runs its graphs with the aot_eager backend here (inductor's Triton kernels "
          "need a GPU): results are exact, and the modeled time counts every operator unfused"
          + (f"; inductor's {dropped} dropped" if dropped else "") + " (said once)", file=sys.stderr, flush=True)


def install():
    """Replaces torch.compile (and so nn.Module.compile, which calls it) once per process."""
    original = torch.compile
    if getattr(original, "_fakegpu", False):
        return

    @functools.wraps(original)
    def compile(model=None, **kwargs):
        if kwargs.get("backend", "inductor") == "inductor":
            _say_once(kwargs.pop("mode", None), kwargs.pop("options", None))
            kwargs["backend"] = "aot_eager"
        return original(model, **kwargs)

    compile._fakegpu = True
    torch.compile = compile
