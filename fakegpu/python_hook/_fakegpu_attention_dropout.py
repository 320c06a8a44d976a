"""Flash attention with dropout on its attention weights, for fake GPUs. CUDA's flash kernel
drops weights with a mask it draws from a seed and regenerates in the backward pass from the same
seed (its RNG-state output); PyTorch's CPU flash attention has no dropout. So with dropout the
weights are computed here in full, on the CPU (or the meta device, for shapes only): the mask is
drawn from a seed taken from the CPU generator (which _fakegpu_random.py seeds from the CUDA
generator's state for the call), which the forward returns as its RNG state and the backward
reads back. The tensors, the log-sum-exp and the results are CUDA's; the modeled
time stays the fused kernel's (_fakegpu_attention.py)."""


def _weights(torch, query, key, is_causal, scale):
    """Softmax weights (fp32) and the log-sum-exp of each query row."""
    scores = query.float() @ key.float().transpose(-2, -1) * scale
    if is_causal:  # each query attends to keys up to its own position
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    logsumexp = scores.logsumexp(-1)
    return (scores - logsumexp.unsqueeze(-1)).exp(), logsumexp


def _kept(torch, weights, dropout_p, rng_state):
    """The dropout mask as a scale: 1 / (1 - p) where a weight is kept, 0 where dropped."""
    if weights.device.type == "meta":
        return torch.ones_like(weights)
    draw = torch.Generator().manual_seed(int(rng_state[0].item()))
    keep = torch.rand(weights.shape, generator=draw) >= dropout_p
    return keep.float() / (1 - dropout_p)


def _scale(query, scale):
    return scale if scale is not None else query.shape[-1] ** -0.5


def forward(torch, query, key, value, dropout_p, is_causal, scale):
    """(output, log-sum-exp, RNG state) as CUDA's flash kernel returns them."""
    if query.device.type == "meta":
        rng_state = torch.empty(2, dtype=torch.uint64, device="meta")
    else:
        seed = int(torch.randint(0, 2**62, ()).item())
        rng_state = torch.tensor([seed, 0], dtype=torch.uint64)
    weights, logsumexp = _weights(torch, query, key, is_causal, _scale(query, scale))
    out = (weights * _kept(torch, weights, dropout_p, rng_state)) @ value.float()
    # Laid out as the query, as CUDA's kernel does (when the value's width allows).
    if value.shape[-1] == query.shape[-1]:
        return torch.empty_like(query).copy_(out), logsumexp, rng_state
    return out.to(query.dtype), logsumexp, rng_state


def backward(torch, grad_out, query, key, value, dropout_p, is_causal, rng_state, scale):
    """Gradients of query, key and value (fp32)."""
    s = _scale(query, scale)
    weights, _ = _weights(torch, query, key, is_causal, s)
    kept = _kept(torch, weights, dropout_p, rng_state)
    grad = grad_out.float()
    grad_value = (weights * kept).transpose(-2, -1) @ grad
    grad_weights = (grad @ value.float().transpose(-2, -1)) * kept
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(-1, keepdim=True))
    grad_query = grad_scores @ key.float() * s
    grad_key = grad_scores.transpose(-2, -1) @ query.float() * s
    return grad_query, grad_key, grad_value
