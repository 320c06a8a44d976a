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


if __name__ == "__main__":
    unittest.main()
