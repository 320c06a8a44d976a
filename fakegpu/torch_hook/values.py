"""Which fake device memory holds computed values in shapes mode (FAKEGPU_TORCH_COMPUTE=shapes).

Shapes mode runs operators on the meta device, so their results hold no values. Programs still
compute small control values on the GPU and act on them: positions and masks from a batch the
data loader copied in, `arange`, `cumsum` over sequence lengths, the sizes an all_gather_object
exchanges, and checks such as `torch._assert_async(torch.all(positions < n))`. So an operator runs
for real (on the CPU, as in compute mode) when every tensor it reads holds computed values and its
tensors are small (COMPUTE_BYTES in all); what it writes then holds computed values too.

Kept per storage, the unit PyTorch's views share: a storage an operator wrote without computing is
marked with where its values came from (the operator that first left them uncomputed, and why), and
the mark goes with the storage's Python object. Memory nobody marked holds what its writer put
there: data copied from the host, NCCL's results, or, as on a GPU, whatever fresh memory held.
A small uncomputed value holds zeros (the caller writes them, see record), so that what a program
decides from it (a rejection loop's `mask.any()`, a flag it all-reduces) is the same on every rank
and in every run, however the value travels. Picks out of uncomputed values (a router's `topk` of
experts) are spread evenly instead (spread_picks): a mixture of experts then sends every expert
the same share of tokens, as a balanced router does, and sizes its all-to-all from that. Reading
a marked value on the host says so once; asserting on one stops with a message naming its
origin, never the program's own assertion about values nobody computed."""

import os
import sys
import weakref

import torch

from fakegpu.torch_hook import cost, random_draws

# Operators this small (every CUDA tensor they take or make, in bytes) run for real when their
# inputs hold values: index and mask work is far below it, activations and weights far above.
COMPUTE_BYTES = 1 << 20
# Operators on integer and boolean tensors alone (index and mask work) run for real up to this: a
# mixture of experts' map of tokens to experts is a few MiB, and the sizes of its all-to-all and
# expert products are counted from it.
INDEX_BYTES = 16 << 20

# Operators that overwrite `self` without reading it.
_OVERWRITE_SELF = {"aten::fill_", "aten::zero_", "aten::copy_"}

_active = False
_marks = {}  # id(storage) -> (weak reference to the storage, where its values came from)
_roles_by_schema = {}  # id(schema) -> (schema, _roles(schema))
_said = set()  # the once-a-process notices already given: "read", "spread"


def install():
    """Turns the bookkeeping on (shapes mode only: in compute mode every value is computed), and
    has the host's reads of one value (`.item()`, `bool()`, `float()`, `int()`) checked. Copies to
    the CPU are checked by the copy kernel."""
    global _active
    _active = True
    for name, how in (("item", ".item()"), ("__bool__", "bool()"), ("__float__", "float()"), ("__int__", "int()")):
        setattr(torch.Tensor, name, _checking_read(getattr(torch.Tensor, name), how))


def _checking_read(read, how):
    def checked(self, *args):
        if "read" not in _said:
            check_read(self, how)
        return read(self, *args)

    checked.__name__, checked.__doc__ = read.__name__, read.__doc__
    return checked


def active():
    return _active


def _cuda_tensors(x):
    return [t for t in cost.tree_leaves(x) if isinstance(t, torch.Tensor) and t.device.type == "cuda"]


def origin(t):
    """Where t's values came from when shapes mode did not compute them; None when they are
    computed (or t is not a CUDA tensor)."""
    if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
        return None
    mark = _marks.get(id(t.untyped_storage()))
    return None if mark is None else mark[1]


def _mark(t, where):
    storage = t.untyped_storage()
    key = id(storage)
    _marks[key] = (weakref.ref(storage, lambda _, key=key: _marks.pop(key, None)), where)


def _spans_storage(t):
    """Whether writing t writes every byte of its storage."""
    nbytes = t.numel() * t.element_size()
    return t.is_contiguous() and t.storage_offset() == 0 and nbytes == t.untyped_storage().nbytes()


def _roles(schema):
    """Per argument of an operator: (position, name, passed by keyword only, read, written), from
    its schema once (reading a schema through its bindings costs more than the rest of a call)."""
    cached = _roles_by_schema.get(id(schema))
    if cached is None:
        roles = []
        for position, argument in enumerate(schema.arguments):
            writes = argument.alias_info is not None and argument.alias_info.is_write
            # out= arguments and a `self` the operator only overwrites are not read.
            reads = not (writes and (argument.kwarg_only or (position == 0 and schema.name in _OVERWRITE_SELF)))
            roles.append((position, argument.name, argument.kwarg_only, reads, writes))
        cached = _roles_by_schema[id(schema)] = (schema, roles)  # the schema kept: its id stays its own
    return cached[1]


def _arguments(schema, args, kwargs, role):
    """The CUDA tensors of an operator's arguments that `role` (3: read, 4: written) picks."""
    tensors = []
    for entry in _roles(schema):
        if entry[role]:
            position, name, kwarg_only = entry[:3]
            tensors += _cuda_tensors(kwargs.get(name) if kwarg_only or position >= len(args) else args[position])
    return tensors


def _written(schema, args, kwargs):
    """The CUDA tensors an operator writes (foreach and fused operators return none of them)."""
    return [] if schema is None else _arguments(schema, args, kwargs, 4)


def _read(schema, args, kwargs):
    """The CUDA tensors an operator reads."""
    return _cuda_tensors((args, kwargs)) if schema is None else _arguments(schema, args, kwargs, 3)


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _first_origin(tensors):
    return next((where for where in map(origin, tensors) if where is not None), None)


