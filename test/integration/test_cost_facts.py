"""What the PyTorch hook tells the kernel model about an operator (fakegpu/torch_hook/cost.py),
from CPU tensors of the shapes and types a CUDA program would pass: no GPU, no fgpu run. Runs on
the Python of build/torch-venv (skips, exit 77, without it)."""

import os
import sys
import unittest
from pathlib import Path

from rank_jobs import REPO
from torch_jobs import PYTHON, TORCH_VENV

try:
    import torch
except ImportError:
    if PYTHON.exists() and Path(sys.executable) != PYTHON:
        os.execv(str(PYTHON), [str(PYTHON), __file__, *sys.argv[1:]])
    print(f"skipped: needs PyTorch ({TORCH_VENV} has none; ./scripts/setup-torch installs it)")
    sys.exit(77)

sys.path.insert(0, str(REPO))
from fakegpu.torch_hook import bridge as B  # noqa: E402
from fakegpu.torch_hook import cost  # noqa: E402


def facts(name, *args):
    op = getattr(torch.ops.aten, name.split("::")[1].split(".")[0])
    return cost.op_facts(name, args, op(*args))


class BatchNorm(unittest.TestCase):
    """cuDNN runs batch norm unless the tensors are bf16 or doubles, half ones lack fp32 weights, or
    there is no weight: then PyTorch's own kernels do, which the model prices at rates of their own."""

    def batch_norm(self, dtype, weight_dtype):
        x = torch.randn(4, 8, 5, 5, dtype=dtype)
        weight = None if weight_dtype is None else torch.ones(8, dtype=weight_dtype)
        bias = None if weight_dtype is None else torch.zeros(8, dtype=weight_dtype)
        args = (x, weight, bias, torch.zeros(8), torch.ones(8), True, 0.1, 1e-5)
        # The CPU kernel takes one type; the facts need only the results' shapes.
        result = (torch.empty_like(x), torch.empty(8), torch.empty(8))
        return cost.op_facts("aten::native_batch_norm", args, result)

    def test_who_runs_it(self):
        cases = {(torch.float32, torch.float32): 0, (torch.bfloat16, torch.bfloat16): 1,
                 (torch.bfloat16, torch.float32): 1, (torch.float16, torch.float32): 0,
                 (torch.float16, torch.float16): 1, (torch.float64, torch.float64): 1, (torch.float32, None): 1}
        for (dtype, weight_dtype), own in cases.items():
            f = self.batch_norm(dtype, weight_dtype)
            self.assertEqual(f.kind, B.BATCH_NORM)
            self.assertEqual(list(f.dims[:4]), [4 * 25, 8, 1, own], (dtype, weight_dtype))


