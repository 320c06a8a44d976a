"""The facts of one PyTorch operator that fakegpu's kernel model prices (planner/kernel_model.cpp,
reached through bridge.py): what kind of kernels PyTorch's CUDA backend launches for it, their
math, FLOPs and bytes, and the shapes that decide how well they fill a GPU. Only facts are
extracted here; every rule about time is in the C++ model."""

import math

import torch

from fakegpu.torch_hook import bridge as B


def tensor_bytes(tensors):
    """The bytes of the given tensors' elements (None entries count nothing)."""
    return float(sum(t.numel() * t.element_size() for t in tensors if t is not None))


def tree_leaves(x, out=None):
    """The tensors, scalars and other leaves of nested lists, tuples and dicts."""
    out = [] if out is None else out
    if isinstance(x, (list, tuple)):
        for v in x:
            tree_leaves(v, out)
    elif isinstance(x, dict):
        for v in x.values():
            tree_leaves(v, out)
    else:
        out.append(x)
    return out


def _product(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


GEMMS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::_addmm_activation", "aten::addbmm",
         "aten::mv", "aten::addmv", "aten::_scaled_mm")


def _gemm_matrices(name, args, result):
    """The matrices a matrix product reads and writes."""
    if name in ("aten::mm", "aten::bmm", "aten::mv", "aten::_scaled_mm"):
        return args[0], args[1], result
    return args[1], args[2], result


def _row_alignment(t):
    """The bytes every row of matrix `t` (its last two dimensions) starts aligned to, up to 16:
    what decides which of cuBLAS's kernels can load it (planner/kernel_model.cpp)."""
    if t.dim() < 2 or t.shape[-1] <= 1 or t.shape[-2] <= 1:
        return 16
    size = t.element_size()
    rows, columns = t.stride(-2), t.stride(-1)
    # The distance between rows in memory: a transposed view's rows are its columns. A matrix
    # contiguous in neither dimension is copied into packed rows first.
    row_step = rows if columns == 1 else columns if rows == 1 else t.shape[-1]
    return math.gcd(16, row_step * size, t.storage_offset() * size)


def _gemm_dims(name, a, b):
    """(batch, m, n, k) of a matrix product of a by b."""
    if b.dim() == 1:  # matrix by vector
        return 1, a.shape[-2], 1, a.shape[-1]
    batch = _product(a.shape[:-2]) if name in ("aten::bmm", "aten::baddbmm") else 1
    if name == "aten::addbmm":
        batch = a.shape[0]
    m = a.shape[-2] if batch > 1 or name in ("aten::bmm", "aten::baddbmm", "aten::addbmm") else _product(a.shape[:-1])
    return batch, m, b.shape[-1], a.shape[-1]


def _tf32(matmul):
    """Whether fp32 products may run on TF32 tensor cores, as the program set it."""
    try:
        return torch.backends.cuda.matmul.allow_tf32 if matmul else torch.backends.cudnn.allow_tf32
    except RuntimeError:
        # The program set it through PyTorch's newer per-backend setting, which the older one
        # then refuses to read.
        backend = torch.backends.cuda.matmul if matmul else torch.backends.cudnn.conv
        return backend.fp32_precision == "tf32"


def math_of(t, matmul=True):
    if t.dtype == torch.float64:
        return B.FP64
    if t.dtype == torch.float32:
        return B.TF32 if _tf32(matmul) else B.FP32
    if t.dtype in (torch.float16, torch.bfloat16):
        return B.HALF
    if t.dtype.is_floating_point and t.element_size() == 1:
        return B.FP8
    return B.MEMORY_BOUND


def _k_major(t, k_dim):
    """Whether matrix `t` holds the elements of its inner (K) dimension, `k_dim`, next to each
    other: a's columns, b's rows. A matrix contiguous in neither dimension is copied into rows."""
    if t.dim() < 2 or t.shape[k_dim] <= 1:
        return True
    if t.stride(-1) != 1 and t.stride(-2) != 1:
        return k_dim == -1
    return t.stride(k_dim) == 1


