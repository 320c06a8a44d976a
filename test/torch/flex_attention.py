"""FlexAttention on a fake GPU: forward and backward agree with attention computed densely in
float64 on the CPU (causal, per-document and grouped-query masks, a score function, fp32 and
bf16), and a long sequence runs in a small fraction of the host memory that materialising its
scores would take. Prints one line per case and 'flex attention agrees'."""

import resource

import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def weighted_loss(out):
    weights = torch.arange(out.numel(), device=out.device).view_as(out).float().sin()
    return (out.float() * weights).sum()


def dense_reference(q, k, v, keep, score_mod, groups):
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    k_all, v_all = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    scores = q @ k_all.transpose(-2, -1) / q.size(-1) ** 0.5
    b, h, qi, ki = torch.meshgrid(*(torch.arange(n) for n in scores.shape), indexing="ij")
    if score_mod is not None:
        scores = score_mod(scores, b, h, qi, ki)
    out = torch.softmax(scores.masked_fill(~keep(b, h, qi, ki), float("-inf")), -1) @ v_all
    weighted_loss(out).backward()
    return [t.detach().float() for t in (out, q.grad, k.grad, v.grad)]


def on_fake_gpu(q, k, v, block_mask, score_mod, gqa):
    q, k, v = (t.detach().cuda().requires_grad_() for t in (q, k, v))
    out = flex_attention(q, k, v, block_mask=block_mask, score_mod=score_mod, enable_gqa=gqa)
    weighted_loss(out).backward()
    return [t.detach().cpu().float() for t in (out, q.grad, k.grad, v.grad)]


def agreement():
    torch.manual_seed(0)
    batch, heads, length, dim = 2, 4, 384, 32
    documents = torch.randint(0, 3, (batch, length)).sort(dim=1).values
    on_gpu = documents.cuda()
    cases = [("causal", lambda b, h, q, k: q >= k, None, heads, None),
             ("documents", lambda b, h, q, k: (documents[b, q] == documents[b, k]) & (q >= k),
              lambda b, h, q, k: (on_gpu[b, q] == on_gpu[b, k]) & (q >= k), heads, None),
             ("grouped+bias", lambda b, h, q, k: q >= k, None, 2, lambda s, b, h, q, k: s + (q - k) * 0.01)]
    for name, keep, keep_on_gpu, kv_heads, score_mod in cases:
        mask_batch = batch if keep_on_gpu is not None else None
        block_mask = create_block_mask(keep_on_gpu or keep, mask_batch, None, length, length, device="cuda")
        for dtype, tolerance in ((torch.float32, 1e-4), (torch.bfloat16, 3e-2)):
            q = torch.randn(batch, heads, length, dim, dtype=dtype)
            k, v = (torch.randn(batch, kv_heads, length, dim, dtype=dtype) for _ in range(2))
            want = dense_reference(q, k, v, keep, score_mod, heads // kv_heads)
            got = on_fake_gpu(q, k, v, block_mask, score_mod, kv_heads != heads)
            errors = [(w - g).abs().max().item() / w.abs().max().item() for w, g in zip(want, got)]
            print(f"{name} {dtype}: relative errors of output, dq, dk, dv "
                  + " ".join(f"{e:.1e}" for e in errors), flush=True)
            assert max(errors) < tolerance, (name, dtype, errors)


def memory():
    """Scores of 4 x 8 x 2048 x 2048 in fp32 are 512 MiB a tensor; the dense form holds several."""
    batch, heads, length, dim = 4, 8, 2048, 64
    q, k, v = (torch.randn(batch, heads, length, dim, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    block_mask = create_block_mask(lambda b, h, qi, ki: qi >= ki, None, None, length, length, device="cuda")
    # The first call compiles the operator's wrapper for these shapes (torch.compile's own memory).
    weighted_loss(flex_attention(q, k, v, block_mask=block_mask)).backward()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
    weighted_loss(flex_attention(q, k, v, block_mask=block_mask)).backward()
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10) - before
    print(f"a 2048-long causal forward and backward grew the peak host memory by {grown} MiB", flush=True)
    assert grown < 256, grown


agreement()
memory()
print("flex attention agrees")
