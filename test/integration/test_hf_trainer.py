"""Hugging Face's Trainer, unchanged, on fake GPUs (test/torch/hf_trainer.py: GPT-2, Llama and
Mixtral, two ranks under torchrun) logs the same losses as the same job on the CPU with gloo.
Skips (exit 77) without PyTorch's CUDA build, transformers or accelerate in build/torch-venv."""

import json
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

from torch_jobs import TORCH_SCRIPTS, TORCHRUN, fgpu_torch, require_modules


class HuggingFaceTrainer(unittest.TestCase):
    def test_three_models_train_as_on_the_cpu(self):
        tmp = Path(tempfile.mkdtemp(prefix="fakegpu-hf-"))
        script = TORCH_SCRIPTS / "hf_trainer.py"
        # Nothing is downloaded: the models are built from their configurations.
        env = dict(os.environ, PYTHONWARNINGS="ignore::FutureWarning", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        r = fgpu_torch(TORCHRUN, "--nproc_per_node=2", script, "--out", tmp / "gpu.json", env=env)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-8000:])
        # --standalone: a rendezvous on a free port, as tests run side by side.
        cpu = subprocess.run([str(TORCHRUN), "--standalone", "--nproc_per_node=2", str(script), "--cpu", "--out",
                              str(tmp / "cpu.json")], capture_output=True, text=True, env=env, timeout=600, cwd=tmp)
        self.assertEqual(cpu.returncode, 0, cpu.stderr[-8000:])
        gpu, reference = (json.loads((tmp / name).read_text()) for name in ("gpu.json", "cpu.json"))
        self.assertEqual(sorted(gpu), ["gpt2", "llama", "mixtral"])
        for model, losses in reference.items():
            self.assertEqual(len(losses), 4, model)
            for got, want in zip(gpu[model], losses):
                self.assertAlmostEqual(got, want, delta=1e-4 * abs(want), msg=f"{model}: {gpu[model]} against {losses}")


if __name__ == "__main__":
    require_modules(["transformers", "accelerate"], "transformers with accelerate")
    unittest.main()
