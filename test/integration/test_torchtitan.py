"""torchtitan (pytorch/torchtitan), unchanged, trains its llama3 debug model under fgpu on one
simulated node in compute mode: FSDP over 4 ranks, FSDP 2 x TP 2 and PP 2 x FSDP 2, five steps
each, its own per-step log showing the loss falling, and fgpu's report one step per training step.
Its dataset and tokenizer are made here (a JSON line per document, a byte-level BPE), as a
torchtitan checkout's tests/assets would give them. Skips (exit 77) without PyTorch's CUDA build
or torchtitan in build/torch-venv (scripts/setup-torch installs it)."""

import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

from rank_jobs import FGPU
from torch_jobs import PYTHON, TORCHRUN, require_modules

# Short sequences and small batches: a rank's CPU work is its share of 2 x 128 tokens a step.
TRAINING = ["--module", "llama3", "--config", "llama3_debugmodel", "--training.steps", "5", "--training.seq-len",
            "128", "--training.local-batch-size", "2", "--validator.no-enable", "--checkpoint.no-enable",
            # Replaying its captured forward and backward is not yet right on fake GPUs.
            "--training.disable-cuda-graphs"]
STEP_LINE = re.compile(r"step:\s*(\d+)\s+loss:\s*(-?[\d.]+)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")

ASSETS = """
import json, random, sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
folder = sys.argv[1]
random.seed(0)
words = "the model trains on a cluster of gpus with data tensor and pipeline parallel ranks".split()
documents = [" ".join(random.choice(words) for _ in range(random.randint(200, 600))) for _ in range(200)]
with open(folder + "/c4_test/data.json", "w") as f:
    f.writelines(json.dumps({"text": d}) + "\\n" for d in documents)
tokenizer = Tokenizer(models.BPE())
tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tokenizer.decoder = decoders.ByteLevel()
special = ["<|begin_of_text|>", "<|end_of_text|>"]
tokenizer.train_from_iterator(documents, trainers.BpeTrainer(vocab_size=1024, special_tokens=special,
                                                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tokenizer.save(folder + "/tokenizer/tokenizer.json")
with open(folder + "/tokenizer/tokenizer_config.json", "w") as f:
    json.dump({"bos_token": special[0], "eos_token": special[1], "add_bos_token": True, "add_eos_token": True}, f)
"""


def make_workspace():
    """A folder laid out as torchtitan's configs expect: tests/assets/{c4_test,tokenizer}."""
    work = Path(tempfile.mkdtemp(prefix="fakegpu-torchtitan-"))
    assets = work / "tests" / "assets"
    for sub in ("c4_test", "tokenizer"):
        (assets / sub).mkdir(parents=True)
    subprocess.run([str(PYTHON), "-c", ASSETS, str(assets)], check=True, timeout=300)
    return work


class Torchtitan(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = make_workspace()

    def train(self, ranks, *parallelism):
        report = self.work / f"report-{'-'.join(parallelism) or 'fsdp'}.json"
        env = dict(os.environ, PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
        r = subprocess.run([FGPU, "--gpu", "h100", "--nodes", "1", "--gpus-per-node", str(ranks), "--report",
                            str(report), str(TORCHRUN), f"--nproc_per_node={ranks}", "-m", "torchtitan.train",
                            *TRAINING, *parallelism], capture_output=True, text=True, env=env, timeout=900,
                           cwd=self.work)
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-8000:])
        return r, json.loads(report.read_text())

    def check_training(self, r, report):
        # Every rank logs each step; ranks without the loss (earlier pipeline stages) log -2.
        losses = {}
        for line in ANSI.sub("", r.stdout + r.stderr).splitlines():
            m = STEP_LINE.search(line)
            if m and float(m.group(2)) > 0:
                losses.setdefault(int(m.group(1)), set()).add(round(float(m.group(2)), 5))
        self.assertEqual(sorted(losses), [1, 2, 3, 4, 5], r.stderr[-4000:])
        self.assertTrue(all(len(v) == 1 for v in losses.values()), f"ranks disagree on the loss: {losses}")
        first, last = min(losses[1]), min(losses[5])
        self.assertLess(last, first - 0.5, f"the loss did not fall: {losses}")
        # One optimizer step per training step, though torchtitan's container of optimizers is one itself.
        self.assertEqual(report["steps"]["count"], 5, report["steps"])
        self.assertGreater(report["steps"]["median_time_us"], 0)
        self.assertRegex(r.stdout + r.stderr, r"predicted step time: [\d.]+ ms \(median of steps 2-5")

    def test_fsdp_over_four_ranks(self):
        self.check_training(*self.train(4))

    def test_fsdp_with_tensor_parallel(self):
        r, report = self.train(4, "--parallelism.tensor-parallel-degree", "2")
        self.check_training(r, report)
        self.assertGreater(len(report["communicators"]), 2, "TP and FSDP each have communicators of their own")

    def test_pipeline_with_fsdp(self):
        r, report = self.train(4, "--parallelism.pipeline-parallel-degree", "2")
        self.check_training(r, report)
        self.assertIn("Send", json.dumps(report["collectives"]), "pipeline stages pass activations point to point")


if __name__ == "__main__":
    require_modules(["torchtitan", "tokenizers"], "torchtitan")
    unittest.main()
