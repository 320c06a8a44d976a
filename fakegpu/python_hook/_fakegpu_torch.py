"""Real results for PyTorch on fake GPUs. Fake device memory is host memory, so every ATen
operator that has a CUDA kernel (or a CompositeExplicitAutograd one, which CUDA tensors also
reach) gets, for the CUDA dispatch key, a kernel that runs PyTorch's own CPU kernel on CPU
tensors aliasing the same bytes, once the current stream has reached that point (NCCL results
land on streams asynchronously), and then hands the operator's facts (_fakegpu_cost.py) to the
runtime's kernel model, which advances the host's modeled clock by its launch and queues its
kernels' time on that stream (_price). What stays with the CUDA kernels: allocation, views
and other metadata-only operators, and stream bookkeeping. Flash attention runs as PyTorch's CPU
flash attention (_fakegpu_attention.py), memory-efficient attention on the same CPU kernel
(_fakegpu_efficient_attention.py), FlexAttention a slice of queries at a time
(_fakegpu_flex_attention.py); cuDNN attention and cuDNN are turned off, so PyTorch takes its
other backends and native paths there. An operator with no CPU kernel fails with one
line naming it, never a silent wrong answer. FAKEGPU_TORCH_COMPUTE=shapes runs the operators on
the meta device instead (result shapes and modeled time, no values: for predicting the step time
of models too large to compute on a CPU; small control values are still computed,
_fakegpu_values.py); FAKEGPU_TORCH_COMPUTE=0 leaves PyTorch's CUDA kernels
in place (they then do not run: only copies, NCCL and cuBLAS compute). Under CUDA graph capture
an operator's CPU work becomes a node of the graph (_fakegpu_capture.py)."""

import ctypes
import os
import sys
import warnings

import _fakegpu_attention
import _fakegpu_bridge
import _fakegpu_capture
import _fakegpu_compile
import _fakegpu_cost
import _fakegpu_efficient_attention
import _fakegpu_fallbacks
import _fakegpu_flex_attention
import _fakegpu_host
import _fakegpu_memory
import _fakegpu_random
import _fakegpu_representative
import _fakegpu_steps
import _fakegpu_sync_batch_norm
import _fakegpu_values

# Imported by install(), which runs once `import torch` has finished: importing torch here would
# load it in every Python process fgpu starts.
torch = None
_bridge = None  # fakegpu's CUDA runtime (loaded by sitecustomize before torch), as _fakegpu_bridge reaches it

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

_installed = False


# Operator arguments and results are tensors, scalars, and lists, tuples and dicts of them: a
# plain walk over those is several times cheaper than torch's general pytree, and runs per operator.
def tree_map(fn, x):
    if isinstance(x, (list, tuple)):
        return type(x)(tree_map(fn, v) for v in x)
    if isinstance(x, dict):
        return {k: tree_map(fn, v) for k, v in x.items()}
    return fn(x)


# Operators given kernels of their own below (no CPU kernel computes them as CUDA would).
OWN_KERNELS = (_fakegpu_attention.NAMES + _fakegpu_efficient_attention.NAMES + _fakegpu_fallbacks.NAMES +
               _fakegpu_sync_batch_norm.NAMES)


def _takes_device(schema):
    return any(arg.name == "device" for arg in schema.arguments)


def _is_view(schema):
    """Whether the operator returns an alias of an input without writing it (a view)."""
    for ret in schema.returns:
        info = ret.alias_info
        if info is not None and not info.is_write:
            return True
    return False


