"""The modeled cost of one PyTorch operator as a GPU would run it, for fakegpu's runtime to
queue on the operator's stream (libfakecuda/compute_time.cpp turns it into time on the rank's
GPU profile). torch is passed in: this module is imported before torch is."""

import math


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


# The runtime's kinds of math (libfakecuda/compute_time.cpp).
MEMORY_BOUND, FP64, FP32, TF32, HALF, FP8, HOST_DEVICE_COPY = range(7)


def _product(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


def _gemm_matrices(name, args, result):
    """The matrices a matrix product reads and writes."""
    if name in ("aten::mm", "aten::bmm"):
        return args[0], args[1], result
    return args[1], args[2], result


def _row_alignment(t):
    """The bytes every row of matrix `t` (its last two dimensions) starts aligned to, up to 16:
    what decides which of cuBLAS's kernels can load it (libfakecuda/compute_time.cpp)."""
    if t.dim() < 2 or t.shape[-1] <= 1 or t.shape[-2] <= 1:
        return 16
    size = t.element_size()
    rows, columns = t.stride(-2), t.stride(-1)
    # The distance between rows in memory: a transposed view's rows are its columns. A matrix
    # contiguous in neither dimension is copied into packed rows first.
    row_step = rows if columns == 1 else columns if rows == 1 else t.shape[-1]
    return math.gcd(16, row_step * size, t.storage_offset() * size)


def _gemm_flops(name, args):
    """2 x multiply-adds of a matrix product, or None for an operator that is not one."""
    if name in ("aten::mm", "aten::bmm"):
        a, b = args[0], args[1]
    elif name in ("aten::addmm", "aten::baddbmm", "aten::_addmm_activation", "aten::addbmm"):
        a, b = args[1], args[2]
    elif name in ("aten::mv", "aten::addmv"):
        mat = args[0] if name == "aten::mv" else args[1]
        return 2 * mat.shape[0] * mat.shape[1]
    else:
        return None
    return 2 * _product(a.shape[:-1]) * a.shape[-1] * b.shape[-1]


def _conv_flops(name, args, result):
    """2 x multiply-adds of a convolution (forward, or the gradients a backward computes)."""
    if name == "aten::convolution":
        inp, weight, transposed = args[0], args[1], args[6]
        out = result
    elif name == "aten::convolution_backward":
        out, inp, weight, transposed = args[0], args[1], args[2], args[7]
    else:
        return None
    kernel = _product(weight.shape[2:])
    # Each output element of a convolution takes (in channels / groups) x kernel multiply-adds;
    # a transposed one, likewise per input element.
    forward = 2 * (inp.numel() if transposed else out.numel()) * weight.shape[1] * kernel
    if name == "aten::convolution":
        return forward
    mask = args[-1]
    return forward * (int(mask[0]) + int(mask[1]))


def _tf32(torch, matmul):
    """Whether fp32 products may run on TF32 tensor cores, as the program set it."""
    try:
        return torch.backends.cuda.matmul.allow_tf32 if matmul else torch.backends.cudnn.allow_tf32
    except RuntimeError:
        # The program set it through PyTorch's newer per-backend setting, which the older one
        # then refuses to read.
        backend = torch.backends.cuda.matmul if matmul else torch.backends.cudnn.conv
        return backend.fp32_precision == "tf32"


def _math_of(torch, t, matmul):
    if t.dtype == torch.float64:
        return FP64
    if t.dtype == torch.float32:
        return TF32 if _tf32(torch, matmul) else FP32
    if t.dtype in (torch.float16, torch.bfloat16):
        return HALF
    if t.dtype.is_floating_point and t.element_size() == 1:
        return FP8
    return MEMORY_BOUND


def modeled_cost(torch, name, args, result):
    """(math, flops, bytes, row alignment) of one operator as a GPU would run it: matrix
    products and convolutions by their FLOP counts, everything by the bytes of its tensors, and
    copies that cross to or from the host at the host link's speed. The row alignment is that of
    a matrix product's least aligned matrix, 16 for other work."""
    tensors = [t for t in tree_leaves((args, result)) if isinstance(t, torch.Tensor)]
    nbytes = tensor_bytes(tensors)
    if name == "aten::copy_" and any(t.device.type == "cpu" for t in tensors):
        return HOST_DEVICE_COPY, 0.0, float(args[1].numel() * args[1].element_size()), 16
    flops = _gemm_flops(name, args)
    matmul = flops is not None
    alignment = 16
    if matmul and name not in ("aten::mv", "aten::addmv"):
        alignment = min(_row_alignment(m) for m in _gemm_matrices(name, args, result))
    if flops is None:
        flops = _conv_flops(name, args, result)
    if flops is None:
        return MEMORY_BOUND, 0.0, nbytes, 16
    math_kind = _math_of(torch, args[1] if name == "aten::convolution_backward" else tensors[0], matmul)
    return math_kind, float(flops), nbytes, alignment


def misalignment_hint(torch, name, args, result, alignment, share):
    """One line for a matrix product whose rows are aligned to `alignment` bytes and which the
    runtime's model slows to `share` of its rate for that (compute_time.cpp); None at full rate."""
    if share >= 1:
        return None
    shapes = " x ".join(str(list(m.shape)) for m in _gemm_matrices(name, args, result)[:2])
    dtype = str(result.dtype).replace("torch.", "")
    parts = round(1 / share)
    fraction = {3: "a third", 6: "a sixth"}.get(parts, f"1/{parts}")
    return (f"fakegpu: {name} of {shapes} ({dtype}) has matrix rows aligned to {alignment} bytes, not 16: "
            f"on {torch.cuda.get_device_name(result.device)} cuBLAS runs such products at about {fraction} of "
            "the rate, and the modeled time counts that; padding its dimensions to multiples of "
            f"{16 // result.element_size()} elements avoids it (said once)")
