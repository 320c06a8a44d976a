"""Attention computed with its weights in full, for what PyTorch's CPU flash attention lacks:
dropout on the weights (flash and memory-efficient attention) and the gradient of an additive
bias (memory-efficient attention's attn_bias, when it is learned). CUDA's kernels drop weights
with a mask they draw from a seed and regenerate in the backward pass from the same seed (their
RNG-state outputs). Here the seed is drawn from the CPU generator (which random_draws.py seeds
from the CUDA generator's state for the call) and the mask from the seed, on the CPU (or the meta
device, for shapes only). The modeled time stays the fused kernel's (attention.py)."""

import torch


def _weights(query, key, bias, is_causal, scale):
    """Softmax weights (fp32) and the log-sum-exp of each query row."""
    scores = query.float() @ key.float().transpose(-2, -1) * scale
    if bias is not None:
        scores = scores + bias.float()
    if is_causal:  # each query attends to keys up to its own position
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    logsumexp = scores.logsumexp(-1)
    return (scores - logsumexp.unsqueeze(-1)).exp(), logsumexp


def _kept(weights, dropout_p, seed):
    """The dropout mask as a scale: 1 / (1 - p) where a weight is kept, 0 where dropped."""
    if weights.device.type == "meta" or dropout_p == 0:
        return torch.ones_like(weights)
    draw = torch.Generator().manual_seed(seed)
    keep = torch.rand(weights.shape, generator=draw) >= dropout_p
    return keep.float() / (1 - dropout_p)


def scale_of(query, scale):
    return scale if scale is not None else query.shape[-1] ** -0.5


def draw_seed(query):
    """The dropout mask's seed, from the CPU generator (0 for shapes only)."""
    return 0 if query.device.type == "meta" else int(torch.randint(0, 2**62, ()).item())


def forward(query, key, value, bias, dropout_p, is_causal, scale, seed):
    """(output as fp32, log-sum-exp) with the weights the seed drops."""
    weights, logsumexp = _weights(query, key, bias, is_causal, scale_of(query, scale))
    return (weights * _kept(weights, dropout_p, seed)) @ value.float(), logsumexp


def backward(grad_out, query, key, value, bias, dropout_p, is_causal, seed, scale):
    """Gradients of query, key and value, and of the scores (the bias's), all fp32."""
    s = scale_of(query, scale)
    weights, _ = _weights(query, key, bias, is_causal, s)
    kept = _kept(weights, dropout_p, seed)
    grad = grad_out.float()
    grad_value = (weights * kept).transpose(-2, -1) @ grad
    grad_weights = (grad @ value.float().transpose(-2, -1)) * kept
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))
    grad_query = grad_scores @ key.float() * s
    grad_key = grad_scores.transpose(-2, -1) @ query.float() * s
    return grad_query, grad_key, grad_value, grad_scores
