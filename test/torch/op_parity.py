"""Operators on fake-GPU tensors against the same operators on CPU tensors, forward and backward:
every result and every gradient must agree (PyTorch's CPU kernels compute both, so they agree to
the last bit in most cases; a tolerance of 1e-6 covers kernels whose order of summation depends
on the layout). Includes non-contiguous inputs, in-place and out= forms, integer and boolean
results, and the paths fakegpu diverts or supplies (attention, convolution without cuDNN,
RMSNorm's backward, the LSTM and GRU cells, packed sequences). Run as one rank
under fgpu; prints one line, or raises naming each operator that differs."""

import torch
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(6, 8)
W = torch.randn(8, 5)
IMG = torch.randn(2, 3, 10, 10)
KERNEL = torch.randn(4, 3, 3, 3)
SEQ = torch.randn(2, 4, 6, 8)
IDX = torch.tensor([0, 3, 5, 1])
MASK = torch.randn(2, 1, 4, 4)
KEEP = (MASK > 0) | torch.eye(4, dtype=torch.bool)  # every query keeps a key


def cases():
    """(name, function of the inputs, inputs[, tolerance]); floating-point inputs get gradients."""
    yield "add/mul/div", lambda x: (x + 1) * x / (x.abs() + 1), [X]
    yield "transposed elementwise", lambda x: x.t() * 2 + x.t().exp(), [X]
    yield "matmul", lambda x, w: x @ w, [X, W]
    yield "linear", lambda x, w: F.linear(x, w.t(), torch.ones(5)), [X, W]
    yield "softmax/log_softmax", lambda x: F.softmax(x, -1) + F.log_softmax(x, 0), [X]
    yield "layer_norm", lambda x: F.layer_norm(x, (8,)), [X]
    yield "reductions", lambda x: torch.stack([x.sum(), x.mean(), x.var(), x.amax(), x.norm()]), [X]
    yield "cumsum/cumprod", lambda x: x.cumsum(1) + x.cumprod(0), [X]
    yield "gather/index_select", lambda x: x.gather(1, IDX.view(4, 1).expand(4, 2)) + x.index_select(0, IDX)[:, :2], [X]
    yield "advanced indexing", lambda x: x[IDX, 2:5] * x[x[:, 0] > 0].sum(), [X]
    yield "where/masked_fill", lambda x: torch.where(x > 0, x, x * 0.1).masked_fill(x < -1, 3.0), [X]
    yield "cat/stack/split", lambda x: torch.cat([t * i for i, t in enumerate(x.split(3, 1))], 1), [X]
    yield "einsum", lambda x, w: torch.einsum("ij,jk->ik", x, w), [X, W]
    yield "cross_entropy", lambda x: F.cross_entropy(x[:4], IDX), [X]
    yield "mse/smooth_l1", lambda x: F.mse_loss(x, x.flip(0)) + F.smooth_l1_loss(x, x.roll(1, 1)), [X]
    yield "gelu/silu/tanh", lambda x: F.gelu(x) + F.silu(x) + torch.tanh(x), [X]
    yield "conv2d", lambda i, k: F.conv2d(i, k, padding=1, stride=2), [IMG, KERNEL]
    yield "max_pool/avg_pool", lambda i: F.max_pool2d(i, 2) + F.avg_pool2d(i, 2), [IMG]
    yield "batch_norm (training)", lambda i: F.batch_norm(i, None, None, training=True), [IMG]
    # fp32 attention, and attention with a mask (a learned bias gets a gradient), take memory-efficient
    # attention on a GPU; on a CPU, flash attention (and the math path for the bias's gradient).
    yield "efficient attention fp32", lambda q: F.scaled_dot_product_attention(q, q.flip(2), q, is_causal=True), \
        [SEQ.transpose(1, 2)]
    yield "efficient attention, boolean mask", lambda q: F.scaled_dot_product_attention(
        q, q.flip(2), q, attn_mask=KEEP.to(q.device)), [SEQ.transpose(1, 2)]
    yield "efficient attention, learned bias", lambda q, b: F.scaled_dot_product_attention(
        q, q.flip(2), q, attn_mask=b), [SEQ.transpose(1, 2), MASK], 1e-5
    yield "flash attention bf16", lambda q: F.scaled_dot_product_attention(q, q.flip(2), q, is_causal=True), \
        [SEQ.transpose(1, 2).to(torch.bfloat16)]
    yield "embedding", lambda e: F.embedding(IDX, e), [X]
    yield "rms_norm", lambda x, w: F.rms_norm(x, (8,), w[:, 0], eps=1e-6), [X, W]
    yield "lstm", lambda x, w_ih, w_hh: torch._VF.lstm(x, (torch.zeros_like(x[:1, :, :4]),) * 2, [w_ih, w_hh], False, 1,
                                                        0.0, True, False, False)[0], \
        [SEQ[0, :, :3, :], torch.randn(16, 8), torch.randn(16, 4)], 1e-5
    yield "gru", lambda x, w_ih, w_hh, b: torch._VF.gru(x, torch.zeros_like(x[:1, :, :4]), [w_ih, w_hh, b, b.flip(0)],
                                                        True, 1, 0.0, True, False, False)[0], \
        [SEQ[0, :, :3, :], torch.randn(12, 8), torch.randn(12, 4), torch.randn(12)], 1e-5
    yield "packed sequence (GRU)", packed_gru, [SEQ[0, :, :3, :], torch.randn(12, 8), torch.randn(12, 4)], 1e-5
    yield "topk/sort", lambda x: x.topk(3, 1).values + x.sort(1).values[:, :3], [X]
    yield "ctc_loss", lambda x: F.ctc_loss(x.log_softmax(2), torch.tensor([[1, 2, 3], [2, 2, 1]], device=x.device),
                                           (6, 5), (3, 3)), [torch.randn(6, 2, 5)]
    yield "to(dtype)", lambda x: x.to(torch.float64).sin().to(torch.float32), [X]