class _CpuView:
    """CPU tensors over the bytes of CUDA tensors, for one operator call."""

    def __init__(self):
        self.originals = {}  # id(cpu alias) -> (cuda tensor, its storage address, the alias itself)
        self.device = None

    def alias(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
            if isinstance(t, torch.Generator) and t.device.type == "cuda":
                return None  # the CPU kernel draws from the CPU generator instead
            if isinstance(t, torch.device) and t.type == "cuda":
                self.device = self.device or t
                return torch.device("cpu")
            return t
        self.device = self.device or t.device
        storage = t.untyped_storage()
        address, nbytes = storage.data_ptr(), storage.nbytes()
        cpu = torch.empty(0, dtype=t.dtype)
        if nbytes:
            raw = torch.frombuffer((ctypes.c_char * nbytes).from_address(address), dtype=torch.uint8)
            cpu.set_(raw.untyped_storage(), t.storage_offset(), t.size(), t.stride())
        else:
            cpu = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype)
        self.originals[id(cpu)] = (t, address, cpu)
        return cpu

    def result(self, r):
        """A CPU result as the CUDA operator would have returned it: an input the operator wrote
        (in place, or an out= argument) is returned as that CUDA tensor; a new tensor is copied to
        new device memory."""
        if not isinstance(r, torch.Tensor):
            return r
        known = self.originals.get(id(r))
        if known is not None:
            cuda, address, _ = known
            if r.untyped_storage().data_ptr() != address:  # the CPU kernel resized an out= tensor
                cuda.resize_(r.size())
                _copy_into(cuda, r)
            return cuda
        return _to_device(r, self.device)


def _copy_into(cuda, cpu):
    cpu = cpu.contiguous()
    if cuda.is_contiguous() and cpu.numel():
        ctypes.memmove(cuda.data_ptr(), cpu.data_ptr(), cpu.numel() * cpu.element_size())
    elif cpu.numel():
        _CpuView().alias(cuda).copy_(cpu)


