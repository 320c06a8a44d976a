"""CUDA operators that have no CPU kernel but that PyTorch reaches on CUDA tensors, given one here
in terms of operators that have: the backward of the fused RMSNorm (nn.RMSNorm, F.rms_norm), whose
forward has a CPU kernel, and the fused LSTM and GRU cells and their backwards (nn.LSTM and nn.GRU
without cuDNN). The cells' workspaces are this module's own, what the backwards read: the LSTM's
four activated gates; the GRU's reset and update gates, its candidate, the previous hidden state
and the hidden part of the candidate's input (CUDA's layout).
Also histc, whose CPU kernel takes floating point only where CUDA's counts integers too (mixture
of experts routers count the tokens sent to each expert so), and ctc_loss's question whether to
use cuDNN or MIOpen. And pack_padded_sequence, whose batch sizes stay on the host, as CUDA's
leaves them (nn.utils.rnn checks)."""

import torch

from fakegpu.torch_hook import cost, kernels

RMS_NORM_BACKWARD = "aten::_fused_rms_norm_backward"
LSTM_CELL = "aten::_thnn_fused_lstm_cell"
LSTM_CELL_BACKWARD = "aten::_thnn_fused_lstm_cell_backward_impl"
GRU_CELL = "aten::_thnn_fused_gru_cell"
GRU_CELL_BACKWARD = "aten::_thnn_fused_gru_cell_backward"
HISTC = "aten::histc"
PACK_PADDED_SEQUENCE = "aten::_pack_padded_sequence"
# Whether ctc_loss may take cuDNN's or MIOpen's kernel: never here, so it takes the native one,
# which has a CPU twin (cuDNN is off on fake GPUs).
USE_LIBRARY_CTC_LOSS = ("aten::_use_cudnn_ctc_loss", "aten::_use_cudnn_ctc_loss.Tensor", "aten::_use_miopen_ctc_loss",
                        "aten::_use_miopen_ctc_loss.Tensor")
NAMES = (RMS_NORM_BACKWARD, LSTM_CELL, LSTM_CELL_BACKWARD, GRU_CELL, GRU_CELL_BACKWARD, HISTC,
         PACK_PADDED_SEQUENCE) + USE_LIBRARY_CTC_LOSS


def _histc(values, bins=100, min=0, max=0):
    if values.is_floating_point():
        return torch.histc(values, bins, min, max)
    # Integers, and the counts, are exact in double up to 2**53.
    return torch.histc(values.double(), bins, min, max).to(values.dtype)


def _rms_norm_backward(grad_out, x, normalized_shape, rstd, weight, output_mask):
    # y = x * rstd * w over the last len(normalized_shape) dimensions, so with x^ = x * rstd and
    # g = dy * w: dx = rstd * (g - x^ * mean(g * x^)), dw = sum of dy * x^ over the other dims.
    dims = tuple(range(x.dim() - len(normalized_shape), x.dim()))
    work = torch.float64 if x.dtype == torch.float64 else torch.float32
    xf, gf = x.to(work), grad_out.to(work)
    r = rstd.to(work).reshape(x.shape[:x.dim() - len(dims)] + (1,) * len(dims))
    x_hat = xf * r
    g = gf * weight.to(work) if weight is not None else gf
    grad_input = (r * (g - x_hat * (g * x_hat).mean(dims, keepdim=True))).to(x.dtype) if output_mask[0] else None
    grad_weight = None
    if output_mask[1] and weight is not None:
        other = tuple(range(x.dim() - len(dims)))
        grad_weight = (gf * x_hat).sum(other).to(weight.dtype)
    return grad_input, grad_weight


def _lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
    cy = f * cx + i * g
    return o * torch.tanh(cy), cy, torch.cat([i, f, g, o], 1)


def _lstm_cell_backward(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = torch.tanh(cy)
    grad_c = grad_cy.clone() if grad_cy is not None else torch.zeros_like(cy)
    grad_o = torch.zeros_like(o)
    if grad_hy is not None:
        grad_c = grad_c + grad_hy * o * (1 - tanh_cy * tanh_cy)
        grad_o = grad_hy * tanh_cy * o * (1 - o)
    grad_gates = torch.cat([grad_c * g * i * (1 - i), grad_c * cx * f * (1 - f), grad_c * i * (1 - g * g), grad_o], 1)
    grad_bias = grad_gates.sum(0) if has_bias else grad_gates.new_empty(0)
    return grad_gates, grad_c * f, grad_bias


def _gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates, hidden_gates = input_gates + input_bias, hidden_gates + hidden_bias
    input_r, input_z, input_n = input_gates.chunk(3, 1)
    hidden_r, hidden_z, hidden_n = hidden_gates.chunk(3, 1)
    r, z = torch.sigmoid(input_r + hidden_r), torch.sigmoid(input_z + hidden_z)
    n = torch.tanh(input_n + r * hidden_n)
    return n + z * (hx - n), torch.cat([r, z, n, hx, hidden_n], 1)


def _gru_cell_backward(grad_hy, workspace, has_bias):
    # hy = n + z * (hx - n), n = tanh(input_n + r * hidden_n), r and z sigmoids of their sums.
    r, z, n, hx, hidden_n = workspace.chunk(5, 1)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_n = grad_hy * (1 - z) * (1 - n * n)
    grad_r = grad_n * hidden_n * r * (1 - r)
    grad_input_gates = torch.cat([grad_r, grad_z, grad_n], 1)
    grad_hidden_gates = torch.cat([grad_r, grad_z, grad_n * r], 1)
    if has_bias:
        grad_input_bias, grad_hidden_bias = grad_input_gates.sum(0), grad_hidden_gates.sum(0)
    else:
        grad_input_bias = grad_hidden_bias = grad_input_gates.new_empty(0)
    return grad_input_gates, grad_hidden_gates, grad_hy * z, grad_input_bias, grad_hidden_bias


def _pack_padded_sequence(values, lengths, batch_first):
    data, batch_sizes = torch.ops.aten._pack_padded_sequence(values, lengths, batch_first)
    return data, batch_sizes.tolist()  # not a tensor: the result stays on the host


def memory_bound(name, fn):
    """CUDA operator `name`'s kernel, computing fn(*args) on stand-ins for its tensors, its
    time priced from its facts as the operator's (cost.op_facts)."""

    def kernel(*args):
        results, stream = kernels.run(fn, args, {})
        kernels.price(stream, name, cost.op_facts(name, args, results))
        return results

    return kernel


def install():
    """Registers the operators' CUDA kernels."""
    for name, fn in ((RMS_NORM_BACKWARD, _rms_norm_backward), (LSTM_CELL, _lstm_cell),
                     (LSTM_CELL_BACKWARD, _lstm_cell_backward), (GRU_CELL, _gru_cell),
                     (GRU_CELL_BACKWARD, _gru_cell_backward), (HISTC, _histc)):
        kernels.register(name, memory_bound(name, fn))
    for name in USE_LIBRARY_CTC_LOSS:
        kernels.register(name, lambda *args: False)
    pack = memory_bound(PACK_PADDED_SEQUENCE, _pack_padded_sequence)

    def pack_padded_sequence(*args):
        data, batch_sizes = pack(*args)
        return data, torch.tensor(batch_sizes, dtype=torch.int64)  # on the host, where CUDA's kernel leaves them

    kernels.register(PACK_PADDED_SEQUENCE, pack_padded_sequence)
