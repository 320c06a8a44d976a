"""FlexAttention (torch.nn.attention.flex_attention) for CUDA tensors on fake GPUs. On a GPU it
runs as one fused kernel that inductor generates from the score and mask functions, visiting only
the blocks its block mask keeps; no kernel of that kind exists here, and PyTorch's own fallback
(the flex_attention operator's dense form, which torch.compile's aot_eager backend also reaches)
materialises every batch x heads x queries x keys score several times over in fp32, gigabytes
per layer at ordinary lengths. So the two flex operators get kernels for the CUDA dispatch key
that compute the same mathematics a slice of queries at a time, on CPU tensors over the device's
bytes, and are priced as the fused kernel they stand for (cost.flex_attention_facts)."""

import math

import torch

from fakegpu.torch_hook import cost, kernels, values
from fakegpu.torch_hook.stand_ins import CpuView

FORWARD = "flex_attention"
BACKWARD = "flex_attention_backward"

# Scores held at once (fp32), a few times over while a slice is computed: 16 MiB each.
SLICE_SCORES = 4 << 20


def _slices(batch, heads, queries, keys):
    """(batch index, first query, end query) covering every query row, each slice's scores within
    SLICE_SCORES for all heads of one batch entry."""
    rows = max(1, SLICE_SCORES // max(1, heads * keys))
    for b in range(batch):
        for q0 in range(0, queries, rows):
            yield b, q0, min(queries, q0 + rows)


def _expand_kv(query, key, value):
    """Key and value with query's batch and one head per query head (grouped-query attention)."""
    groups = query.size(1) // key.size(1)
    key = key.expand((query.size(0), *key.size()[1:]))
    value = value.expand((query.size(0), *value.size()[1:]))
    if groups > 1:
        key = torch.repeat_interleave(key, groups, dim=1)
        value = torch.repeat_interleave(value, groups, dim=1)
    return key, value, groups


class _Mods:
    """The score and mask functions vectorised over batch, head, query and key indices, as the
    operator defines them, for one slice of rows at a time."""

    def __init__(self, score_mod, mask_mod, score_buffers, mask_buffers, joint=None):
        from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex
        from torch.nn.attention.flex_attention import _vmap_for_bhqkv

        self.score_buffers, self.mask_buffers = score_buffers, mask_buffers
        self.index_guard = TransformGetItemToIndex
        unbatched = (None,) * len(score_buffers)
        self.score = _vmap_for_bhqkv(score_mod, prefix=(0,), suffix=unbatched)
        self.mask = _vmap_for_bhqkv(mask_mod, prefix=(), suffix=(None,) * len(mask_buffers))
        self.joint = None if joint is None else _vmap_for_bhqkv(
            joint, prefix=(0,), suffix=(0,) + unbatched, out_dims=[0, None, None, None, None] + [None] * len(unbatched))

    def indices(self, b, heads, q0, q1, keys, device):
        return (torch.arange(b, b + 1, device=device), torch.arange(heads, device=device),
                torch.arange(q0, q1, device=device), torch.arange(keys, device=device))

    def scores(self, q, k, scale, idx):
        """Raw scores (scaled), and the scores after score_mod with masked pairs at -inf."""
        raw = (q @ k.transpose(-2, -1)) * scale
        with self.index_guard():
            kept = self.mask(*idx, *self.mask_buffers)
            modded = torch.where(kept, self.score(raw, *idx, *self.score_buffers),
                                 torch.tensor(-math.inf, dtype=raw.dtype, device=raw.device))
        return raw, modded, kept

    def score_grads(self, raw, idx, grad):
        with self.index_guard():
            grad_raw, _, _, _, _, *buffer_grads = self.joint(raw, *idx, grad, *self.score_buffers)
        return grad_raw, buffer_grads


def _working_dtype(dtype):
    """The precision scores are computed in: float64 for float64 inputs, float32 otherwise."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _working(t):
    return t.to(_working_dtype(t.dtype))


def forward(query, key, value, score_mod, block_mask, scale, score_buffers, mask_buffers):
    """flex_attention's results: the output (laid out as the query), and per query row the
    log-sum-exp and maximum of its scores, both base 2, -inf for a row with nothing kept."""
    from torch._higher_order_ops.flex_attention import _permute_strides

    batch, heads, queries, _ = query.shape
    keys, value_dim = key.size(2), value.size(3)
    out = _permute_strides(query.new_empty((batch, heads, queries, value_dim)), query.stride())
    lse = query.new_empty((batch, heads, queries), dtype=torch.float32)
    max_scores = torch.empty_like(lse)
    if query.device.type == "meta":
        return out, lse, max_scores
    key, value, _ = _expand_kv(query, key, value)
    mods = _Mods(score_mod, block_mask[-1], score_buffers, mask_buffers)
    for b, q0, q1 in _slices(batch, heads, queries, keys):
        idx = mods.indices(b, heads, q0, q1, keys, query.device)
        _, modded, _ = mods.scores(_working(query[b:b + 1, :, q0:q1]), _working(key[b:b + 1]), scale, idx)
        row_lse = modded.logsumexp(dim=-1)
        empty = torch.isneginf(modded).all(dim=-1)
        lse[b:b + 1, :, q0:q1] = torch.where(empty, -math.inf, row_lse) / math.log(2)
        max_scores[b:b + 1, :, q0:q1] = modded.amax(dim=-1) / math.log(2)
        weights = torch._safe_softmax(modded, dim=-1)
        out[b:b + 1, :, q0:q1] = weights.to(query.dtype) @ value[b:b + 1].to(query.dtype)
    return out, lse, max_scores


def backward(query, key, value, out, lse, grad_out, grad_lse, fw_graph, joint_graph, block_mask, scale,
             score_buffers, mask_buffers):
    """flex_attention_backward's results: the gradients of query, key and value (laid out as
    they are) and of the score function's captured tensors."""
    from torch._higher_order_ops.flex_attention import (_new_captured_grad_buffers, _permute_strides,
                                                        create_fw_bw_graph)

    grad_query = _permute_strides(query.new_empty(query.shape), query.stride())
    kv_shape = (query.size(0), key.size(1), key.size(2))
    grad_key = _permute_strides(key.new_empty((*kv_shape, key.size(3))), key.stride())
    grad_value = _permute_strides(value.new_empty((*kv_shape, value.size(3))), value.stride())
    if joint_graph is None:
        examples = (query.new_zeros((), requires_grad=True),) + tuple(query.new_zeros((), dtype=torch.int)
                                                                     for _ in range(4))
        _, joint_graph = create_fw_bw_graph(fw_graph, examples, score_buffers)
    buffer_grads = _new_captured_grad_buffers(score_buffers, joint_graph)
    if query.device.type != "meta":
        mods = _Mods(fw_graph, block_mask[-1], score_buffers, mask_buffers, joint_graph)
        dk, dv, sums = _accumulate_gradients(query, key, value, out, lse, grad_out, grad_lse, mods, scale,
                                             grad_query)
        grad_key.copy_(dk)
        grad_value.copy_(dv)
        buffer_grads = [None if total is None else target.copy_(total) for target, total in zip(buffer_grads, sums)]
    return grad_query, _sum_broadcast_batch(grad_key, key), _sum_broadcast_batch(grad_value, value), \
        tuple(buffer_grads)


