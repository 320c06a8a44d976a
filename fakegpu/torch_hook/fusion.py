"""What torch.compile's inductor makes of a graph, for the modeled time: its elementwise operators,
reductions, norms and softmaxes fused into a few generated kernels, each reading what it needs from
outside once and writing once what the rest of the graph uses; matrix products, convolutions,
attention and collectives stay library calls. Graphs still run operator by operator here (results
are the eager program's): the operators of a fused kernel are computed but not priced one by one,
and the kernel is priced once, as memory-bound work over those bytes, when the graph reaches the
first operator that needs its results from outside it (or ends).

How operators group, as inductor's scheduler fuses along the data (simplified): walking the graph
in order, an elementwise or reduction operator joins the open kernel whose values it reads (through
views; reading two merges them), or opens one; a library call closes the open kernels it reads
from, and the graph's end closes the rest. A kernel holds a loop for each reduction in it (a norm,
a softmax), so that many kernels launch, at least one.

Launches: a compiled graph's kernels are launched by its Python wrapper, so each costs what an
operator launched from Python costs, in a backward graph too (autograd's engine runs the whole
backward graph as one node)."""

import operator
import threading

import torch

from fakegpu.torch_hook import bridge as B
from fakegpu.torch_hook import cost

# Operators inductor computes in its own generated kernels besides those PyTorch tags pointwise:
# reductions and the row-wise operators it decomposes into them, and data movement.
REDUCING = frozenset(cost.REDUCTIONS + cost.NORMS + cost.NORM_BACKWARDS + cost.SOFTMAXES + cost.SOFTMAX_BACKWARDS)
MOVING = frozenset(("aten::clone", "aten::copy_", "aten::copy", "aten::_to_copy", "aten::cat", "aten::fill_",
                    "aten::fill", "aten::zero_", "aten::full", "aten::zeros", "aten::ones", "aten::full_like",
                    "aten::zeros_like", "aten::ones_like", "aten::embedding", "aten::native_dropout",
                    "aten::native_dropout_backward", "aten::constant_pad_nd", "aten::slice_scatter",
                    "aten::select_scatter", "aten::masked_fill"))
NAME = "torch.compile: fused kernel"

_state = threading.local()  # absorbing: the operators of a fused kernel run; compiled: a graph runs


def absorbing():
    """Whether the running operator belongs to a fused kernel, priced with it."""
    return getattr(_state, "absorbing", False)


def in_compiled_graph():
    return getattr(_state, "compiled", 0) > 0


def _base(target):
    return cost._base(target.name()) if isinstance(target, torch._ops.OpOverload) else ""


def _is_view(node):
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return True
    schema = getattr(node.target, "_schema", None)
    return schema is not None and any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _fusible(node):
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    return torch.Tag.pointwise in node.target.tags or _base(node.target) in REDUCING | MOVING


def _nbytes(value):
    return cost.tensor_bytes([t for t in cost.tree_leaves(value) if isinstance(t, torch.Tensor)])


def _source(node):
    """The node whose value `node` is a view of (itself if none): where its bytes are written."""
    while _is_view(node) and node.args and isinstance(node.args[0], torch.fx.Node):
        node = node.args[0]
    return node


class Kernel:
    """One fused kernel: its operators' nodes and what it reads and writes from outside."""

    def __init__(self):
        self.nodes = []
        self.made = set()    # nodes whose values the kernel computes
        self.reads = {}      # source node outside the kernel -> bytes read of it
        self.loops = 0       # reductions: each its own loop, and kernel
        self.nbytes = None   # what it reads and writes, once planned

    def add(self, node):
        self.nodes.append(node)
        self.made.add(node)
        if _base(node.target) in REDUCING:
            self.loops += 1
        for arg in node.all_input_nodes:
            source = _source(arg)
            if source not in self.made:
                read = _nbytes(arg.meta.get("val"))
                self.reads[source] = max(self.reads.get(source, 0.0), min(read, _nbytes(source.meta.get("val"))))

    def reads_from(self, node):
        return any(_source(arg) in self.made for arg in node.all_input_nodes)

    def merge(self, other):
        """Takes in another open kernel, one this one's next operator also reads from."""
        self.nodes += other.nodes
        self.made |= other.made
        for source, nbytes in other.reads.items():
            self.reads[source] = max(self.reads.get(source, 0.0), nbytes)
        self.reads = {source: nbytes for source, nbytes in self.reads.items() if source not in self.made}
        self.loops += other.loops

    def facts(self):
        if self.nbytes is None:  # once the graph is planned, the same at every run
            self.nbytes = sum(self.reads.values()) + sum(_written(n, self.made) for n in self.nodes)
        return B.facts(B.MEMORY, nbytes=self.nbytes, dims=(max(1, self.loops),))


def _escapes(node, made):
    """Whether node's value is read (directly or through views) outside the kernel."""
    return any(_escapes(u, made) if _is_view(u) else u not in made for u in node.users)


def _written(node, made):
    """The bytes of node's value the kernel writes to memory: what the rest of the graph reads (of
    an operator with several results, those read), or all of it where nothing reads it (a copy_
    into a graph input)."""
    if not node.users:
        return _nbytes(node.meta.get("val"))
    if isinstance(node.meta.get("val"), (tuple, list)):
        return sum(_nbytes(u.meta.get("val")) for u in node.users if _escapes(u, made))
    return _nbytes(node.meta.get("val")) if _escapes(node, made) else 0.0


def plan(graph):
    """(the nodes of fused kernels, node -> the kernels to price before it runs, the kernels to price
    at the end); or None where the graph lacks what fusing needs (each node's example value)."""
    members, close_before, open_kernels = set(), {}, []
    for node in graph.nodes:
        if node.op == "call_function" and "val" not in node.meta:
            return None
        if _is_view(node) or node.op in ("placeholder", "get_attr"):
            continue
        if node.op == "call_function" and _fusible(node):
            readers = [k for k in open_kernels if k.reads_from(node)]
            kernel = readers[0] if readers else Kernel()
            for other in readers[1:]:
                kernel.merge(other)
                open_kernels.remove(other)
            if not readers:
                open_kernels.append(kernel)
            kernel.add(node)
            members.add(node)
            continue
        closing = [k for k in open_kernels if node.op == "output" or k.reads_from(node)]
        if closing:
            close_before[node] = closing
            open_kernels = [k for k in open_kernels if k not in closing]
    return members, close_before, open_kernels


class FusedRun(torch.fx.Interpreter):
    """Runs a graph operator by operator, pricing its fused kernels once each."""

    def __init__(self, gm, fused):
        super().__init__(gm)
        self.members, self.close_before, self.ended = fused

    def run_node(self, node):
        for kernel in self.close_before.get(node, ()):
            _price(kernel)
        _state.absorbing = node in self.members
        try:
            return super().run_node(node)
        finally:
            _state.absorbing = False


def _price(kernel):
    from fakegpu.torch_hook import kernels  # kernels imports this module
    stream = torch._C._cuda_getCurrentRawStream(torch.cuda.current_device())
    kernels.price(stream, NAME, kernel.facts())


def compiler(gm, example_inputs):
    """aot_autograd's compiler for a forward or backward graph: a boxed callable."""
    fused = plan(gm.graph)

    def run(args):
        _state.compiled = getattr(_state, "compiled", 0) + 1
        try:
            if fused is None:
                return torch.fx.Interpreter(gm).boxed_run(args)
            interpreter = FusedRun(gm, fused)
            out = interpreter.boxed_run(args)
            for kernel in interpreter.ended:
                _price(kernel)
            return out
        finally:
            _state.compiled -= 1

    run._boxed_call = True
    return run
