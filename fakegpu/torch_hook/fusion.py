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
from typing import NamedTuple

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
    return schema is not None and cost.returns_view(schema)


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
    """One fused kernel: its operators' nodes and what it reads and writes from outside. Its bytes
    are counted from the values a run computes, so a graph compiled for dynamic shapes is priced at
    each run's sizes."""

    def __init__(self):
        self.nodes = []
        self.made = set()    # nodes whose values the kernel computes
        self.reads = {}      # source node outside the kernel -> the nodes (it or views of it) read
        self.writes = []     # (node, None: all of its value, or the indices of its results read outside)
        self.loops = 0       # reductions: each its own loop, and kernel

    def add(self, node):
        self.nodes.append(node)
        self.made.add(node)
        if _base(node.target) in REDUCING:
            self.loops += 1
        for arg in node.all_input_nodes:
            source = _source(arg)
            if source not in self.made:
                self.reads.setdefault(source, set()).add(arg)

    def reads_from(self, node):
        return any(_source(arg) in self.made for arg in node.all_input_nodes)

    def merge(self, other):
        """Takes in another open kernel, one this one's next operator also reads from."""
        self.nodes += other.nodes
        self.made |= other.made
        for source, read in other.reads.items():
            self.reads.setdefault(source, set()).update(read)
        self.reads = {source: read for source, read in self.reads.items() if source not in self.made}
        self.loops += other.loops

    def settle(self):
        """What it writes, once the graph is planned."""
        self.writes = [(n, part) for n in self.nodes if (part := _written(n, self.made)) is not False]

    def facts(self, sizes):
        """Its facts, from sizes: node -> (bytes of its value, bytes of each of its results)."""
        read = sum(max(min(sizes[r][0], sizes[source][0]) for r in nodes) for source, nodes in self.reads.items())
        written = sum(sizes[n][0] if part is None else sum(sizes[n][1][i] for i in part) for n, part in self.writes)
        return B.facts(B.MEMORY, nbytes=float(read + written), dims=(max(1, self.loops),))


def _escapes(node, made):
    """Whether node's value is read (directly or through views) outside the kernel."""
    return any(_escapes(u, made) if _is_view(u) else u not in made for u in node.users)


def _written(node, made):
    """What of node's value the kernel writes to memory: None for all of it (the rest of the graph
    reads it, or nothing does: a copy_ into a graph input), the indices of the results read of an
    operator with several, or False for nothing."""
    if not node.users:
        return None
    if all(u.target is operator.getitem for u in node.users):  # several results, each taken apart
        return [u.args[1] for u in node.users if _escapes(u, made)] or False
    return None if _escapes(node, made) else False


def sizes_of(value):
    """(bytes of a node's value, bytes of each of its results)."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    each = [_nbytes(v) for v in items]
    return sum(each), each


class Plan(NamedTuple):
    members: set          # the nodes of fused kernels
    close_before: dict    # node -> the kernels to price before it runs
    ended: list           # the kernels to price at the end
    placeholders: list    # the graph's inputs, in order


def plan(graph):
    """Where a graph's fused kernels are and when each is priced."""
    members, close_before, open_kernels = set(), {}, []
    for node in graph.nodes:
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
    for kernel in open_kernels + [k for ks in close_before.values() for k in ks]:
        kernel.settle()
    return Plan(members, close_before, open_kernels, [n for n in graph.nodes if n.op == "placeholder"])


class FusedRun(torch.fx.Interpreter):
    """Runs a graph operator by operator, pricing its fused kernels once each."""

    def __init__(self, gm, fused):
        super().__init__(gm)
        self.plan = fused
        self.sizes = {}

    def boxed_run(self, args_list):
        # The graph's inputs go straight into its environment, not through run_node.
        self.sizes.update((n, sizes_of(a)) for n, a in zip(self.plan.placeholders, args_list))
        return super().boxed_run(args_list)

    def run_node(self, node):
        for kernel in self.plan.close_before.get(node, ()):
            self.price(kernel)
        _state.absorbing = node in self.plan.members
        try:
            value = super().run_node(node)
        finally:
            _state.absorbing = False
        self.sizes[node] = sizes_of(value)
        return value

    def price(self, kernel):
        from fakegpu.torch_hook import kernels  # kernels imports this module
        stream = torch._C._cuda_getCurrentRawStream(torch.cuda.current_device())
        kernels.price(stream, NAME, kernel.facts(self.sizes))


def compiler(gm, example_inputs):
    """aot_autograd's compiler for a forward or backward graph: a boxed callable."""
    fused = plan(gm.graph)

    def run(args):
        _state.compiled = getattr(_state, "compiled", 0) + 1
        try:
            interpreter = FusedRun(gm, fused)
            out = interpreter.boxed_run(args)
            for kernel in fused.ended:
                interpreter.price(kernel)
            return out
        finally:
            _state.compiled -= 1

    run._boxed_call = True
    return run