class Convolution(unittest.TestCase):
    def test_layout_and_shape(self):
        x = torch.randn(2, 16, 9, 9, dtype=torch.bfloat16)
        w = torch.randn(32, 16, 3, 3, dtype=torch.bfloat16)
        args = (w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        nchw = facts("aten::convolution", x, *args)
        self.assertEqual((nchw.kind, nchw.math, nchw.element_bytes), (B.CONV, B.HALF, 2))
        self.assertEqual(list(nchw.dims), [2, 16, 81, 32, 9, 81, 1, 0])
        self.assertEqual(nchw.flags & B.CHANNELS_LAST, 0)
        last = facts("aten::convolution", x.to(memory_format=torch.channels_last),
                     w.to(memory_format=torch.channels_last), *args[1:])
        self.assertEqual(last.flags & B.CHANNELS_LAST, B.CHANNELS_LAST)


class MatrixProducts(unittest.TestCase):
    def test_which_matrices_hold_k_apart(self):
        x, w, dy = torch.empty(64, 32), torch.empty(16, 32), torch.empty(64, 16)
        # A Linear layer: forward x @ w.T (both K-major), input gradient dy @ w (w holds K apart),
        # weight gradient dy.T @ x (both hold K apart).
        self.assertEqual(facts("aten::mm", x, w.t()).dims[4], 0)
        self.assertEqual(facts("aten::mm", dy, w).dims[4], 1)
        self.assertEqual(facts("aten::mm", dy.t(), x).dims[4], 2)
        self.assertEqual(list(facts("aten::mm", dy.t(), x).dims[:4]), [1, 16, 32, 64])


class Elementwise(unittest.TestCase):
    """PyTorch's elementwise kernels vectorize over contiguous operands of one type; otherwise the
    facts say what each element costs the SMs: operands converted, loop dimensions (op_facts.h).
    On the meta device, as a device's tensors (a copy from the host is another kind of operator)."""

    def elementwise(self, name, args, result):
        f = cost.op_facts(name, args, result, elementwise=True)
        self.assertEqual(f.kind, B.MEMORY)
        return list(f.dims[:5])

    def randn(self, *shape, dtype=torch.float32):
        return torch.empty(*shape, dtype=dtype, device="meta")

    def test_contiguous_operands_of_one_type_vectorize(self):
        x, y = self.randn(4, 8, 16), self.randn(4, 8, 16)
        self.assertEqual(self.elementwise("aten::add", (x, y), x + y), [0] * 5)
        # A permuted tensor and the result that keeps its layout walk memory alike: one loop.
        p = x.permute(2, 0, 1)
        self.assertEqual(self.elementwise("aten::mul", (p, 2.0), p * 2.0), [0] * 5)
        # fp32 into bf16 has a vectorized kernel of its own; bf16 into fp32 converts as it loads.
        half = self.randn(4, 8, 16, dtype=torch.bfloat16)
        self.assertEqual(self.elementwise("aten::copy_", (half, x), half), [0] * 5)
        self.assertEqual(self.elementwise("aten::copy_", (x, half), x), [1, x.numel(), 2, 0, 0])

    def test_mixed_types_convert_every_operand(self):
        x, half = self.randn(4, 8, 16), self.randn(4, 8, 16, dtype=torch.bfloat16)
        self.assertEqual(self.elementwise("aten::add", (x, half), x + half), [1, x.numel(), 3, 0, 0])
        # Booleans are taken as they are: no conversion.
        mask = x > 0
        self.assertEqual(self.elementwise("aten::where", (mask, x, x), torch.where(mask, x, x)), [0] * 5)
        # In place, the tensor written is read too.
        self.assertEqual(self.elementwise("aten::add_", (x, half), x), [1, x.numel(), 3, 0, 0])
        # A scalar from the host is an argument, not an operand.
        scalar = torch.tensor(2.0)
        self.assertEqual(self.elementwise("aten::mul", (x, scalar), x), [0] * 5)

    def test_strided_loops_count_their_dimensions(self):
        x = self.randn(2, 3, 4, 5)
        # The last two dimensions swapped and copied into rows walk memory apart; the first two
        # are walked alike by both and merge.
        swapped = x.transpose(2, 3)
        out = self.randn(2, 3, 5, 4)
        self.assertEqual(self.elementwise("aten::copy_", (out, swapped), out), [1, x.numel(), 0, 3, 0])
        # A broadcast operand (stride 0) is strided over one dimension.
        g = self.randn(()).expand(2, 3, 4, 5)
        self.assertEqual(self.elementwise("aten::mul", (g, x), g * x), [1, x.numel(), 0, 1, 0])
        # A row copied into every row: the row's dimension, then the rest merged (stride 0 in all).
        out = self.randn(2, 3, 4, 5)
        self.assertEqual(self.elementwise("aten::copy_", (out, self.randn(5)), out), [1, out.numel(), 0, 2, 0])

    def test_concatenations_of_strided_tensors(self):
        parts = [self.randn(2, 3, 5, 4).transpose(1, 2) for _ in range(3)]
        stacked = torch.stack(parts)
        f = cost.op_facts("aten::stack", (parts,), stacked)
        self.assertEqual(list(f.dims[:5]), [1, stacked.numel(), 0, 0, 1])
        # Beyond 4 dimensions PyTorch copies each input into its slice.
        deep = [self.randn(2, 3, 5, 4, 2).transpose(1, 2) for _ in range(3)]
        f = cost.op_facts("aten::cat", (deep,), torch.cat(deep))
        self.assertEqual(list(f.dims[:5]), [3, 3 * deep[0].numel(), 0, 5, 0])
        packed = [p.contiguous() for p in parts]
        self.assertEqual(list(cost.op_facts("aten::stack", (packed,), torch.stack(packed)).dims[:5]), [0] * 5)


if __name__ == "__main__":
    unittest.main()
