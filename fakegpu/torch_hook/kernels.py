"""What every CUDA kernel of the hook does: run its operator on stand-ins for the CUDA tensors
(stand_ins.py) once the stream has reached it, price it with the runtime's kernel model, and be
registered for PyTorch's CUDA dispatch key. dispatch.py registers one such kernel per ATen
operator; operators/ holds the operators that need kernels of their own."""

import ctypes

import torch

from fakegpu.torch_hook import bridge as B
from fakegpu.torch_hook import capture, cost, fusion, host, measured, random_draws, values
from fakegpu.torch_hook.stand_ins import CpuView, FrozenView, MetaView, copy_into, freeze, tree_map

_bridge = None  # fakegpu's CUDA runtime (loaded by sitecustomize before torch)
_library = None  # the registrations last as long as this torch.library.Library
_view = CpuView  # the mode's stand-ins: MetaView in shapes mode


def install(shapes_only):
    """Binds the runtime; False when the loaded CUDA runtime is not fakegpu's."""
    global _bridge, _library, _view
    _bridge = B.find()
    if _bridge is None:
        return False
    _library = torch.library.Library("aten", "IMPL")
    _view = MetaView if shapes_only else CpuView
    measured.install()
    return True


def runtime():
    return _bridge


def register(name, kernel):
    """Makes kernel the CUDA kernel of ATen operator `name` ("aten::..."). Hidden from
    torch.compile's frame hook: when a compiled graph runs an operator, dynamo would otherwise try
    to trace the Python kernel itself, recompiling it for every new argument up to its limit and
    warning on every rank."""
    _library.impl(name[len("aten::"):], torch.compiler.disable(kernel), "CUDA")


def run(op, args, kwargs, draws=None, view_type=None):
    """The operator on stand-ins for its CUDA tensors (the mode's, unless view_type says), and its
    results as CUDA tensors; also the current raw stream of the operator's device. For an operator
    that draws random numbers, draws(results) is how many: it draws them from its CUDA generator
    (random_draws.py)."""
    if draws is not None:
        op = random_draws.Drawing(op, draws, args, kwargs)
    view_type = view_type or _view
    capture.raise_failed_replay()
    view = view_type()
    stand_in_args = tree_map(view.alias, args)
    stand_in_kwargs = tree_map(view.alias, kwargs)
    if view.device is None:
        view.device = torch.device("cuda", torch.cuda.current_device())
    stream = torch._C._cuda_getCurrentRawStream(view.device.index)
    if view_type is CpuView:
        if capture.capturing(stream):
            return _run_in_graph(op, args, kwargs, view.device, stream), stream
        # Work queued on the stream (copies, collectives) must land before the CPU reads. The raw
        # stream and the runtime's own wait cost far less than torch.cuda.Stream objects; unlike
        # cudaStreamSynchronize, the wait leaves the modeled host clock alone, as the program
        # itself waited for nothing.
        _bridge.drain_stream(stream)
    with host.INSIDE_KERNEL:
        out = op(*stand_in_args, **stand_in_kwargs)
    results = tree_map(view.result, out)
    if values.active():
        uncomputed = values.record(op, args, kwargs, results, view_type is not MetaView)
        picks = values.spread_picks(op, args, kwargs, results) if view_type is MetaView else []
        uncomputed = [t for t in uncomputed if all(t is not p for p, _ in picks)]
        if uncomputed or picks:
            _write_values(stream, op, uncomputed, picks)
    return results, stream


def _write_values(stream, op, zeroed, picks):
    """Zeros over small values shapes mode did not compute, and the picks it spread (values.py),
    in stream order: at once where the stream runs, at every replay of a CUDA graph it captures."""
    spans = [(t.data_ptr(), values.span_bytes(t)) for t in zeroed]

    def write():
        for address, nbytes in spans:
            if nbytes:
                ctypes.memset(address, 0, nbytes)
        for cuda, spread in picks:
            copy_into(cuda, spread)

    if capture.capturing(stream):
        capture.defer(stream, f"{op} (values shapes mode does not compute)", write)
    else:
        _bridge.drain_stream(stream)  # writes queued before this operator land first
        write()


def _run_in_graph(op, args, kwargs, device, stream):
    """The operator under stream capture: results allocated now, computed by every replay, in the
    memory its tensors had now (stand_ins.Frozen)."""
    shapes = MetaView()
    shapes.device = device
    try:
        out = op(*tree_map(shapes.alias, args), **tree_map(shapes.alias, kwargs))
    except (NotImplementedError, RuntimeError) as e:
        raise RuntimeError(f"fakegpu: {op} cannot be captured in a CUDA graph: its results' shapes are not known "
                           f"before it runs ({e})") from e
    results = tree_map(shapes.result, out)
    frozen_args, frozen_kwargs = tree_map(freeze, args), tree_map(freeze, kwargs)
    frozen_results = tree_map(freeze, results)

    def compute():
        view = FrozenView()
        with host.INSIDE_KERNEL:
            computed = op(*tree_map(view.alias, frozen_args), **tree_map(view.alias, frozen_kwargs))
        for target, value in zip(cost.tree_leaves(frozen_results), cost.tree_leaves(computed)):
            if isinstance(value, torch.Tensor) and id(value) not in view.originals:  # not written in place
                target.cpu().copy_(value)

    capture.defer(stream, str(op), compute)
    return results


def price(stream, name, facts):
    """Queues an operator's modeled time (its launch on the host, its kernels on the stream) and
    returns its OpCost; nothing for an operator of a compiled graph's fused kernel, which is
    priced once for them all (fusion.py)."""
    if fusion.absorbing():
        return B.OpCost()
    table_key = measured.key(name, facts) if measured.active() else None
    flags = host.backward_flags()
    if fusion.in_compiled_graph():  # launched by the graph's wrapper, not one by one by autograd's engine
        flags &= ~B.IN_BACKWARD
    facts.flags |= flags
    if table_key is not None:
        return measured.record(_bridge, stream, facts, name, table_key)
    return _bridge.record(stream, facts, name)
