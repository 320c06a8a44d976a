"""The CUDA-only operators of nn.SyncBatchNorm, in terms of operators that have CPU kernels.

SyncBatchNorm splits batch norm in two around its collectives: each rank reduces its own batch to
per-channel statistics (batch_norm_stats), all-gathers them, and combines every rank's with the
counts of elements behind them (batch_norm_gather_stats_with_counts), updating the running
statistics as it goes; the backward likewise reduces locally (batch_norm_backward_reduce),
all-reduces, and finishes per element (batch_norm_backward_elemt). Sums run in float64 and
results take CUDA's dtypes: statistics in float32 for half-precision inputs."""

import torch

from fakegpu.torch_hook import kernels
from fakegpu.torch_hook.operators.fallbacks import memory_bound

STATS = "aten::batch_norm_stats"
GATHER = "aten::batch_norm_gather_stats"
GATHER_WITH_COUNTS = "aten::batch_norm_gather_stats_with_counts"
ELEMENT = "aten::batch_norm_elemt"
BACKWARD_REDUCE = "aten::batch_norm_backward_reduce"
BACKWARD_ELEMENT = "aten::batch_norm_backward_elemt"
NAMES = (STATS, GATHER, GATHER_WITH_COUNTS, ELEMENT, BACKWARD_REDUCE, BACKWARD_ELEMENT)


def _channel(t, x):
    """A per-channel vector shaped to broadcast over x (batch, channels, ...)."""
    return t.double().reshape((1, -1) + (1,) * (x.dim() - 2))


def _others(x):
    """Every dimension but the channels'."""
    return (0,) + tuple(range(2, x.dim()))


def _stats_dtype(x):
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype


def _stats(x, eps):
    xd = x.double()
    mean = xd.mean(_others(x))
    var = (xd - _channel(mean, x)).pow(2).mean(_others(x))  # biased, as batch norm normalizes
    dtype = _stats_dtype(x)
    return mean.to(dtype), (var + eps).rsqrt().to(dtype)


def _gather_with_counts(x, mean, invstd, running_mean, running_var, momentum, eps, counts):
    # Each rank's (count, mean, variance) pooled: the variance of the union is the weighted mean of
    # each part's variance plus its mean's squared distance from the pooled mean.
    n = counts.double().reshape(-1, 1)
    total = n.sum()
    means = mean.double()
    variances = invstd.double().pow(-2) - eps
    pooled_mean = (n * means).sum(0) / total
    pooled_var = (n * (variances + (means - pooled_mean).pow(2))).sum(0) / total
    if running_mean is not None:
        running_mean.copy_((1 - momentum) * running_mean.double() + momentum * pooled_mean)
    if running_var is not None:  # unbiased, as the running variance always is
        unbiased = pooled_var * total / (total - 1).clamp(min=1)
        running_var.copy_((1 - momentum) * running_var.double() + momentum * unbiased)
    return pooled_mean.to(mean.dtype), (pooled_var + eps).rsqrt().to(mean.dtype)


def _gather(x, mean, invstd, running_mean, running_var, momentum, eps, count):
    counts = torch.full((mean.shape[0],), float(count), dtype=torch.float64, device=mean.device)
    return _gather_with_counts(x, mean, invstd, running_mean, running_var, momentum, eps, counts)


def _element(x, weight, bias, mean, invstd, eps):
    y = (x.double() - _channel(mean, x)) * _channel(invstd, x)
    if weight is not None:
        y = y * _channel(weight, x)
    if bias is not None:
        y = y + _channel(bias, x)
    return y.to(x.dtype)


def _backward_reduce(grad_out, x, mean, invstd, weight, input_g, weight_g, bias_g):
    dy = grad_out.double()
    sum_dy = dy.sum(_others(x))
    sum_dy_xmu = (dy * (x.double() - _channel(mean, x))).sum(_others(x))
    grad_dtype = weight.dtype if weight is not None else mean.dtype
    grad_weight = (sum_dy_xmu * invstd.double()).to(grad_dtype)
    return sum_dy.to(mean.dtype), sum_dy_xmu.to(mean.dtype), grad_weight, sum_dy.to(grad_dtype)


def _backward_element(grad_out, x, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    # d/dx of (x - mean) * invstd * w over all ranks' elements: the gradient less its mean, less
    # its projection on the normalized input, scaled back.
    total = count.double().sum()
    mean_dy = _channel(sum_dy, x) / total
    mean_dy_xmu = _channel(sum_dy_xmu, x) / total
    istd = _channel(invstd, x)
    scale = istd * _channel(weight, x) if weight is not None else istd
    grad = grad_out.double() - mean_dy - (x.double() - _channel(mean, x)) * istd.pow(2) * mean_dy_xmu
    return (grad * scale).to(x.dtype)


def install():
    """Registers the operators' CUDA kernels."""
    for name, fn in ((STATS, _stats), (GATHER, _gather), (GATHER_WITH_COUNTS, _gather_with_counts),
                     (ELEMENT, _element), (BACKWARD_REDUCE, _backward_reduce), (BACKWARD_ELEMENT, _backward_element)):
        kernels.register(name, memory_bound(name, fn))
