"""Operator timings with CUDA events, the same on a real GPU and under fakegpu.

A case is one JSON object: `case` (the operator class), `op`, `dtype` (`tf32` is fp32 with TF32
products allowed), `shape`, and `layout` for convolutions (`nchw`, or `nhwc` for channels_last).
Timing it adds `fwd_us`, the GPU time of the operator over back-to-back calls, and where the
operator has a backward, `fwd_bwd_us`, forward and backward of a gradient of ones together; a
`host` case adds `host_us`, a call whose GPU work is tiny, so that the GPU waits on the host
(views, which launch nothing, included). Convolutions also add `fwd_transient_bytes` and
`bwd_transient_bytes`: what a pass takes from the caching allocator and gives back before it
returns (cuDNN's workspaces and copies), its peak over what is allocated after it.

`fgpu calibrate` times every case of cases() on a real GPU and writes them as a table; the kernel
model's fidelity benchmark (verification/bench/kernel_fidelity.py) times the lines of such a table
under fakegpu and sets the model's figures beside the measured ones. Both time a case the same
way: a few warm-up calls, then CUDA events around 20 calls (10 with the backward), so that a
case the host cannot keep ahead of measures the host, as a program of such calls would run.
"""

import torch
import torch.nn.functional as F

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
          "fp8": torch.float8_e4m3fn}