def _gemm(name, args, result, nbytes):
    a, b, out = _gemm_matrices(name, args, result)
    batch, m, n, k = _gemm_dims(name, a, b)
    alignment = 16 if b.dim() == 1 else min(_row_alignment(x) for x in (a, b, out))
    # dims[4]: how many of the two matrices are not K-major (op_facts.h).
    apart = 0 if b.dim() == 1 else int(not _k_major(a, -1)) + int(not _k_major(b, -2))
    return B.facts(B.GEMM, math_of(a), 2.0 * batch * m * n * k, nbytes, (batch, m, n, k, apart),
                   element_bytes=a.element_size(), row_alignment=alignment)


GROUPED_GEMMS = ("aten::_grouped_mm", "aten::_scaled_grouped_mm")


def _grouped_gemm(name, args, result, nbytes):
    """A grouped matrix product (a mixture of experts' products, one group per expert) as the
    batch of its groups' products: (groups, m, n, k), with the rows, or for the weights' gradient
    the inner dimension, shared out evenly among the groups, as a balanced router gives them."""
    a, b = args[0], args[1]
    if a.dim() == 2 and b.dim() == 3:  # tokens [T, K] by the experts' weights [G, K, N]
        groups, k, n = b.shape[0], a.shape[1], b.shape[2]
        m, flops = -(-a.shape[0] // max(groups, 1)), 2.0 * a.shape[0] * k * n
    elif a.dim() == 2 and b.dim() == 2:  # [M, T] by [T, N] over each group's tokens: the weights' gradient
        groups = result.shape[0] if result.dim() == 3 else 1
        m, n = a.shape[0], b.shape[1]
        k, flops = -(-a.shape[1] // max(groups, 1)), 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    else:  # a batch of products, [G, M, K] by [G, K, N] (or one operand shared out by rows)
        groups = a.shape[0] if a.dim() == 3 else b.shape[0]
        m, k, n = a.shape[-2] if a.dim() == 3 else -(-a.shape[0] // max(groups, 1)), a.shape[-1], b.shape[-1]
        flops = 2.0 * groups * m * k * n
    return B.facts(B.GEMM, math_of(a), flops, nbytes, (groups, m, n, k), element_bytes=a.element_size())


def _conv(name, args, result, nbytes):
    if name == "aten::convolution":
        inp, weight, transposed, groups, passes, out = args[0], args[1], args[6], args[8], 0, result
    else:
        grad_out, inp, weight, transposed, groups, mask = args[0], args[1], args[2], args[7], args[9], args[10]
        passes, out = int(bool(mask[0])) | 2 * int(bool(mask[1])), grad_out
        if not passes:
            return B.facts(B.MEMORY, nbytes=nbytes)  # the bias's gradient alone: a reduction
    if transposed:
        # A transposed convolution's forward is the input gradient of the convolution it inverts.
        inp, out = out, inp
        passes = 1 if passes == 0 else passes
    channels_last = inp.dim() == 4 and inp.is_contiguous(memory_format=torch.channels_last)
    taps = _product(weight.shape[2:])
    flops_per_pass = 2.0 * out.numel() * weight.shape[1] * taps
    flops = flops_per_pass * (1 if passes == 0 else bin(passes).count("1"))
    dims = (inp.shape[0], inp.shape[1], _product(inp.shape[2:]), out.shape[1], taps, _product(out.shape[2:]), groups,
            passes)
    return B.facts(B.CONV, math_of(weight, matmul=False), flops, nbytes, dims,
                   flags=B.CHANNELS_LAST if channels_last else 0, element_bytes=inp.element_size())


def _pytorch_batch_norm(x, weight):
    """Whether PyTorch runs the batch norm with its own kernels rather than cuDNN's: without an
    affine weight, for bf16 tensors, half ones without fp32 weights, and doubles, as its CUDA
    backend chooses."""
    if not isinstance(weight, torch.Tensor):
        return True
    types = (x.dtype, weight.dtype)
    return (torch.bfloat16 in types or torch.float64 in types
            or (x.dtype == torch.float16 and weight.dtype != torch.float32))


def _rows(t, width):
    return (t.numel() // width if width else 0), width


NORMS = ("aten::native_layer_norm", "aten::_fused_rms_norm")
NORM_BACKWARDS = ("aten::native_layer_norm_backward", "aten::_fused_rms_norm_backward")
SOFTMAXES = ("aten::_softmax", "aten::_log_softmax")
SOFTMAX_BACKWARDS = ("aten::_softmax_backward_data", "aten::_log_softmax_backward_data")
BATCH_NORMS = ("aten::native_batch_norm", "aten::_native_batch_norm_legit", "aten::_batch_norm_with_update",
               "aten::_batch_norm_no_update", "aten::_native_batch_norm_legit_no_training",
               "aten::_native_batch_norm_legit_functional")
BATCH_NORM_BACKWARDS = ("aten::native_batch_norm_backward", "aten::batch_norm_backward")
# Max pooling with indices (what nn.MaxPool2d runs when it trains or not), forward and backward.
MAX_POOLS = ("aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward")
# Gathers read only the rows they pick: their result's bytes, not their source's.
GATHERS = ("aten::index_select", "aten::gather", "aten::embedding", "aten::take", "aten::index",
           "aten::nll_loss_forward", "aten::nll_loss2d_forward")
REDUCTIONS = ("aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max", "aten::min", "aten::argmax",
              "aten::argmin", "aten::norm", "aten::linalg_vector_norm", "aten::var", "aten::std", "aten::var_mean",
              "aten::std_mean", "aten::prod", "aten::all", "aten::any", "aten::logsumexp", "aten::nansum",
              "aten::count_nonzero")


# In-place operators that write their tensor without reading it.
WRITE_ONLY = ("aten::copy_", "aten::fill_", "aten::zero_", "aten::normal_", "aten::uniform_", "aten::random_",
              "aten::bernoulli_", "aten::exponential_", "aten::geometric_", "aten::log_normal_", "aten::cauchy_",
              "aten::set_")


def _distinct(tensors):
    """Each tensor once: an in-place operator returns the tensor it was given."""
    seen, out = set(), []
    for t in tensors:
        if id(t) not in seen:
            seen.add(id(t))
            out.append(t)
    return out


def _base(name):
    return name.partition(".")[0]


def returns_view(schema):
    """Whether an operator returns an alias of an input without writing it (a view)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _foreach(name, args, result, nbytes):
    lists = [a for a in args if isinstance(a, (list, tuple)) and a and hasattr(a[0], "numel")]
    if not lists:
        return B.facts(B.MEMORY, nbytes=nbytes)  # a fused kernel on plain tensors (_fused_dropout)
    first = lists[0]
    outputs = [r for r in tree_leaves(result) if hasattr(r, "numel")]
    # An in-place multi-tensor op writes its first list as well as reading it.
    written = tensor_bytes(first) if name.endswith("_") or "_fused_" in name else 0.0
    nbytes = sum(tensor_bytes(l) for l in lists) + written + tensor_bytes(outputs)
    if "_fused_" in name:  # a fused optimizer also writes its moments
        nbytes += sum(tensor_bytes(l) for l in lists[2:4])
    elements = sum(t.numel() for t in first)
    return B.facts(B.FOREACH, nbytes=nbytes, dims=(len(first), len(lists) + (1 if outputs else 0), elements),
                   element_bytes=first[0].element_size())


# A copy runs as an elementwise kernel though PyTorch does not tag it pointwise (`.to()`'s
# `_to_copy` reaches the hook as an allocation and this copy).
COPY = "aten::copy_"
CATS = ("aten::cat", "aten::stack")


def _strides_over(t, shape):
    """t's strides, in elements, as t broadcast to `shape` (0 along the dimensions it is repeated
    over), or None where it does not broadcast to it."""
    if t.dim() > len(shape):
        return None
    strides = [0] * (len(shape) - t.dim())
    for size, stride, wanted in zip(t.shape, t.stride(), shape[len(strides):]):
        if size != wanted and size != 1:
            return None
        strides.append(stride if size == wanted else 0)
    return strides


def _loop_dims(out, inputs):
    """The dimensions of the loop TensorIterator runs over `out` and `inputs`, after it orders
    them by the output's strides and merges those every operand walks as one: 0 where the loop is
    contiguous (one dimension, every operand's elements adjacent), which PyTorch vectorizes; None
    where an input does not broadcast to the output (no elementwise loop)."""
    shape = list(out.shape)
    operands = [_strides_over(t, shape) for t in [out] + inputs]
    if any(s is None for s in operands):
        return None
    order = sorted((i for i, n in enumerate(shape) if n != 1), key=lambda i: [s[i] for s in operands])
    if not order:
        return 0
    groups, first, size = 1, order[0], shape[order[0]]
    for i in order[1:]:
        if all(s[i] == s[first] * size for s in operands):
            size *= shape[i]  # walked as one with the dimensions before it: merged
        else:
            groups, first, size = groups + 1, i, shape[i]
    return 0 if groups == 1 and all(s[order[0]] == 1 for s in operands) else groups


def _converts(name, out, inputs):
    """Whether the kernel converts an operand from another type as it loads it. A copy converts
    unless source and destination agree, or fp32 becomes bf16 or fp16 (a kernel of its own); other
    operators compute in one floating type, taking integer and boolean operands as they are."""
    if name == COPY:
        source = inputs[0].dtype
        return source != out.dtype and not (source == torch.float32 and out.dtype in (torch.bfloat16, torch.float16))
    return len({t.dtype for t in [out] + inputs if t.is_floating_point()}) > 1


def _elementwise(name, args, result):
    """(elements, operands converted, loop dimensions) of an elementwise operator whose kernel
    cannot vectorize (op_facts.h, FAKEGPU_OP_MEMORY), or None where it can or is no such loop."""
    if name == COPY:
        out, inputs = args[0], [args[1]]
    else:
        outs = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        if len(outs) != 1:
            return None
        out = outs[0]
        inputs = [t for t in tree_leaves(args) if isinstance(t, torch.Tensor) and t is not out]
    if not isinstance(out, torch.Tensor) or out.numel() == 0 or out.layout != torch.strided:
        return None
    # A tensor on the host is a scalar the kernel takes as an argument.
    inputs = [t for t in inputs if t.device == out.device]
    if not inputs or any(t.layout != torch.strided for t in inputs):
        return None
    dims = _loop_dims(out, inputs)
    if dims is None:
        return None
    # An in-place operator also reads the tensor it writes.
    in_place = name != COPY and any(t is out for t in tree_leaves(args))
    operands = 1 + len(inputs) + int(in_place) if _converts(name, out, inputs) else 0
    if not dims and not operands:
        return None
    return out.numel(), operands, dims


def _cat(tensors, result):
    """A concatenation's dims beyond its bytes (op_facts.h). PyTorch's kernel vectorizes contiguous
    inputs; others of up to 4 dimensions it places element by element, and beyond that it copies
    each input into its slice of the result."""
    if (not isinstance(result, torch.Tensor) or not tensors or any(t.layout != torch.strided for t in tensors)
            or all(t.is_contiguous() for t in tensors)):
        return ()
    dims = max(t.dim() for t in tensors)
    return (1, result.numel(), 0, 0, 1) if dims <= 4 else (len(tensors), result.numel(), 0, dims)


def op_facts(name, args, result, flags=0, elementwise=False):
    """The kernel model's facts (an OpFacts) for one operator as PyTorch's CUDA backend would run
    it. `flags` adds bridge.py's IN_BACKWARD where autograd's engine launched it; `elementwise`:
    PyTorch tags the operator pointwise (copies count as such here)."""
    tensors = _distinct(t for t in tree_leaves((args, result)) if isinstance(t, torch.Tensor))
    nbytes = tensor_bytes(tensors)
    base = _base(name)
    if base.endswith("_") and base not in WRITE_ONLY and args and isinstance(args[0], torch.Tensor):
        nbytes += tensor_bytes([args[0]])  # an in-place operator reads the tensor it writes
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        flags |= B.RECORDS_GRAD
    if base == COPY and any(t.device.type == "cpu" for t in tensors):
        return B.facts(B.HOST_COPY, nbytes=args[1].numel() * args[1].element_size(), flags=flags)
    if base in GEMMS:
        f = _gemm(base, args, result, nbytes)
    elif base in GROUPED_GEMMS:
        f = _grouped_gemm(base, args, result, nbytes)
    elif base in ("aten::convolution", "aten::convolution_backward"):
        f = _conv(base, args, result, nbytes)
    elif base in NORMS:
        f = B.facts(B.NORM, nbytes=nbytes, dims=_rows(args[0], _product(args[1])), element_bytes=args[0].element_size())
    elif base in NORM_BACKWARDS:
        rows, width = _rows(args[1], _product(args[2]))
        f = B.facts(B.NORM_BACKWARD, nbytes=nbytes, dims=(rows, width, int(bool(args[-1][1]))),
                    element_bytes=args[1].element_size())
    elif base in SOFTMAXES or base in SOFTMAX_BACKWARDS:
        x, dim = (args[0], args[1]) if base in SOFTMAXES else (args[1], args[2])
        width = x.shape[dim] if x.dim() else 1
        kind = B.SOFTMAX if base in SOFTMAXES else B.SOFTMAX_BACKWARD
        f = B.facts(kind, nbytes=nbytes, dims=_rows(x, width), element_bytes=x.element_size())
    elif base in BATCH_NORMS or base in BATCH_NORM_BACKWARDS:
        x = args[1] if base in BATCH_NORM_BACKWARDS else args[0]
        channels = x.shape[1] if x.dim() > 1 else 1
        training = not ("no_update" in base or "no_training" in base or (base == "aten::native_batch_norm" and not args[5])
                        or (base == "aten::_native_batch_norm_legit" and len(args) > 5 and not args[5]))
        kind = B.BATCH_NORM_BACKWARD if base in BATCH_NORM_BACKWARDS else B.BATCH_NORM
        weight = args[2] if base in BATCH_NORM_BACKWARDS else args[1]
        f = B.facts(kind, nbytes=nbytes, dims=(x.numel() // max(channels, 1), channels, int(training),
                                               int(_pytorch_batch_norm(x, weight))),
                    element_bytes=x.element_size())
    elif base == "aten::embedding_dense_backward":
        grad, indices = args[0], args[1]
        f = B.facts(B.EMBEDDING_BACKWARD, nbytes=nbytes, dims=(indices.numel(), grad.shape[-1], args[2]),
                    element_bytes=grad.element_size())
    elif base == "aten::nll_loss_backward":
        # Zeroes the logits' gradient and writes one element per row.
        f = B.facts(B.MEMORY, nbytes=2 * tensor_bytes([result]) / max(result.shape[-1], 1) + tensor_bytes([result]))
    elif base in GATHERS:
        outputs = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
        indices = [t for t in tensors if not t.is_floating_point() and all(t is not o for o in outputs)]
        f = B.facts(B.MEMORY, nbytes=2 * tensor_bytes(outputs) + tensor_bytes(indices))
    elif base in MAX_POOLS:
        backward = base.endswith("_backward")
        x = args[1] if backward else args[0]
        f = B.facts(B.POOL, nbytes=nbytes, dims=(int(backward), x.numel()), element_bytes=x.element_size())
    elif base.startswith("aten::_foreach_") or base.startswith("aten::_fused_"):
        f = _foreach(base, args, result, nbytes)
    elif base in REDUCTIONS:
        f = B.facts(B.REDUCTION, nbytes=nbytes)
    elif base in CATS and args and isinstance(args[0], (list, tuple)):
        f = B.facts(B.MEMORY, nbytes=nbytes, dims=_cat([t for t in args[0] if isinstance(t, torch.Tensor)], result))
    else:
        loop = _elementwise(base, args, result) if elementwise or base == COPY else None
        f = B.facts(B.MEMORY, nbytes=nbytes, dims=(1,) + loop if loop else ())
    f.flags |= flags
    return f


def attention_facts(query, key, tensors, is_causal, backward):
    """A fused attention kernel (flash or memory-efficient) on batch x heads x length x dim tensors."""
    math_kind = B.HALF if query.dtype in (torch.float16, torch.bfloat16) else B.FP32
    batch_heads = query.shape[0] * query.shape[1]
    flops = 4.0 * batch_heads * query.shape[2] * key.shape[2] * query.shape[3] * (0.5 if is_causal else 1.0)
    if backward:
        flops *= 2.5  # it recomputes the scores: five products against the forward's two
    dims = (query.shape[0], query.shape[1], query.shape[2], key.shape[2], query.shape[3])
    flags = B.CAUSAL if is_causal else 0
    if torch.is_grad_enabled() and query.requires_grad:
        flags |= B.RECORDS_GRAD
    return B.facts(B.ATTENTION_BACKWARD if backward else B.ATTENTION, math_kind, flops, tensor_bytes(tensors), dims,
                   flags=flags, element_bytes=query.element_size())


def attention_forward_facts(query, key, value, out, is_causal, bias=None):
    """A flash or memory-efficient attention forward call's facts (the bias: memory-efficient's)."""
    return attention_facts(query, key, (query, key, value, out) + ((bias,) if bias is not None else ()), is_causal,
                           False)


def attention_backward_facts(grad_out, query, key, value, out, grads, is_causal):
    """Its backward's: the gradients it returns (None where not asked for)."""
    tensors = (grad_out, query, key, value, out) + tuple(g for g in grads if g is not None)
    return attention_facts(query, key, tensors, is_causal, True)


def flex_attention_facts(query, key, visited, tensors, backward):
    """A FlexAttention kernel: fused attention that visits the share `visited` of (query block, key
    block) pairs its block mask keeps; with the mask's counts unknown (shapes mode) it is taken as
    causal, the mask most programs give it."""
    facts = attention_facts(query, key, tensors, visited is None, backward)
    facts.flags |= B.FLEX
    if visited is not None:
        facts.flops *= visited
        facts.dims[5] = max(1, round(visited * B.SHARE_UNITS))
    return facts


def misalignment_hint(name, args, result, alignment, share):
    """One line for a matrix product whose rows are aligned to `alignment` bytes and which the
    runtime's model slows to `share` of its rate for that; None at full rate."""
    if share >= 1:
        return None
    shapes = " x ".join(str(list(m.shape)) for m in _gemm_matrices(_base(name), args, result)[:2])
    dtype = str(result.dtype).replace("torch.", "")
    parts = round(1 / share)
    fraction = {3: "a third", 6: "a sixth"}.get(parts, f"1/{parts}")
    return (f"fakegpu: {name} of {shapes} ({dtype}) has matrix rows aligned to {alignment} bytes, not 16: "
            f"on {torch.cuda.get_device_name(result.device)} cuBLAS runs such products at about {fraction} of "
            "the rate, and the modeled time counts that; padding its dimensions to multiples of "
            f"{16 // result.element_size()} elements avoids it (said once)")