def _accumulate_gradients(query, key, value, out, lse, grad_out, grad_lse, mods, scale, grad_query):
    """Writes the query's gradient into grad_query a slice of rows at a time; returns the key's and
    value's gradients per key head (summed over the query heads each served) in the working
    precision, and the sums of the captured tensors' gradients (None where a tensor got none)."""
    batch, heads, queries, _ = query.shape
    keys = key.size(2)
    full_key, full_value, groups = _expand_kv(query, key, value)
    # Key and value gradients sum over every query row: kept in the working precision until done.
    work = _working_dtype(query.dtype)
    dk = torch.zeros((batch, heads, keys, key.size(3)), dtype=work)
    dv = torch.zeros((batch, heads, keys, value.size(3)), dtype=work)
    sums = [None] * len(mods.score_buffers)
    for b, q0, q1 in _slices(batch, heads, queries, keys):
        rows = (slice(b, b + 1), slice(None), slice(q0, q1))
        idx = mods.indices(b, heads, q0, q1, keys, query.device)
        q, k, v = (_working(t) for t in (query[rows], full_key[b:b + 1], full_value[b:b + 1]))
        raw, modded, kept = mods.scores(q, k, scale, idx)
        row_lse = lse[rows].to(work) * math.log(2)
        weights = torch.where(torch.isneginf(row_lse).unsqueeze(-1), 0.0, torch.exp(modded - row_lse.unsqueeze(-1)))
        d_out = _working(grad_out[rows]) if grad_out is not None else q.new_zeros((*q.shape[:-1], v.size(-1)))
        dv[b:b + 1] += weights.transpose(-2, -1) @ d_out
        d_weights = d_out @ v.transpose(-2, -1)
        row_dot = (_working(out[rows]) * d_out).sum(-1, keepdim=True)
        d_lse = (grad_lse[rows].to(work) / math.log(2)).unsqueeze(-1) if grad_lse is not None else 0.0
        d_modded = weights * (d_weights - row_dot + d_lse)
        d_raw, slice_buffer_grads = mods.score_grads(raw, idx, d_modded)
        d_raw = torch.where(kept, d_raw.to(work) * scale, 0.0)
        grad_query[rows] = (d_raw @ k).to(query.dtype)
        dk[b:b + 1] += d_raw.transpose(-2, -1) @ q
        for i, g in enumerate(slice_buffer_grads):
            if isinstance(g, torch.Tensor):
                sums[i] = g if sums[i] is None else sums[i] + g
    if groups > 1:  # a key head served `groups` query heads: its gradient is theirs summed
        dk = dk.view(batch, -1, groups, keys, dk.size(-1)).sum(2)
        dv = dv.view(batch, -1, groups, keys, dv.size(-1)).sum(2)
    return dk, dv, sums