def _events_us(fn, reps, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000 / reps


def _randn(*shape, dtype=torch.float32, grad=False):
    return torch.randn(*shape, device="cuda", dtype=dtype, requires_grad=grad)


def _time(fn, inputs, backward=True):
    """fwd_us of fn(*inputs), and fwd_bwd_us with the backward of a gradient of ones where an
    input needs gradients."""
    out = {"fwd_us": round(_events_us(lambda: fn(*inputs), 20), 2)}
    if backward and any(isinstance(t, torch.Tensor) and t.requires_grad for t in inputs):
        ones = torch.ones_like(fn(*inputs))

        def both():
            torch.autograd.backward(fn(*inputs), ones)

        out["fwd_bwd_us"] = round(_events_us(both, 10), 2)
    return out


def _sustained_us(fn, seconds=2.0):
    """GPU time per call of `fn` after the GPU has run it back to back for about `seconds`, and
    over as long again: long enough for its clocks to settle under its power limit, as in a
    training run, where 20 calls may not be."""
    reps = max(20, int(seconds * 1e6 / max(_events_us(fn, 20), 1.0)))
    return _events_us(fn, reps, warm=reps)


def _gemm(c, dtype):
    if c["op"] == "bmm":
        b, m, n, k = c["shape"]
        x, y = _randn(b, m, k, dtype=dtype), _randn(b, k, n, dtype=dtype)
        return _time(torch.bmm, (x, y))
    m, n, k = c["shape"]
    if c["op"] == "scaled_mm":
        # As torchao's Float8 linear layers run: e4m3 operands scaled per tensor, a bf16 result;
        # cuBLASLt takes the second operand with K contiguous.
        x, y = _randn(m, k).to(dtype), _randn(n, k).to(dtype).t()
        one = torch.ones((), device="cuda")
        return _time(lambda a, b: torch._scaled_mm(a, b, one, one, out_dtype=torch.bfloat16), (x, y))
    if c["op"] == "mm_k_apart":
        # Both matrices hold K apart, as a Linear layer's weight gradient (dy.T @ x) does.
        x, y = _randn(k, m, dtype=dtype).t(), _randn(k, n, dtype=dtype)
    else:
        x, y = _randn(m, k, dtype=dtype), _randn(k, n, dtype=dtype)
    if c["op"] == "mm_sustained":
        return {"fwd_us": round(_sustained_us(lambda: torch.matmul(x, y)), 2)}
    return _time(torch.matmul, (x, y))


def _elementwise(c, dtype):
    (n,) = c["shape"]
    x, y = _randn(n, dtype=dtype), _randn(n, dtype=dtype)
    fns = {"add": lambda: x + y, "copy": lambda: y.copy_(x), "gelu": lambda: F.gelu(x), "sum": lambda: x.sum(),
           "to_bf16": lambda: x.to(torch.bfloat16)}
    return _time(fns[c["op"]], ())


def _rms_norm_eager(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _rows(c, dtype):
    rows, width = c["shape"]
    x = _randn(rows, width, dtype=dtype, grad=True)
    weight = torch.ones(width, device="cuda", dtype=dtype, requires_grad=True)
    bias = torch.zeros(width, device="cuda", dtype=dtype, requires_grad=True)
    if c["op"] == "layer_norm":
        return _time(lambda x, w, b: F.layer_norm(x, (width,), w, b), (x, weight, bias))
    if c["op"] == "softmax":
        return _time(lambda x: torch.softmax(x, -1), (x,))
    if c["op"] == "rms_norm_eager":
        return _time(_rms_norm_eager, (x, weight))
    if c["op"] == "cross_entropy":
        target = torch.randint(0, width, (rows,), device="cuda")
        return _time(lambda x: F.cross_entropy(x, target), (x,))
    raise ValueError(f"unknown row-wise operator {c['op']!r}")


def _batch_norm(c, dtype):
    n, ch, h, w = c["shape"]
    bn = torch.nn.BatchNorm2d(ch).cuda()
    x = _randn(n, ch, h, w, dtype=dtype, grad=True)
    if dtype == torch.float32:
        return _time(bn, (x,))
    return _time(lambda x: torch.autocast("cuda", dtype)(bn)(x), (x,))


def _transient_bytes(fn):
    """What fn takes from the caching allocator and gives back before it returns: its peak over
    what is allocated once it is done (what it returns stays allocated)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    kept = fn()
    torch.cuda.synchronize()
    transient = torch.cuda.max_memory_allocated() - torch.cuda.memory_allocated()
    del kept
    return transient


def _conv(c, dtype):
    n, ch, h, w, k, r, stride = c["shape"]
    layout = torch.channels_last if c.get("layout") == "nhwc" else torch.contiguous_format
    x = _randn(n, ch, h, w, dtype=dtype).to(memory_format=layout).requires_grad_()
    weight = _randn(k, ch, r, r, dtype=dtype).to(memory_format=layout).requires_grad_()

    def conv(x, wt):
        return F.conv2d(x, wt, stride=stride, padding=r // 2)

    out = _time(conv, (x, weight))
    out["fwd_transient_bytes"] = _transient_bytes(lambda: conv(x, weight))
    y = conv(x, weight)
    ones = torch.ones_like(y)  # made first, so that it does not count as the pass's
    out["bwd_transient_bytes"] = _transient_bytes(lambda: torch.autograd.grad(y, (x, weight), ones))
    return out


def _pool(c, dtype):
    x = _randn(*c["shape"], dtype=dtype, grad=True)
    return _time(lambda x: F.max_pool2d(x, 3, 2, 1), (x,))


def _attention(c, dtype):
    b, h, t, d = c["shape"]
    q, k, v = (_randn(b, h, t, d, dtype=dtype, grad=True) for _ in range(3))
    return _time(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))


def _embedding(c, dtype):
    vocab, width, tokens = c["shape"]
    table = torch.nn.Embedding(vocab, width).cuda()
    ids = torch.randint(0, vocab, (tokens,), device="cuda")
    out = _time(table, (ids,))
    ones = torch.ones(tokens, width, device="cuda")
    out["fwd_bwd_us"] = round(_events_us(lambda: torch.autograd.backward(table(ids), ones), 10), 2)
    return out


def _optimizer(c, dtype):
    """`shape`: the parameters' count and their elements in all (split evenly)."""
    count, total = c["shape"]
    sizes = [total // count] * count
    sizes[0] += total - sum(sizes)
    params = [torch.nn.Parameter(_randn(n)) for n in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = (torch.optim.AdamW(params, lr=1e-4) if c["op"] == "adamw" else
           torch.optim.SGD(params, lr=1e-3, momentum=0.9))
    return {"fwd_us": round(_events_us(opt.step, 10), 2)}


def _tiny_mlp(layers):
    """`layers` pairs of a tiny Linear and a GELU: a backward pass of 4 autograd nodes a pair."""
    return torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(16, 16), torch.nn.GELU())]).cuda()


def _tiny_adamw(count):
    params = [torch.nn.Parameter(_randn(16)) for _ in range(count)]
    for p in params:
        p.grad = torch.randn_like(p)
    return torch.optim.AdamW(params, lr=1e-4)


def _host(c, dtype):
    """Calls whose GPU work is tiny: the GPU time between the events is the host's. The chains of
    layers and the optimizers of 1, 8 and 50 parameters tell what a backward pass and an optimizer
    step cost once from what they cost per node and per parameter."""
    x, y = _randn(4), _randn(4)
    lin = torch.nn.Linear(16, 16).cuda()
    xi = _randn(8, 16, grad=True)
    x16 = _randn(8, 16)
    x3 = _randn(2, 4, 16)
    fns = {"add_tiny": lambda: x + y, "inplace_add_tiny": lambda: x.add_(y), "linear_module_tiny": lambda: lin(xi),
           "linear_fwd_bwd_tiny": lambda: lin(xi).sum().backward(), "gelu_tiny": lambda: F.gelu(x),
           "layer_norm_tiny": lambda: F.layer_norm(xi, (16,)),
           # Views launch nothing: what eager PyTorch spends on them is host time alone.
           "view_tiny": lambda: x16.view(4, 32), "transpose_tiny": lambda: x16.transpose(0, 1),
           "permute_tiny": lambda: x3.permute(2, 0, 1), "slice_tiny": lambda: x16[2:6],
           "reshape_tiny": lambda: x16.reshape(128)}
    op = c["op"]
    if op.startswith("mlp_fwd_bwd_tiny_"):
        mlp = _tiny_mlp(int(op.rsplit("_", 1)[1]))
        fns[op] = lambda: mlp(x16).sum().backward()
    if op.startswith("adamw_step_"):
        fns[op] = _tiny_adamw(int(op.split("_")[2])).step
    reps = 200 if op.startswith(("linear_fwd_bwd", "mlp_", "adamw_")) else 1000
    return {"host_us": round(_events_us(fns[op], reps, warm=20), 2)}


RUNNERS = {"gemm": _gemm, "elementwise": _elementwise, "reduction": _elementwise, "norm": _rows, "loss": _rows,
           "conv": _conv, "pool": _pool, "attention": _attention, "embedding": _embedding,
           "optimizer": _optimizer, "host": _host}


def run_case(case):
    """The case with its timings added; a case of an unknown class raises ValueError."""
    runner = RUNNERS.get(case.get("case"))
    if runner is None:
        raise ValueError(f"unknown case {case.get('case')!r} (known: {', '.join(sorted(RUNNERS))})")
    if case["case"] == "norm" and case["op"] == "batch_norm":
        runner = _batch_norm
    dtype = DTYPES[case.get("dtype", "fp32")]
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = case.get("dtype") == "tf32"
    try:
        timings = runner(case, dtype)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    out = {k: v for k, v in case.items() if k not in ("fwd_us", "fwd_bwd_us", "host_us")}
    out.update(timings)
    return out


def device_line():
    p = torch.cuda.get_device_properties(0)
    return {"case": "device", "name": p.name, "sms": p.multi_processor_count,
            "mem_gib": round(p.total_memory / 2**30, 1), "torch": torch.__version__, "cuda": torch.version.cuda}


def cases():
    """The cases `fgpu calibrate` measures: matrix products of transformer and odd shapes,
    memory-bound kernels from tiny to large, row-wise kernels, convolutions in both layouts,
    attention, embeddings, optimizers and the host's costs."""
    out = []
    products = [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 2048, 2048), (1024, 1024, 1024), (512, 512, 512),
                (256, 256, 256), (16384, 3072, 768), (16384, 768, 3072), (768, 3072, 16384), (4096, 11008, 4096),
                (4096, 4096, 11008), (8192, 1024, 1024), (64, 4096, 4096), (1, 4096, 4096), (32768, 512, 512),
                (16384, 32000, 2048), (2048, 14336, 4096), (4096, 50257, 768), (4096, 50304, 768)]
    for dtype in ("bf16", "tf32", "fp32"):
        for m, n, k in products:
            if dtype != "bf16" and m * n * k > 2**36:
                continue
            out.append({"case": "gemm", "op": "mm", "dtype": dtype, "shape": [m, n, k]})
    for shape in ([96, 1024, 1024, 64], [96, 1024, 64, 1024], [32, 2048, 2048, 128]):
        out.append({"case": "gemm", "op": "bmm", "dtype": "bf16", "shape": shape})
    for dtype in ("bf16", "tf32"):
        for m, n, k in ((4096, 4096, 4096), (2048, 8192, 4096)):
            out.append({"case": "gemm", "op": "mm_k_apart", "dtype": dtype, "shape": [m, n, k]})
    out.append({"case": "gemm", "op": "mm_sustained", "dtype": "bf16", "shape": [8192, 8192, 8192]})
    for m, n, k in ((8192, 8192, 8192), (4096, 4096, 4096), (16384, 4096, 4096), (16384, 14336, 4096),
                    (16384, 4096, 14336)):
        out.append({"case": "gemm", "op": "scaled_mm", "dtype": "fp8", "shape": [m, n, k]})
    for n in (2**10, 2**16, 2**20, 2**22, 2**24, 2**26, 2**28):
        for dtype in ("fp32", "bf16"):
            for op in ("add", "copy", "gelu"):
                out.append({"case": "elementwise", "op": op, "dtype": dtype, "shape": [n]})
            out.append({"case": "reduction", "op": "sum", "dtype": dtype, "shape": [n]})
        out.append({"case": "elementwise", "op": "to_bf16", "dtype": "fp32", "shape": [n]})
    for rows, width in ((8192, 768), (16384, 1024), (4096, 4096), (16384, 4096), (65536, 256), (1024, 50304)):
        for dtype in ("fp32", "bf16"):
            for op in ("layer_norm", "softmax", "rms_norm_eager"):
                out.append({"case": "norm", "op": op, "dtype": dtype, "shape": [rows, width]})
        out.append({"case": "loss", "op": "cross_entropy", "dtype": "fp32", "shape": [rows, width]})
    for n, c, h, k, r, s in ((64, 64, 56, 64, 3, 1), (64, 128, 28, 128, 3, 1), (64, 256, 14, 256, 3, 1),
                             (64, 512, 7, 512, 3, 1), (64, 3, 224, 64, 7, 2), (64, 64, 56, 128, 3, 2),
                             (32, 256, 56, 64, 1, 1), (32, 64, 56, 256, 1, 1)):
        for dtype in ("fp32", "bf16"):
            for layout in ("nchw", "nhwc"):
                out.append({"case": "conv", "op": "conv2d", "dtype": dtype, "shape": [n, c, h, h, k, r, s],
                            "layout": layout})
            out.append({"case": "norm", "op": "batch_norm", "dtype": dtype, "shape": [n, c, h, h]})
    out.append({"case": "pool", "op": "max_pool2d", "dtype": "fp32", "shape": [64, 64, 112, 112]})
    for shape in ([8, 12, 1024, 64], [4, 16, 1024, 64], [2, 16, 2048, 128], [1, 32, 4096, 128], [16, 12, 512, 64],
                  [1, 12, 128, 64]):
        for dtype in ("bf16", "fp16", "fp32"):
            out.append({"case": "attention", "op": "sdpa_causal", "dtype": dtype, "shape": shape})
    for shape in ([50304, 768, 8192], [32000, 2048, 4096], [128256, 4096, 4096]):
        out.append({"case": "embedding", "op": "embedding", "dtype": "fp32", "shape": shape})
    for shape in ([144, 28385280], [8, 134217728], [96, 134348800]):
        for op in ("adamw", "sgd_momentum"):
            out.append({"case": "optimizer", "op": op, "dtype": "fp32", "shape": shape})
    for op in ("add_tiny", "inplace_add_tiny", "linear_module_tiny", "linear_fwd_bwd_tiny", "gelu_tiny",
               "layer_norm_tiny", "adamw_step_50_tiny_params", "adamw_step_1_tiny_params", "adamw_step_8_tiny_params",
               "mlp_fwd_bwd_tiny_1", "mlp_fwd_bwd_tiny_2", "mlp_fwd_bwd_tiny_4", "mlp_fwd_bwd_tiny_8", "view_tiny",
               "transpose_tiny", "permute_tiny", "slice_tiny", "reshape_tiny"):
        out.append({"case": "host", "op": op})
    return out
