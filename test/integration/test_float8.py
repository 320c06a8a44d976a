"""Float8 training with torchao, unchanged, on fake GPUs (test/torch/float8_training.py): the
converted layers train as on the CPU, and a Float8 product is priced at the GPU's Float8 rate.
Skips (exit 77) without PyTorch's CUDA build or torchao in build/torch-venv."""

import os
import re
import unittest

from torch_jobs import PYTHON, TORCH_SCRIPTS, fgpu_torch, require_modules

SCRIPT = TORCH_SCRIPTS / "float8_training.py"


class Float8(unittest.TestCase):
    def run_ok(self, *args, env=None):
        r = fgpu_torch("--nproc", "1", PYTHON, SCRIPT, *args, env=env)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-8000:])
        return r

    def test_converted_layers_train_as_on_the_cpu(self):
        r = self.run_ok()
        self.assertIn("as on the CPU, 18 Float8 products", r.stdout)

    def test_a_float8_product_costs_about_half_a_bf16_one(self):
        # H100: 1979 dense Float8 TFLOPS against 989 bf16, at the same share of the peak.
        r = self.run_ok("--price", env=dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes"))
        ratio = float(re.search(r"ratio ([0-9.]+)", r.stdout).group(1))
        self.assertGreater(ratio, 0.4, r.stdout)
        self.assertLess(ratio, 0.7, r.stdout)


if __name__ == "__main__":
    require_modules(["torchao.float8"], "torchao")
    unittest.main()