def _dense(t):
    """Whether t's elements fill its span exactly once (contiguous in some dimension order), so
    that its bytes can be copied as one block with its strides kept."""
    expected = 1
    for stride, size in sorted((st, s) for s, st in zip(t.size(), t.stride()) if s != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _to_device(cpu, device):
    if not _dense(cpu):
        cpu = cpu.contiguous()
    out = torch.empty_strided(cpu.size(), cpu.stride(), dtype=cpu.dtype, device=device)
    if cpu.numel():
        ctypes.memmove(out.data_ptr(), cpu.data_ptr(), cpu.numel() * cpu.element_size())
    return out


class _MetaView(_CpuView):
    """Shape-only stand-ins for CUDA tensors (FAKEGPU_TORCH_COMPUTE=shapes): the operator runs on
    the meta device, which computes result shapes and nothing else, and new results get device
    memory that nobody writes."""

    def alias(self, t):
        if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
            return super().alias(t)
        self.device = self.device or t.device
        meta = torch.empty(0, dtype=t.dtype, device="meta").as_strided(t.size(), t.stride(), t.storage_offset())
        self.originals[id(meta)] = (t, None, meta)
        return meta

    def result(self, r):
        if not isinstance(r, torch.Tensor):
            return r
        known = self.originals.get(id(r))
        if known is not None:
            cuda = known[0]
            if cuda.size() != r.size():  # an out= tensor the operator resized
                cuda.resize_(r.size())
            return cuda
        return torch.empty_strided(r.size(), r.stride(), dtype=r.dtype, device=self.device)


def _run(view_type, op, args, kwargs, draws=None):
    """The operator on stand-ins for its CUDA tensors, and its results as CUDA tensors; also the
    current raw stream of the operator's device. For an operator that draws random numbers,
    draws(results) is how many: it draws them from its CUDA generator (_fakegpu_random.py)."""
    if draws is not None:
        op = _fakegpu_random.Drawing(torch, op, draws, args, kwargs)
    return _run_on_stand_ins(view_type, op, args, kwargs)


def _run_on_stand_ins(view_type, op, args, kwargs):
    _fakegpu_capture.raise_failed_replay()
    view = view_type()
    stand_in_args = tree_map(view.alias, args)
    stand_in_kwargs = tree_map(view.alias, kwargs)
    if view.device is None:
        view.device = torch.device("cuda", torch.cuda.current_device())
    stream = torch._C._cuda_getCurrentRawStream(view.device.index)
    if view_type is _CpuView:
        if _fakegpu_capture.capturing(stream):
            return _run_in_graph(op, args, kwargs, view.device, stream), stream
        # Work queued on the stream (copies, collectives) must land before the CPU reads. The raw
        # stream and the runtime's own wait cost far less than torch.cuda.Stream objects; unlike
        # cudaStreamSynchronize, the wait leaves the modeled host clock alone, as the program
        # itself waited for nothing.
        _bridge.drain_stream(stream)
    with _fakegpu_host.INSIDE_KERNEL:
        out = op(*stand_in_args, **stand_in_kwargs)
    results = tree_map(view.result, out)
    if _fakegpu_values.active():
        uncomputed = _fakegpu_values.record(op, args, kwargs, results, view_type is not _MetaView)
        if uncomputed:
            _bridge.drain_stream(stream)  # writes queued before this operator land first
            for t in uncomputed:
                _fakegpu_values.zero(t)
    return results, stream


def _run_in_graph(op, args, kwargs, device, stream):
    """The operator under stream capture: results allocated now, computed by every replay."""
    shapes = _MetaView()
    shapes.device = device
    try:
        out = op(*tree_map(shapes.alias, args), **tree_map(shapes.alias, kwargs))
    except (NotImplementedError, RuntimeError) as e:
        raise RuntimeError(f"fakegpu: {op} cannot be captured in a CUDA graph: its results' shapes are not known "
                           f"before it runs ({e})") from e
    results = tree_map(shapes.result, out)

    def compute():
        view = _CpuView()
        with _fakegpu_host.INSIDE_KERNEL:
            computed = op(*tree_map(view.alias, args), **tree_map(view.alias, kwargs))
        for target, value in zip(_fakegpu_cost.tree_leaves(results), _fakegpu_cost.tree_leaves(computed)):
            if isinstance(value, torch.Tensor) and id(value) not in view.originals:  # not written in place
                _copy_into(target, value)

    _fakegpu_capture.defer(stream, str(op), compute)
    return results


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
    random = _fakegpu_random.draws_random(op._schema)

    def kernel(*args, **kwargs):
        ran = _run_shapes_only(op, name, copy, random, args, kwargs) if shapes_only else None
        if ran is None:
            draws = _fakegpu_random.elementwise_draws(torch, args) if random else None
            ran = _run(_CpuView, op, args, kwargs, draws)
        result, stream = ran
        facts = _fakegpu_cost.op_facts(torch, name, args, result)
        if facts.kind == _fakegpu_bridge.GEMM and not _fakegpu_capture.capturing(stream):
            _fakegpu_memory.before_product(stream)
        cost = _price(stream, name, facts)
        if cost.workspace_calls:
            _fakegpu_memory.library_workspaces(result, int(cost.workspace_bytes), cost.workspace_calls)
        if facts.row_alignment < 16 and not _hinted:
            _hint_misaligned(name, args, result, facts.math, facts.row_alignment)
        return result

    return kernel


def _run_shapes_only(op, name, copy, random, args, kwargs):
    """An operator in shapes mode: for real where its inputs hold computed values and it is small
    (_fakegpu_values.py), else on the meta device; (results, stream), or None where it must run on
    the CPU after all (a copy that stays real, or no meta kernel, or result shapes that depend on
    the data). Operators that return nothing (foreach and fused ones, out= lists) return None as
    results: they ran all the same."""
    if name.startswith("aten::_assert_async"):
        _fakegpu_values.check_assert(name, args)
    if copy and _real_copy(args[0], args[1]):
        if args[0].device.type == "cpu":
            _fakegpu_values.check_read(args[1], "a copy to the CPU")
        return None
    if _fakegpu_values.computable(op._schema, args, kwargs, random):
        try:
            return _run(_CpuView, op, args, kwargs)
        except Exception:  # noqa: BLE001 - values the CPU kernel refuses (an index nobody wrote): shapes only
            pass
    try:
        return _run(_MetaView, op, args, kwargs)
    except (NotImplementedError, RuntimeError):
        return None  # no meta kernel, or one whose shapes depend on the data: run it on the CPU


def _price(stream, name, facts):
    """Queues an operator's modeled time (its launch on the host, its kernels on the stream)."""
    facts.flags |= _fakegpu_host.backward_flags()
    return _bridge.record(stream, facts, name)


_hinted = False


def _hint_misaligned(name, args, result, math, alignment):
    """Says once per job (from its first rank) that a product runs slowed for its rows' alignment."""
    global _hinted
    share = _bridge.matmul_share(math, alignment)
    line = _fakegpu_cost.misalignment_hint(torch, name, args, result, alignment, share)
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


def install():
    """Registers the CPU-backed kernels for the CUDA dispatch key, once per process."""
    global _installed, torch, _bridge
    mode = os.environ.get("FAKEGPU_TORCH_COMPUTE", "1")
    if _installed or mode == "0":
        return
    if mode not in ("1", "shapes"):
        raise RuntimeError(f"fakegpu: FAKEGPU_TORCH_COMPUTE={mode!r}: expected 1 (compute on the CPU), "
                           "shapes (modeled time only) or 0 (PyTorch's kernels, which do not run)")
    _installed = True
    if mode == "shapes":
        # No values are computed, so collectives larger than the metadata programs exchange (DDP's
        # parameter check) would only move, and make the coordinator touch, bytes nobody wrote.
        os.environ.setdefault("FAKEGPU_PAYLOAD", "small")
    import torch as torch_module

    torch = torch_module
    if mode == "shapes":
        _fakegpu_values.install(torch)
    _bridge = _fakegpu_bridge.find()
    if _bridge is None:
        raise RuntimeError("fakegpu: PyTorch compute needs fakegpu's CUDA runtime, which is not loaded "
                           "(run the job under fgpu, or set FAKEGPU_TORCH_COMPUTE=0)")
    _fakegpu_host.install(torch, _bridge)
    _fakegpu_memory.install(torch, _bridge)
    _fakegpu_capture.install(_bridge)
    has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
    has_cpu_kernel = torch._C._dispatch_has_computed_kernel_for_dispatch_key  # composite kernels count
    lib = torch.library.Library("aten", "IMPL")

    def register(name, kernel):
        # Hidden from torch.compile's frame hook: when a compiled graph runs an operator, dynamo
        # would otherwise try to trace the Python kernel itself, recompiling it for every new
        # argument up to its limit and warning on every rank.
        lib.impl(name[len("aten::"):], torch.compiler.disable(kernel), "CUDA")

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
            if op is None or _is_view(op._schema):
                continue
            if explicit and not has_kernel(name, "CUDA") and _takes_device(op._schema):
                continue  # factories and _to_copy: their own kernels place the result
            if name in OWN_KERNELS:
                continue  # registered below
            kernel = _kernel(op, mode == "shapes") if has_cpu_kernel(name, "CPU") else _no_cpu_kernel(name)
            register(name, kernel)
        view_type = _MetaView if mode == "shapes" else _CpuView
        _fakegpu_attention.install(torch, register, _run, _price, view_type)
        _fakegpu_efficient_attention.install(torch, register, _run, _price, view_type)
        _fakegpu_fallbacks.install(torch, register, _run, _price, view_type)
        _fakegpu_sync_batch_norm.install(torch, register, _run, _price, view_type)
        _fakegpu_flex_attention.install(torch, _run, _price, view_type, _CpuView)
    install.library = lib  # registrations last as long as the Library object
    # PyTorch picks fused attention and cuDNN for CUDA tensors by device type, before the
    # dispatcher. Flash and memory-efficient attention have CPU twins (_fakegpu_attention.py,
    # _fakegpu_efficient_attention.py); cuDNN attention and cuDNN itself have none, and PyTorch's
    # other backends and native paths decompose into operators that do.
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.backends.cudnn.enabled = False


def install_after_torch_import():
    """Arranges for install() to run right after `import torch` completes."""
    import importlib.abc
    import importlib.machinery

    class AfterTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name != "torch":
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            load = spec.loader.exec_module

            def exec_module(module):
                load(module)
                install()
                _fakegpu_steps.install(module)
                _fakegpu_representative.install(module)
                _fakegpu_compile.install(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, AfterTorch())
