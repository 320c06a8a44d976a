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
and in every run, however the value travels. Reading a marked value on the host says so once; asserting on one stops with a message naming its
origin, never the program's own assertion about values nobody computed."""

import os
import sys
import weakref

import _fakegpu_cost
import _fakegpu_random

# Operators this small (every CUDA tensor they take or make, in bytes) run for real when their
# inputs hold values: index and mask work is far below it, activations and weights far above.
COMPUTE_BYTES = 1 << 20

# Operators that overwrite `self` without reading it.
_OVERWRITE_SELF = {"aten::fill_", "aten::zero_", "aten::copy_"}

_torch = None
_marks = {}  # id(storage) -> (weak reference to the storage, where its values came from)
_read_said = False


def install(torch):
    """Turns the bookkeeping on (shapes mode only: in compute mode every value is computed), and
    has the host's reads of one value (`.item()`, `bool()`, `float()`, `int()`) checked. Copies to
    the CPU are checked by the copy kernel."""
    global _torch
    _torch = torch
    for name, how in (("item", ".item()"), ("__bool__", "bool()"), ("__float__", "float()"), ("__int__", "int()")):
        setattr(torch.Tensor, name, _checking_read(getattr(torch.Tensor, name), how))


def _checking_read(read, how):
    def checked(self, *args):
        if not _read_said:
            check_read(self, how)
        return read(self, *args)

    checked.__name__, checked.__doc__ = read.__name__, read.__doc__
    return checked


def active():
    return _torch is not None


def _cuda_tensors(x):
    return [t for t in _fakegpu_cost.tree_leaves(x) if isinstance(t, _torch.Tensor) and t.device.type == "cuda"]


def origin(t):
    """Where t's values came from when shapes mode did not compute them; None when they are
    computed (or t is not a CUDA tensor)."""
    if not isinstance(t, _torch.Tensor) or t.device.type != "cuda":
        return None
    mark = _marks.get(id(t.untyped_storage()))
    return None if mark is None else mark[1]


def _mark(t, where):
    storage = t.untyped_storage()
    key = id(storage)
    _marks[key] = (weakref.ref(storage, lambda _, key=key: _marks.pop(key, None)), where)


def _spans_storage(t):
    """Whether writing t writes every byte of its storage."""
    return t.is_contiguous() and t.storage_offset() == 0 and t.numel() * t.element_size() == t.untyped_storage().nbytes()


def _written(schema, args, kwargs):
    """The CUDA tensors an operator writes that it does not return (foreach and fused operators
    return nothing), from its schema."""
    if schema is None:
        return []
    written = []
    for position, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        value = kwargs.get(argument.name) if argument.kwarg_only or position >= len(args) else args[position]
        written += _cuda_tensors(value)
    return written


def _read(schema, args, kwargs):
    """The CUDA tensors an operator reads: all it takes but out= arguments and a `self` it only
    overwrites."""
    if schema is None:
        return _cuda_tensors((args, kwargs))
    read = []
    for position, argument in enumerate(schema.arguments):
        value = kwargs.get(argument.name) if argument.kwarg_only or position >= len(args) else args[position]
        writes = argument.alias_info is not None and argument.alias_info.is_write
        if writes and (argument.kwarg_only or (position == 0 and schema.name in _OVERWRITE_SELF)):
            continue
        read += _cuda_tensors(value)
    return read


def _human(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _bytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def _first_origin(tensors):
    return next((where for where in map(origin, tensors) if where is not None), None)


def computable(schema, args, kwargs, random):
    """Whether shapes mode runs this operator for real: it draws no random numbers, reads only
    computed values, and its tensors fit COMPUTE_BYTES."""
    if random:
        return False
    tensors = _cuda_tensors((args, kwargs))
    return _bytes(tensors) <= COMPUTE_BYTES and _first_origin(_read(schema, args, kwargs)) is None


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
        size = _bytes(_cuda_tensors((args, kwargs, results)))
        if not ran_for_real and schema is not None and _fakegpu_random.draws_random(schema):
            why = "random numbers are not drawn in shapes mode"
        elif size > COMPUTE_BYTES:
            why = f"{_human(size)} of tensors; shapes mode computes operators of up to {_human(COMPUTE_BYTES)}"
        else:
            why = "shapes mode does not compute it"
        where = f"{name}: {why}"
    for t in outputs:
        _mark(t, where)
    return [t for t in outputs if _span_bytes(t) <= COMPUTE_BYTES]


def _span_bytes(t):
    return (sum((size - 1) * stride for size, stride in zip(t.size(), t.stride())) + 1) * t.element_size() if t.numel() else 0


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
    global _read_said
    where = None if _read_said else origin(t)
    if where is None:
        return
    _read_said = True
    if os.environ.get("RANK", "0") == "0":
        print(f"fakegpu: {how} reads a value that shapes mode did not compute (it derives from {where}); it "
              "reads as zero. Values such as losses are computed only with FAKEGPU_TORCH_COMPUTE=1",
              file=sys.stderr, flush=True)
