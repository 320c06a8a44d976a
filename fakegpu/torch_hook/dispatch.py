"""Real results for PyTorch on fake GPUs. Fake device memory is host memory, so every ATen
operator that has a CUDA kernel (or a CompositeExplicitAutograd one, which CUDA tensors also
reach) gets, for the CUDA dispatch key, a kernel that runs PyTorch's own CPU kernel on CPU
tensors aliasing the same bytes, once the current stream has reached that point (NCCL results
land on streams asynchronously), and then hands the operator's facts (cost.py) to the runtime's
kernel model, which advances the host's modeled clock by its launch and queues its kernels' time
on that stream (kernels.py). What stays with the CUDA kernels: allocation, views and other
metadata-only operators, and stream bookkeeping. Operators no CPU kernel computes as CUDA would
have kernels of their own (operators/: flash, memory-efficient and flex attention, sync batch
norm, a few fallbacks); cuDNN attention and cuDNN are turned off, so PyTorch takes its other
backends and native paths there. An operator with no CPU kernel fails with one line naming it,
never a silent wrong answer. In shapes mode (FAKEGPU_TORCH_COMPUTE=shapes) operators run on the
meta device instead (result shapes and modeled time, no values: for predicting the step time of
models too large to compute on a CPU; small control values are still computed, values.py). Under
CUDA graph capture an operator's CPU work becomes a node of the graph (capture.py)."""

import os
import sys
import warnings

import torch

from fakegpu.torch_hook import bridge as B
from fakegpu.torch_hook import capture, cost, host, kernels, memory, random_draws, values
from fakegpu.torch_hook.operators import attention, efficient_attention, fallbacks, flex_attention, sync_batch_norm
from fakegpu.torch_hook.stand_ins import CpuView, MetaView


# Operators whose CUDA kernels must stay: they allocate, only rearrange metadata, keep stream and
# memory bookkeeping, or (attention's backend choice) read the device's properties, none of which
# computes on element values.
KEEP_CUDA = {
    "aten::empty.memory_format", "aten::empty_strided", "aten::resize_", "aten::set_.source_Storage",
    "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor", "aten::set_",
    "aten::record_stream", "aten::is_pinned", "aten::_pin_memory", "aten::_local_scalar_dense",
    "aten::set_.source_Tensor_storage_offset", "aten::_has_same_storage_numel", "aten::is_set_to",
    "aten::_fused_sdp_choice",
    # A view in all but its schema (autograd does not track it): its own kernel makes the view, where
    # a kernel of the hook's would copy the tensor, into memory a GPU never allocates.
    "aten::_unsafe_view",
}

COMPOSITE_EXPLICIT = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")

# Operators with kernels of their own in operators/: no CPU kernel computes them as CUDA would.
OWN_KERNELS = attention.NAMES + efficient_attention.NAMES + fallbacks.NAMES + sync_batch_norm.NAMES


def factory_composite(name, schema):
    """The composite key whose kernel an operator that takes a device and has no CUDA kernel of its
    own runs (factories, _to_copy, zeros_like): that kernel places the result and runs the
    operators that compute it, which the hook prices; None for any other operator."""
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    if has_kernel(name, "CUDA") or not any(arg.name == "device" for arg in schema.arguments):
        return None
    return next((getattr(torch._C.DispatchKey, key) for key in COMPOSITE_EXPLICIT if has_kernel(name, key)), None)


# Shapes only still makes some copies real: programs exchange metadata and control values through
# the device, to and from the host and, inside a collective library, between device buffers (DDP
# checks its parameters' shapes across ranks with an all-gather that ProcessGroupNCCL copies out
# of a flat buffer). Such data is small; activations and weights are not.
REAL_COPY_BYTES = 64 << 10


def _real_copy(dst, src):
    if not isinstance(src, torch.Tensor):
        return True
    return dst.device.type == "cpu" or src.device.type == "cpu" or src.numel() * src.element_size() <= REAL_COPY_BYTES


def _kernel(op, shapes_only):
    name = op._schema.name
    copy = name == "aten::copy_"
    random = random_draws.draws_random(op._schema)
    pointwise = torch.Tag.pointwise in op.tags

    def kernel(*args, **kwargs):
        ran = _run_shapes_only(op, name, copy, random, args, kwargs) if shapes_only else None
        if ran is None:
            draws = random_draws.elementwise_draws(args) if random else None
            ran = kernels.run(op, args, kwargs, draws, CpuView)
        result, stream = ran
        facts = cost.op_facts(name, args, result, elementwise=pointwise)
        if facts.kind == B.GEMM and not capture.capturing(stream):
            memory.before_product(stream)
        priced = kernels.price(stream, name, facts)
        if priced.workspace_calls:
            memory.library_workspaces(result, int(priced.workspace_bytes), priced.workspace_calls)
        if facts.row_alignment < 16 and not _hinted:
            _hint_misaligned(name, args, result, facts.math, facts.row_alignment)
        return result

    return kernel


