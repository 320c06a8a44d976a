"""Memory-efficient attention for CUDA tensors on fake GPUs. On a GPU, scaled_dot_product_attention
takes this kernel where flash attention cannot run: fp32 inputs, and an attention mask, which it
hands over as an additive bias (a boolean mask becomes 0 and -inf). It has no CPU twin under its
own name, but PyTorch's CPU flash attention takes the same bias and computes the same output and
the same gradients of query, key and value. Dropout, and the gradient of a bias that is learned,
need the weights in full: attention_math.py computes those. The results keep CUDA's
layouts (its meta functions say which); the modeled time is one fused kernel's, as flash's."""

import torch

from fakegpu.torch_hook import capture, cost, kernels
from fakegpu.torch_hook.operators import attention_math

FORWARD = "aten::_scaled_dot_product_efficient_attention"
BACKWARD = "aten::_scaled_dot_product_efficient_attention_backward"
NAMES = (FORWARD, BACKWARD)

# CUDA's kernel pads each row of log-sum-exps to a multiple of this, and a bias gradient's rows to
# a multiple of the second (the tensor is a view of the first columns).
LOGSUMEXP_ALIGN = 32
BIAS_ALIGN = 16


def _round_up(n, multiple):
    return -(-n // multiple) * multiple


def _cuda_layout(shape, like):
    """An empty tensor of `shape` (batch x heads x length x dim) with like's dtype and device, laid
    out as batch x length x heads x dim, as CUDA's kernel writes its output and gradients."""
    return torch.empty_permuted(shape, (0, 2, 1, 3), dtype=like.dtype, device=like.device)


def install():
    """Registers the two operators' CUDA kernels."""
    cpu_flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    cpu_flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
    math = attention_math

    def cpu_forward(query, key, value, bias, compute_log_sumexp, dropout_p, is_causal, *, scale):
        seed = 0
        if dropout_p > 0:  # the CPU kernel has no dropout
            seed = math.draw_seed(query)
            out, logsumexp = math.forward(query, key, value, bias, dropout_p, is_causal, scale, seed)
        else:
            out, logsumexp = cpu_flash(query, key, value, 0.0, is_causal, attn_mask=bias, scale=scale)
        rows = query.shape[2]
        padded = _round_up(rows, LOGSUMEXP_ALIGN) if compute_log_sumexp else 0
        lse = torch.full((query.shape[0], query.shape[1], padded), float("inf"), device=query.device)
        if padded:
            lse[..., :rows] = logsumexp
        output = _cuda_layout(query.shape[:3] + value.shape[3:], query)
        return output.copy_(out), lse, seed, torch.tensor(seed, dtype=torch.int64, device=query.device)

    def cpu_backward(grad_out, query, key, value, bias, out, logsumexp, philox_seed, dropout_p, bias_grad, is_causal,
                     *, scale):
        grad_bias = None
        if dropout_p > 0 or bias_grad:
            seed = int(philox_seed.item()) if dropout_p > 0 and philox_seed.device.type != "meta" else 0
            grad_q, grad_k, grad_v, grad_scores = math.backward(grad_out, query, key, value, bias, dropout_p,
                                                               is_causal, seed, scale)
            if bias_grad:
                grad_bias = grad_scores.to(bias.dtype)
        else:
            lse = logsumexp[..., :query.shape[2]].contiguous()
            grad_q, grad_k, grad_v = cpu_flash_backward(grad_out, query, key, value, out, lse, 0.0, is_causal,
                                                        attn_mask=bias, scale=scale)
        inputs, grads = (query, key, value), (grad_q, grad_k, grad_v)
        grads = tuple(_cuda_layout(x.shape, x).copy_(g) for x, g in zip(inputs, grads))
        return grads + (grad_bias,)

    def forward(query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False, *, scale=None):
        # With dropout, the mask's seed comes from the CUDA generator, as CUDA's kernel's does.
        weights = query.shape[0] * query.shape[1] * query.shape[2] * key.shape[2]
        draws = (lambda _: weights) if dropout_p > 0 else None
        (out, lse, seed, seed_on_device), stream = kernels.run(
            cpu_forward, (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal),
            {"scale": scale}, draws)
        kernels.price(stream, FORWARD, cost.attention_forward_facts(query, key, value, out, is_causal, attn_bias))
        # The seed and offset are host tensors, as CUDA's kernel returns them, except under graph
        # capture: there every replay draws a new seed, which the backward reads from the device.
        if dropout_p > 0 and capture.capturing(stream):
            return out, lse, seed_on_device, torch.zeros((), dtype=torch.int64, device=query.device)
        return out, lse, torch.tensor(seed, dtype=torch.int64), torch.tensor(0, dtype=torch.int64)

    def backward(grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, philox_offset, dropout_p,
                 grad_input_mask, is_causal=False, *, scale=None):
        bias_grad = attn_bias is not None and bool(grad_input_mask[3])
        grads, stream = kernels.run(cpu_backward,
                                    (grad_out, query, key, value, attn_bias, out, logsumexp, philox_seed, dropout_p,
                                     bias_grad, is_causal), {"scale": scale})
        if grads[3] is not None:  # CUDA's rows of bias gradients are padded; the tensor views their start
            columns = attn_bias.shape[-1]
            padded = attn_bias.new_empty(attn_bias.shape[:-1] + (_round_up(columns, BIAS_ALIGN),))[..., :columns]
            grads = grads[:3] + (padded.copy_(grads[3]),)
        facts = cost.attention_backward_facts(grad_out, query, key, value, out, grads, is_causal)
        kernels.price(stream, BACKWARD, facts)
        return grads

    kernels.register(FORWARD, forward)
    kernels.register(BACKWARD, backward)
