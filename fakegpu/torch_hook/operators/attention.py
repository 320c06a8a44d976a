"""Flash attention for CUDA tensors on fake GPUs. PyTorch's CUDA flash-attention operators have
no CPU twin under their own name, but PyTorch's CPU flash attention computes the same thing with
the same tensors (query, key and value as batch x heads x length x dim; the log-sum-exp per
query row). So scaled_dot_product_attention keeps choosing flash attention on a fake GPU, as on
a real one, and its modeled time is one fused kernel's (cost.attention_facts), not the
materialised score matrix of the math path.
With dropout, which the CPU kernel lacks, attention_math.py computes it. Memory-efficient
attention (efficient_attention.py) is priced the same way."""

import torch

from fakegpu.torch_hook import cost, kernels
from fakegpu.torch_hook.operators import attention_math

FORWARD = "aten::_scaled_dot_product_flash_attention"
BACKWARD = "aten::_scaled_dot_product_flash_attention_backward"
NAMES = (FORWARD, BACKWARD)


def install():
    """Registers the two operators' CUDA kernels."""
    cpu_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    math = attention_math

    def cpu_forward(query, key, value, dropout_p, is_causal, *, scale):
        if dropout_p > 0:  # the CPU kernel has no dropout
            seed = math.draw_seed(query)
            out, logsumexp = math.forward(query, key, value, None, dropout_p, is_causal, scale, seed)
            rng_state = torch.tensor([seed, 0], dtype=torch.uint64, device=query.device)
            # Laid out as the query, as CUDA's kernel does (when the value's width allows).
            if value.shape[-1] == query.shape[-1]:
                return torch.empty_like(query).copy_(out), logsumexp, rng_state
            return out.to(query.dtype), logsumexp, rng_state
        # The CPU kernel leaves the log-sum-exp as batch x length x heads, transposed; CUDA's is
        # batch x heads x length, dense, and code compiled against CUDA's strides (AOTAutograd's
        # graphs) views it so.
        out, logsumexp = cpu_flash(query, key, value, dropout_p, is_causal, scale=scale)
        return out, logsumexp.contiguous(), torch.zeros(2, dtype=torch.uint64, device=query.device)

    cpu_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default

    def cpu_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, rng_state, *, scale):
        if dropout_p > 0:
            seed = 0 if rng_state.device.type == "meta" else int(rng_state[0].item())
            grads = math.backward(grad_out, query, key, value, None, dropout_p, is_causal, seed, scale)[:3]
        else:
            grads = cpu_flash_backward(grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, scale=scale)
        # CUDA's kernel gives each gradient its input's strides and dtype; the CPU paths do not.
        return tuple(torch.empty_like(x).copy_(g) for x, g in zip((query, key, value), grads))

    def forward(query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
        # With dropout, the mask's seed comes from the CUDA generator, as CUDA's kernel's does: one
        # number per attention weight.
        weights = query.shape[0] * query.shape[1] * query.shape[2] * key.shape[2]
        draws = (lambda _: weights) if dropout_p > 0 else None
        (out, logsumexp, rng_state), stream = kernels.run(cpu_forward, (query, key, value, dropout_p, is_causal),
                                                          {"scale": scale}, draws)
        kernels.price(stream, FORWARD, cost.attention_forward_facts(query, key, value, out, is_causal))
        # No cumulative sequence lengths (CUDA's kernel gives them for nested tensors only) and the
        # second part of its RNG state, shaped as its own; the backward below reads neither.
        unused = torch.empty((), dtype=torch.uint64, device=query.device)
        return (out, logsumexp, None, None, query.shape[2], key.shape[2], rng_state, unused,
                torch.empty(0, dtype=query.dtype, device=query.device))

    def backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p,
                 is_causal, philox_seed, philox_offset, *, scale=None):
        grads, stream = kernels.run(cpu_backward,
                                    (grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, philox_seed),
                                    {"scale": scale})
        facts = cost.attention_backward_facts(grad_out, query, key, value, out, grads, is_causal)
        kernels.price(stream, BACKWARD, facts)
        return grads

    kernels.register(FORWARD, forward)
    kernels.register(BACKWARD, backward)
