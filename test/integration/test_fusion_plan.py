"""How fakegpu/torch_hook/fusion.py groups a compiled graph's operators into inductor's fused kernels,
and the bytes each kernel moves: aten graphs traced with fake tensors (make_fx), no GPU, no fgpu.
Runs itself again under build/torch-venv's Python; skips (exit 77) without PyTorch's CUDA build."""

import os
import subprocess
import sys
import unittest

from torch_jobs import PYTHON, REPO, require_torch

F32 = 4


def trace(f, *shapes):
    """f's aten graph on float32 inputs of these shapes, each node's value kept (as AOTAutograd's)."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx
    return make_fx(f, tracing_mode="fake")(*(torch.randn(*s) for s in shapes)).graph


def kernels(graph):
    """[(bytes, kernels it launches, sorted names of its operators)], in the order they are priced,
    the sizes those of the traced values."""
    from fakegpu.torch_hook import fusion
    planned = fusion.plan(graph)
    order = [k for node in graph.nodes for k in planned.close_before.get(node, ())] + planned.ended
    assert {n for k in order for n in k.nodes} == planned.members
    sizes = {n: fusion.sizes_of(n.meta.get("val")) for n in graph.nodes}
    return [(k.facts(sizes).bytes, k.facts(sizes).dims[0], sorted(n.target.__name__.split(".")[0] for n in k.nodes))
            for k in order]


class FusionPlan(unittest.TestCase):
    def test_an_elementwise_chain_is_one_kernel_reading_and_writing_once(self):
        n = 1 << 10
        self.assertEqual(kernels(trace(lambda x: (x * 2 + 1).relu(), (n,))), [(2 * n * F32, 1, ["add", "mul", "relu"])])

    def test_a_product_closes_the_kernel_it_reads_and_stays_a_library_call(self):
        import torch
        m, k, n = 64, 32, 16
        got = kernels(trace(lambda x, w: torch.mm(x.relu(), w).sigmoid() + 1, (m, k), (k, n)))
        self.assertEqual(got, [((m * k + m * k) * F32, 1, ["relu"]),           # x read, relu(x) written
                               ((m * n + m * n) * F32, 1, ["add", "sigmoid"])])  # the product read, result written

    def test_independent_chains_stay_apart_and_a_reader_of_both_merges_them(self):
        n = 256
        apart = kernels(trace(lambda x, y: ((x * 2) + 1, (y * 3) + 1), (n,), (n,)))
        self.assertEqual(apart, [(2 * n * F32, 1, ["add", "mul"]), (2 * n * F32, 1, ["add", "mul"])])
        merged = kernels(trace(lambda x, y: (x * 2) + (y * 3), (n,), (n,)))
        self.assertEqual(merged, [(3 * n * F32, 1, ["add", "mul", "mul"])])

    def test_views_are_read_through_and_a_broadcast_reads_its_source_once(self):
        rows, width = 128, 64
        got = kernels(trace(lambda x, b: (x.t() + b.unsqueeze(0)).relu(), (width, rows), (width,)))
        self.assertEqual(got, [((2 * rows * width + width) * F32, 1, ["add", "relu"])])

    def test_each_reduction_is_a_loop_of_its_own(self):
        import torch.nn.functional as F
        rows, width = 32, 128
        got = kernels(trace(lambda x: F.layer_norm(x, (width,)).softmax(-1) * 2, (rows, width)))
        [(nbytes, launched, names)] = got
        self.assertEqual(launched, 2)  # the norm's statistics, the softmax's
        self.assertEqual(nbytes, 2 * rows * width * F32)  # the norm's mean and rstd, unused, stay in registers


if __name__ == "__main__":
    if os.environ.get("FAKEGPU_FUSION_PLAN_IN_VENV") != "1":
        require_torch()
        env = dict(os.environ, FAKEGPU_FUSION_PLAN_IN_VENV="1",
                   PYTHONPATH=os.pathsep.join([str(REPO), os.path.dirname(__file__)]))
        sys.exit(subprocess.run([str(PYTHON), __file__, *sys.argv[1:]], env=env).returncode)
    unittest.main()