def _limit(tensors):
    """The most bytes of these tensors an operator may take and still run for real."""
    floating = any(t.is_floating_point() or t.is_complex() for t in tensors)
    return COMPUTE_BYTES if floating else INDEX_BYTES


def computable(schema, args, kwargs, random):
    """Whether shapes mode runs this operator for real: it draws no random numbers, reads only
    computed values, and its tensors fit COMPUTE_BYTES (INDEX_BYTES for index and mask work)."""
    if random:
        return False
    tensors = _cuda_tensors((args, kwargs))
    return cost.tensor_bytes(tensors) <= _limit(tensors) and _first_origin(_read(schema, args, kwargs)) is None


def record(op, args, kwargs, results, ran_for_real):
    """Marks what an operator wrote: computed when it ran for real on computed inputs (for writes
    that cover their storage; a partial write leaves its storage as it was), else with the origin
    of its first uncomputed input, or this operator and why it was not computed. Returns the
    uncomputed outputs small enough for the caller to zero."""
    schema = getattr(op, "_schema", None)
    outputs = _cuda_tensors(results) + _written(schema, args, kwargs)
    if not outputs:
        return []
    where = _first_origin(_read(schema, args, kwargs))
    if ran_for_real and where is None:
        for t in outputs:
            if id(t.untyped_storage()) in _marks and _spans_storage(t):
                _marks.pop(id(t.untyped_storage()), None)
        return []
    if where is None:
        name = schema.name if schema is not None else str(op)
        size = cost.tensor_bytes(_cuda_tensors((args, kwargs, results)))
        if not ran_for_real and schema is not None and random_draws.draws_random(schema):
            why = "random numbers are not drawn in shapes mode"
        elif size > _limit(_cuda_tensors((args, kwargs))):
            why = (f"{_human(size)} of tensors; shapes mode computes operators of up to {_human(COMPUTE_BYTES)} "
                   f"({_human(INDEX_BYTES)} of integers and booleans alone)")
        else:
            why = "shapes mode does not compute it"
        where = f"{name}: {why}"
    for t in outputs:
        _mark(t, where)
    return [t for t in outputs if span_bytes(t) <= COMPUTE_BYTES]


# Operators that pick positions out of values -> where their picks are (the dimension argument's
# position and default, how many each row picks: an argument's position or a number).
_PICKERS = {"aten::topk": (2, -1, 1), "aten::argmax": (1, None, None)}


def spread_picks(op, args, kwargs, results):
    """A picking operator (a router's topk) that ran on values shapes mode did not compute: its
    picks spread evenly, row r taking positions r*k .. r*k+k-1 modulo the positions, so that every
    row picks k different ones and every position is picked as often as any other (a balanced
    router). Marks the picks computed and returns [(CUDA tensor, CPU values to write there)]."""
    schema = getattr(op, "_schema", None)
    if schema is None or schema.name not in _PICKERS or schema.overload_name not in ("", "values"):
        return []
    x = args[0]
    dim_at, default_dim, k_at = _PICKERS[schema.name]
    dim = args[dim_at] if len(args) > dim_at else kwargs.get("dim", default_dim)
    picks = results[1] if isinstance(results, (tuple, list)) else results
    where = None if dim is None or x.dim() == 0 else origin(x)
    if where is None or not _spans_storage(picks):
        return []  # argmax over all elements picks one; a computed input was picked for real
    dim %= x.dim()
    k = int(args[k_at]) if k_at is not None else 1
    choices = x.shape[dim]
    rows = picks.numel() // max(k, 1)
    spread = (torch.arange(rows).unsqueeze(1) * k + torch.arange(k)) % max(choices, 1)
    if k_at is not None:  # topk: rows in the order of the other dimensions, the k picks along dim
        spread = spread.reshape([s for i, s in enumerate(picks.shape) if i != dim] + [k]).movedim(-1, dim)
    _marks.pop(id(picks.untyped_storage()), None)
    # A mixture of experts' prediction then assumes balanced routing: said once.
    _say_once("spread", f"fakegpu: {schema.name} picks from values that shapes mode did not compute (they derive "
                        f"from {where}); it picks every position equally often, so a mixture of experts is modeled "
                        "with balanced routing")
    return [(picks, spread.to(picks.dtype).reshape(picks.shape))]


def _say_once(key, line):
    """Says `line` on rank 0's standard error (once per job, not once per rank) the first time
    `key` comes up in this process."""
    if key in _said:
        return
    _said.add(key)
    if os.environ.get("RANK", "0") == "0":
        print(line, file=sys.stderr, flush=True)


def span_bytes(t):
    """The bytes from t's first element to its last."""
    if not t.numel():
        return 0
    return (sum((size - 1) * stride for size, stride in zip(t.size(), t.stride())) + 1) * t.element_size()


def check_assert(name, args):
    """Stops an assertion on a value shapes mode did not compute, naming where it came from."""
    where = _first_origin(_cuda_tensors(args))
    if where is None:
        return
    program = next((a for a in args if isinstance(a, str)), None)
    check = f" (the program's check: {program!r})" if program else ""
    raise RuntimeError(f"fakegpu: {name} asserts on a value that shapes mode did not compute{check}; it derives "
                       f"from {where}. Run this job with FAKEGPU_TORCH_COMPUTE=1 to compute values, or make the "
                       "value on the CPU and copy it to the GPU")


def check_read(t, how):
    """Says once per process (on rank 0) that the host read a value shapes mode did not compute."""
    where = None if "read" in _said else origin(t)
    if where is None:
        return
    _say_once("read", f"fakegpu: {how} reads a value that shapes mode did not compute (it derives from {where}); "
                      "it reads as zero. Values such as losses are computed only with FAKEGPU_TORCH_COMPUTE=1")