def _sum_broadcast_batch(grad, t):
    """A key or value given once for the whole batch gets its gradient summed over the batch."""
    return grad.sum(0, keepdim=True) if t.size(0) == 1 and grad.size(0) > 1 else grad


def visited_share(block_mask):
    """The share of (query block, key block) pairs the block mask keeps, which the fused kernel
    visits; None where its counts were not computed (shapes mode)."""
    kv_len, counts, full_counts, kv_block = block_mask[1], block_mask[2], block_mask[4], block_mask[-2]
    if counts.device.type == "meta" or not counts.numel():
        return None
    visited = counts.sum().item() + (0 if full_counts is None else full_counts.sum().item())
    return visited / (counts.numel() * max(1, -(-kv_len // kv_block)))


def install():
    """Registers the two flex attention operators' CUDA kernels."""
    from torch._C import DispatchKey
    from torch._higher_order_ops.flex_attention import flex_attention, flex_attention_backward

    def share_of(share, block_mask):
        # Shapes mode: a block mask made from computed values (positions, document ids) has
        # computed counts, read through stand-ins that read values.
        counts = [block_mask[2], block_mask[4]]
        if share is not None or not values.active() or any(values.origin(c) for c in counts):
            return share
        return kernels.run(visited_share, (block_mask,), {}, view_type=CpuView)[0]

    def cuda_forward(query, key, value, score_mod, block_mask, scale, kernel_options, score_mod_other_buffers=(),
                     mask_mod_other_buffers=()):
        (results, share), stream = kernels.run(
            lambda *a: (forward(*a), visited_share(a[4])),
            (query, key, value, score_mod, block_mask, scale, score_mod_other_buffers, mask_mod_other_buffers), {})
        share = share_of(share, block_mask)
        tensors = (query, key, value, results[0])
        kernels.price(stream, FORWARD, cost.flex_attention_facts(query, key, share, tensors, False))
        return results

    def cuda_backward(query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph, joint_graph, block_mask,
                      scale, kernel_options, score_mod_other_buffers=(), mask_mod_other_buffers=()):
        (results, share), stream = kernels.run(
            lambda *a: (backward(*a), visited_share(a[9])),
            (query, key, value, out, logsumexp, grad_out, grad_logsumexp, fw_graph, joint_graph, block_mask, scale,
             score_mod_other_buffers, mask_mod_other_buffers), {})
        tensors = (query, key, value, out, grad_out) + tuple(results[:3])
        share = share_of(share, block_mask)
        kernels.price(stream, BACKWARD, cost.flex_attention_facts(query, key, share,
                                                                  tuple(t for t in tensors if t is not None), True))
        return results

    flex_attention.py_impl(DispatchKey.CUDA)(torch.compiler.disable(cuda_forward))
    flex_attention_backward.py_impl(DispatchKey.CUDA)(torch.compiler.disable(cuda_backward))