def packed_gru(x, w_ih, w_hh):
    """A GRU over sequences of lengths 4, 3 and 1, packed and padded back, as nn.GRU runs them."""
    from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

    packed = pack_padded_sequence(x, [4, 3, 1])
    h0 = torch.zeros(1, 3, 4, device=x.device)
    out = torch._VF.gru(packed.data, packed.batch_sizes, h0, [w_ih, w_hh], False, 1, 0.0, True, False)[0]
    return pad_packed_sequence(PackedSequence(out, packed.batch_sizes))[0]


def run(fn, inputs, device):
    leaves = [t.detach().clone().to(device).requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(*leaves)
    out.float().square().sum().backward()
    return [out.detach().cpu()] + [t.grad.cpu() for t in leaves if t.grad is not None]


def cuda_strides_kept():
    """Names of flash and memory-efficient attention's results whose strides differ from the ones
    PyTorch's own kernels give on a GPU (their meta functions say which): graphs that torch.compile
    captures hard-code them. Queries laid out as nn.MultiheadAttention's are (length, batch,
    heads, dim) underneath."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    qkv = [torch.randn(6, 2, 4, 8).permute(1, 2, 0, 3).to("cuda", torch.bfloat16) for _ in range(3)]

    def flash(q, k, v):
        fwd = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, True)
        grads = torch.ops.aten._scaled_dot_product_flash_attention_backward(
            torch.ones_like(fwd[0]), q, k, v, fwd[0], fwd[1], fwd[2], fwd[3], fwd[4], fwd[5], 0.0, True, fwd[6], fwd[7])
        return {"output": fwd[0], "log-sum-exp": fwd[1], "RNG state": fwd[6], "offset": fwd[7],
                **{f"gradient {i}": g for i, g in enumerate(grads)}}

    def efficient(q, k, v, bias):
        fwd = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, 0.0, False)
        grads = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
            torch.ones_like(fwd[0]), q, k, v, bias, fwd[0], fwd[1], fwd[2], fwd[3], 0.0, [True] * 4, False)
        return {"output": fwd[0], "log-sum-exp": fwd[1], "seed": fwd[2], "offset": fwd[3],
                **{f"gradient {i}": g for i, g in enumerate(grads)}}

    bias = torch.randn(2, 4, 6, 6).to("cuda", torch.bfloat16)
    bad = []
    for kind, attention, inputs in [("flash", flash, qkv), ("efficient", efficient, qkv + [bias])]:
        real = attention(*inputs)
        with FakeTensorMode() as mode:
            fake = attention(*(mode.from_tensor(t) for t in inputs))
        bad += [f"{kind} attention {name} strides" for name, t in real.items()
                if (t.shape, t.stride()) != (fake[name].shape, fake[name].stride())]
    return bad


def _flash_with_dropout(q, k, v, bias, grad_out, p):
    fwd = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, p, True)
    grads = torch.ops.aten._scaled_dot_product_flash_attention_backward(
        grad_out, q, k, v, fwd[0], fwd[1], fwd[2], fwd[3], fwd[4], fwd[5], p, True, fwd[6], fwd[7])
    return fwd[0], grads, int(fwd[6].cpu()[0].item())


def _efficient_with_dropout(q, k, v, bias, grad_out, p):
    fwd = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True, p, True)
    grads = torch.ops.aten._scaled_dot_product_efficient_attention_backward(
        grad_out, q, k, v, bias, fwd[0], fwd[1], fwd[2], fwd[3], p, [True] * 4, True)
    return fwd[0], grads, int(fwd[2].item())


def dropout_attention_differences():
    """Flash and memory-efficient attention with dropout (a training step's attention): the forward
    and the backward must drop the same weights, the ones the seed they return names (as CUDA's
    philox state), and compute what the math path computes with that mask, a bias included; the
    same CPU seed gives the same result."""
    p = 0.3
    q, k, v, grad_out = (torch.randn(2, 3, 8, 16).to(torch.bfloat16) for _ in range(4))
    bad = []
    for kind, attention, bias in [("flash", _flash_with_dropout, None),
                                  ("efficient", _efficient_with_dropout, torch.randn(2, 3, 8, 8).to(torch.bfloat16))]:
        out, grads, seed = attention(q.cuda(), k.cuda(), v.cuda(), bias if bias is None else bias.cuda(),
                                     grad_out.cuda(), p)
        # The math path in fp32 with the mask the seed gives.
        ref = [t.float().requires_grad_() for t in (q, k, v) + (() if bias is None else (bias,))]
        future = torch.ones(8, 8, dtype=torch.bool).triu(1)
        scores = ref[0] @ ref[1].transpose(-2, -1) / 4 + (0 if bias is None else ref[3])
        keep = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed)) >= p
        ref_out = (scores.masked_fill(future, float("-inf")).softmax(-1) * keep / (1 - p)) @ ref[2]
        ref_out.backward(grad_out.float())
        if not 0.15 < 1 - keep.float().mean().item() < 0.45:
            bad.append(f"{kind} dropout attention's share of dropped weights")
        names = ("output", "query gradient", "key gradient", "value gradient", "bias gradient")
        for name, got, want in zip(names, (out,) + tuple(grads), [ref_out] + [t.grad for t in ref]):
            if not torch.allclose(got.cpu().float(), want.detach(), rtol=2e-2, atol=2e-2):
                bad.append(f"{kind} dropout attention {name}")
    mask = torch.zeros(2, 3, 8, 8, dtype=torch.bfloat16).cuda()  # a mask: memory-efficient attention
    for kind, attn_mask in [("flash", None), ("efficient", mask)]:
        runs = []
        for _ in range(2):
            torch.manual_seed(7)
            runs.append(F.scaled_dot_product_attention(q.cuda(), k.cuda(), v.cuda(), attn_mask, p).cpu())
        if not torch.equal(runs[0], runs[1]):
            bad.append(f"{kind} dropout attention under the same seed")
    return bad


def flex_attention_differences():
    """FlexAttention run eagerly (PyTorch's unfused path) with a score modification, a relative
    position bias: the output against PyTorch's CPU FlexAttention, and the gradients, which CPU
    FlexAttention does not compute, against the same attention written out on the CPU."""
    import warnings

    from torch.nn.attention.flex_attention import flex_attention

    def relative(score, batch, head, q_index, kv_index):
        return score + (q_index - kv_index) * 0.1

    q = SEQ.transpose(1, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager FlexAttention says it is unfused
        want = flex_attention(q, q.flip(2), q, score_mod=relative)
        cuda = q.cuda().requires_grad_()
        got = flex_attention(cuda, cuda.flip(2), cuda, score_mod=relative)
    got.square().sum().backward()
    ref = q.clone().requires_grad_()
    positions = torch.arange(q.shape[2])
    scores = ref @ ref.flip(2).transpose(-2, -1) / q.shape[-1] ** 0.5 + (positions[:, None] - positions) * 0.1
    (scores.softmax(-1) @ ref).square().sum().backward()
    bad = []
    if not torch.allclose(got.detach().cpu(), want, rtol=1e-5, atol=1e-5):
        bad.append("flex attention (result)")
    if not torch.allclose(cuda.grad.cpu(), ref.grad, rtol=1e-4, atol=1e-4):
        bad.append("flex attention (gradient)")
    return bad


def main():
    bad = cuda_strides_kept() + dropout_attention_differences() + flex_attention_differences()
    for name, fn, inputs, *tolerance in cases():
        tol = tolerance[0] if tolerance else 1e-6
        cpu, cuda = run(fn, inputs, "cpu"), run(fn, inputs, "cuda")
        for i, (a, b) in enumerate(zip(cpu, cuda)):
            if a.shape != b.shape or not torch.allclose(a.float(), b.float(), rtol=tol, atol=tol):
                bad.append(f"{name} ({'result' if i == 0 else f'gradient {i}'})")
    # Results that are not floating point, and in-place and out= forms.
    x = X.cuda()
    checks = {
        "argmax": (x.argmax(1).cpu(), X.argmax(1)),
        "comparison": ((x > 0.5).cpu(), X > 0.5),
        "nonzero": (x.gt(1).nonzero().cpu(), X.gt(1).nonzero()),
        "in-place on a view": (x.clone().t().add_(1).t().cpu(), X.clone().t().add_(1).t()),
        "out=": (torch.mul(x, 3, out=torch.empty(0, device="cuda")).cpu(), X * 3),
        "index_put_": (x.clone().index_put_((IDX.cuda(),), torch.tensor(9.0).cuda()).cpu(),
                       X.clone().index_put_((IDX,), torch.tensor(9.0))),
        # CUDA counts integers, as a mixture of experts' router does; the CPU kernel does not.
        "histc of integers": (torch.histc(IDX.cuda().int(), bins=6, min=0, max=5).cpu(),
                              torch.histc(IDX.float(), bins=6, min=0, max=5).int()),
    }
    bad += [name for name, (got, want) in checks.items() if not torch.equal(got, want)]
    if bad:
        raise AssertionError("fake-GPU results differ from the CPU's: " + ", ".join(bad))
    print(f"op parity: {len(list(cases())) + len(checks)} cases agree with the CPU; flash and memory-efficient "
          "attention keep CUDA's strides and drop out as the math path; FlexAttention agrees", flush=True)


if __name__ == "__main__":
    main()