def _run_shapes_only(op, name, copy, random, args, kwargs):
    """An operator in shapes mode: for real where its inputs hold computed values and it is small
    (values.py), else on the meta device; (results, stream), or None where it must run on
    the CPU after all (a copy that stays real, or no meta kernel, or result shapes that depend on
    the data). Operators that return nothing (foreach and fused ones, out= lists) return None as
    results: they ran all the same."""
    if name.startswith("aten::_assert_async"):
        values.check_assert(name, args)
    if copy and _real_copy(args[0], args[1]):
        if args[0].device.type == "cpu":
            values.check_read(args[1], "a copy to the CPU")
        return None
    if values.computable(op._schema, args, kwargs, random):
        try:
            return kernels.run(op, args, kwargs, view_type=CpuView)
        except Exception:  # noqa: BLE001 - values the CPU kernel refuses (an index nobody wrote): shapes only
            pass
    try:
        return kernels.run(op, args, kwargs, view_type=MetaView)
    except (NotImplementedError, RuntimeError):
        return None  # no meta kernel, or one whose shapes depend on the data: run it on the CPU


_hinted = False


def _hint_misaligned(name, args, result, math, alignment):
    """Says once per job (from its first rank) that a product runs slowed for its rows' alignment."""
    global _hinted
    share = kernels.runtime().matmul_share(math, alignment)
    line = cost.misalignment_hint(name, args, result, alignment, share)
    if line is None:
        return
    _hinted = True
    if os.environ.get("RANK", "0") == "0":
        print(line, file=sys.stderr, flush=True)


def _no_cpu_kernel(name):
    def kernel(*args, **kwargs):
        raise NotImplementedError(f"fakegpu: {name} has no CPU kernel, so fakegpu cannot compute it "
                                  "(set FAKEGPU_TORCH_COMPUTE=0 to run without real results)")

    return kernel


def _overload(name):
    packet_name, _, overload = name[len("aten::"):].partition(".")
    packet = getattr(torch.ops.aten, packet_name, None)
    return None if packet is None else getattr(packet, overload or "default", None)


def install(shapes_only):
    """Registers the CPU-backed kernels for the CUDA dispatch key (once per process: the caller
    sees to it)."""
    if shapes_only:
        values.install()
    if not kernels.install(shapes_only):
        raise RuntimeError("fakegpu: PyTorch compute needs fakegpu's CUDA runtime, which is not loaded "
                           "(run the job under fgpu, or set FAKEGPU_TORCH_COMPUTE=0)")
    host.install()
    memory.install()
    capture.install()
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    has_cpu_kernel = torch._C._dispatch_has_computed_kernel_for_dispatch_key  # composite kernels count
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each registration replaces a CUDA kernel, and says so
        for name in torch._C._dispatch_get_all_op_names():
            if not name.startswith("aten::") or name in KEEP_CUDA:
                continue
            # CompositeExplicitAutograd kernels (copy_ among them) run for CUDA tensors too, and
            # some reach CUDA kernels through device-type stubs the dispatcher never sees.
            explicit = any(has_kernel(name, key) for key in COMPOSITE_EXPLICIT)
            if not (has_kernel(name, "CUDA") or explicit):
                continue
            op = _overload(name)
            if op is None or cost.returns_view(op._schema):
                continue
            if factory_composite(name, op._schema) is not None:
                continue  # factories and _to_copy: their own kernels place the result
            if name in OWN_KERNELS:
                continue  # registered below
            kernel = _kernel(op, shapes_only) if has_cpu_kernel(name, "CPU") else _no_cpu_kernel(name)
            kernels.register(name, kernel)
        for module in (attention, efficient_attention, fallbacks, sync_batch_norm, flex_attention):
            module.install()
    # PyTorch picks fused attention and cuDNN for CUDA tensors by device type, before the
    # dispatcher. Flash and memory-efficient attention have CPU twins (operators/attention.py,
    # operators/efficient_attention.py); cuDNN attention and cuDNN itself have none, and PyTorch's
    # other backends and native paths decompose into operators that do.
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cudnn.enabled = False
