"""fgpu --measure-kernels: each ATen operator a rank runs on the real GPU (hybrid mode) timed with
CUDA events, for a later simulate run to price operators at (measured.py).

How an operator is timed, so that neither the host nor the other ranks sharing the GPU distort it:
1. the rank waits for what its current stream holds (never while holding the lock below: that
   work may be a collective waiting for a peer);
2. it takes the GPU's lock (a file lock every rank of the machine shares, and a thread lock for
   autograd's threads), so no other rank's operator runs on the GPU meanwhile;
3. it queues a short spin kernel, then the start event, the operator and the end event: the
   operator's kernels are queued while the spin runs, so the events time the GPU's work, not
   the host's launching;
4. it waits for the end event and lets go of the lock.
The time between the events is the operator's; the median of its calls, per name and facts, goes
into the table. Timing serialises every operator of every rank on the GPU: the run is slower,
never different in its results.

Not timed: views and other operators that launch nothing, and collectives (the simulator models
them), operators on tensor subclasses, and a compiled graph's kernels (inductor's, which are not
ATen operators). A subclass's operators on its plain tensors run inside it, where this mode does
not reach: a DTensor's (tensor parallelism's) local products go untimed, as does work inside
ProcessGroupNCCL's own operators. The simulate run prices what was not timed with the kernel
model. (A mode that gives way to a subclass, returning NotImplemented, would see those operators,
but DTensor's dispatch, in C++, then fails.)"""

import atexit
import fcntl
import json
import os
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fakegpu.torch_hook import bridge as B
from fakegpu.torch_hook import cost, measured
from fakegpu.torch_hook.dispatch import KEEP_CUDA, factory_composite
from fakegpu.torch_hook.operators import attention, efficient_attention, fallbacks

SPIN_CYCLES = 400_000  # about 200 us on a GPU at 2 GHz: longer than launching an operator's kernels
MAX_SAMPLES = 32  # per operator and rank: the median needs no more


def _named(func, args, kwargs):
    """The operator's arguments by their schema's names."""
    named = {a.name: v for a, v in zip(func._schema.arguments, args)}
    named.update(kwargs)
    return named


def facts_of(func, name, args, kwargs, result):
    """The facts the simulate run's hook computes for this operator (dispatch.py and operators/),
    so that both runs key it alike."""
    if name in (attention.FORWARD, efficient_attention.FORWARD):
        a = _named(func, args, kwargs)
        return cost.attention_forward_facts(a["query"], a["key"], a["value"], result[0], bool(a.get("is_causal")),
                                            a.get("attn_bias"))
    if name in (attention.BACKWARD, efficient_attention.BACKWARD):
        a = _named(func, args, kwargs)
        return cost.attention_backward_facts(a.get("grad_out", a.get("grad_out_")), a["query"], a["key"], a["value"],
                                             a["out"], result[:4], bool(a.get("is_causal")))
    elementwise = torch.Tag.pointwise in func.tags and name not in fallbacks.NAMES
    return cost.op_facts(name, args, result, elementwise=elementwise)


_composites = {}  # operator -> dispatch.factory_composite's answer, asked once


def _decomposed_by(func):
    if func not in _composites:
        _composites[func] = factory_composite(func.name(), func._schema)
    return _composites[func]


PLAIN = (torch.Tensor, torch.nn.Parameter)


class KernelTimer(TorchDispatchMode):
    def __init__(self, lock_path):
        super().__init__()
        self.lock_file = open(lock_path, "a")  # noqa: SIM115 - held for the process's life
        self.thread_lock = threading.Lock()
        self.samples = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name
        composite = _decomposed_by(func)
        if composite is not None:  # time the operators it runs, as the simulate run prices them (dispatch.py)
            with self:
                return func._op_dk(composite, *args, **kwargs)
        tensors = [t for t in cost.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        # Not timed, as the simulate run's hook does not price them: operators that launch nothing or
        # only allocate (dispatch.KEEP_CUDA), views, and what is not ATen's (collectives).
        if (any(type(t) not in PLAIN for t in tensors) or func.namespace != "aten" or func.name() in KEEP_CUDA
                or cost.returns_view(func._schema) or not any(t.device.type == "cuda" for t in tensors)):
            return func(*args, **kwargs)
        device = next(t.device for t in tensors if t.device.type == "cuda")
        with torch.cuda.device(device):  # the operator's device, where its kernels go
            return self._timed(func, name, args, kwargs)

    def _timed(self, func, name, args, kwargs):
        stream = torch.cuda.current_stream()
        if stream.is_capturing():  # a CUDA graph's capture: nothing runs now
            return func(*args, **kwargs)
        stream.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with self.thread_lock:
            fcntl.flock(self.lock_file, fcntl.LOCK_EX)
            try:
                torch.cuda._sleep(SPIN_CYCLES)
                start.record(stream)
                result = func(*args, **kwargs)
                end.record(stream)
                end.synchronize()
            finally:
                fcntl.flock(self.lock_file, fcntl.LOCK_UN)
        try:
            facts = facts_of(func, name, args, kwargs, result)
        except Exception:  # noqa: BLE001 - no facts (a result that is not a tensor): nothing to key it by
            return result
        if facts.kind == B.NO_KERNEL:
            return result
        calls = self.samples.setdefault(measured.key(name, facts), [])
        if len(calls) < MAX_SAMPLES:
            calls.append(start.elapsed_time(end) * 1e3)
        return result

    def write(self, folder, rank):
        """The samples, and the GPU's name, into a file of the folder fgpu gathers them from."""
        if not self.samples:
            return
        device = torch.cuda.get_device_name(torch.cuda.current_device())
        with open(os.path.join(folder, f"rank{rank}-{os.getpid()}.json"), "w") as f:
            json.dump({"device": device, "samples": self.samples}, f)


def install():
    """Times this rank's operators from now on, when FAKEGPU_MEASURE_KERNELS names the folder
    fgpu gathers the ranks' samples in; they are written there when the process ends."""
    folder = os.environ.get("FAKEGPU_MEASURE_KERNELS")
    if not folder:
        return
    timer = KernelTimer(os.path.join(folder, "gpu.lock"))
    timer.__enter__()  # for the process's life; autograd's threads inherit the mode
    atexit.register(timer.write, folder, os.environ.get("RANK", "0"))
