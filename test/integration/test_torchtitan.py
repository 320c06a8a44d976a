"""torchtitan (pytorch/torchtitan), unchanged, trains its llama3 debug model under fgpu on one
simulated node in compute mode: FSDP over 4 ranks, HSDP 2 x 2, FSDP 2 x TP 2, FSDP 2 x CP 2 and
PP 2 x FSDP 2, five steps each, its own per-step log showing the loss falling, and fgpu's report
one step per training step. As torchtitan's converging guide says, each gives the losses of FSDP
over the same data-parallel ranks (within 2%), and its CUDA graphs the losses of its eager steps.
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
from test_representative import communicators, peaks, ranks
from torch_jobs import PYTHON, TORCHRUN, require_modules

# Short sequences and small batches: a rank's CPU work is its share of 2 x 128 tokens a step.
# torchtitan captures each step's forward and backward in a CUDA graph from the second step on.
TRAINING = ["--training.steps", "5", "--training.seq-len", "128", "--training.local-batch-size", "2",
            "--validator.no-enable", "--checkpoint.no-enable"]
LLAMA = ("llama3", "llama3_debugmodel")
# A mixture of experts: DeepSeek-V3's debug model, whose experts' tokens travel by all-to-all under
# expert parallelism (which torchtitan runs without CUDA graphs).
DEEPSEEK = ("deepseek_v3", "deepseek_v3_debugmodel")
# torchtitan runs pipelines without CUDA graphs (it refuses them), and so does anyone asking it to.
EAGER = ("--training.disable-cuda-graphs",)
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


class TorchtitanRuns(unittest.TestCase):
    """Runs torchtitan.train under fgpu in a workspace of its assets."""

    @classmethod
    def setUpClass(cls):
        cls.work = make_workspace()

    def train(self, ranks, *parallelism, nodes=1, fgpu_options=(), env=None, fails=False, model=LLAMA):
        """torchtitan's `model` (module, config) on `ranks` ranks over `nodes` simulated H100 nodes;
        (fgpu's output, report), or fgpu's output alone where the job is to fail."""
        name = "-".join(model + parallelism + tuple(fgpu_options)).replace("-", "")
        report = self.work / f"report-{name}-{ranks}.json"
        env = dict(os.environ, PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", **(env or {}))
        per_node = ranks // nodes
        r = subprocess.run([FGPU, *fgpu_options, "--gpu", "h100", "--nodes", str(nodes), "--gpus-per-node",
                            str(per_node), "--report", str(report), str(TORCHRUN), f"--nproc_per_node={per_node}",
                            f"--nnodes={nodes}", "-m", "torchtitan.train", "--module", model[0], "--config", model[1],
                            *TRAINING, *parallelism],
                           capture_output=True, text=True, env=env, timeout=900, cwd=self.work)
        if fails:
            self.assertNotEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-8000:])
            return r
        self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-8000:])
        return r, json.loads(report.read_text())


def step_losses(output):
    """{step: set of the losses its ranks logged} in a run's output; ranks without the loss (earlier
    pipeline stages) log -2."""
    losses = {}
    for line in ANSI.sub("", output).splitlines():
        m = STEP_LINE.search(line)
        if m and float(m.group(2)) > 0:
            losses.setdefault(int(m.group(1)), set()).add(round(float(m.group(2)), 5))
    return losses


class Torchtitan(TorchtitanRuns):
    # torchtitan's rule for comparing parallelisms (its docs/converging.md): the same seed, and the
    # same data-parallel degree and local batch, so that every step sees the same tokens.
    SEED = ("--debug.seed", "42")
    # The same training, not the same numbers: how the weights are sharded decides which random
    # numbers initialise them (DTensor's random operators, as on GPUs), and tensor parallelism
    # splits the products' sums. Measured: 0.2% apart at step 1, 0.7% at step 4.
    SAME_LOSS = 0.02

    def check_training(self, r, report):
        losses = step_losses(r.stdout + r.stderr)
        self.assertEqual(sorted(losses), [1, 2, 3, 4, 5], r.stderr[-4000:])
        self.assertTrue(all(len(v) == 1 for v in losses.values()), f"ranks disagree on the loss: {losses}")
        first, last = min(losses[1]), min(losses[5])
        self.assertLess(last, first - 0.5, f"the loss did not fall: {losses}")
        # One optimizer step per training step, though torchtitan's container of optimizers is one itself.
        self.assertEqual(report["steps"]["count"], 5, report["steps"])
        self.assertGreater(report["steps"]["median_time_us"], 0)
        self.assertRegex(r.stdout + r.stderr, r"predicted step time: [\d.]+ ms \(median of steps 2-5")
        return {step: min(v) for step, v in losses.items()}

    def test_fsdp_over_four_ranks(self):
        graphed = self.check_training(*self.train(4, *self.SEED))
        # Steps replayed from CUDA graphs (FSDP2 frees and reallocates its parameters' memory around
        # each pass) compute what the same steps compute eagerly.
        self.assertEqual(graphed, self.check_training(*self.train(4, *self.SEED, *EAGER)))
        # HSDP, 2 replicas of FSDP over 2, keeps FSDP 4's data-parallel degree and so its tokens.
        r, report = self.train(4, "--parallelism.data-parallel-replicate-degree", "2",
                               "--parallelism.data-parallel-shard-degree", "2", *self.SEED)
        self.check_same_losses(graphed, self.check_training(r, report), "FSDP 4", "HSDP 2 x 2")
        sizes = sorted(len(c["global_ranks"]) for c in report["communicators"])
        self.assertGreaterEqual(sizes.count(2), 4, f"HSDP's shard and replica groups, each of 2 ranks: {sizes}")

    def check_same_losses(self, reference, other, reference_name, other_name):
        for step, loss in reference.items():
            self.assertAlmostEqual(other[step], loss, delta=self.SAME_LOSS * loss,
                                   msg=f"step {step}: {reference_name} {reference}, {other_name} {other}")

    def test_fsdp_with_tensor_parallel(self):
        r, report = self.train(4, "--parallelism.tensor-parallel-degree", "2", *self.SEED)
        with_tp = self.check_training(r, report)
        self.assertGreater(len(report["communicators"]), 2, "TP and FSDP each have communicators of their own")
        # The same training as FSDP over the same two data-parallel ranks alone: the same losses.
        fsdp = self.check_training(*self.train(2, *self.SEED, *EAGER))
        self.check_same_losses(fsdp, with_tp, "FSDP 2", "FSDP 2 x TP 2")

    def test_context_parallel_with_fsdp(self):
        # Context parallelism splits each sequence in blocks of 128 tokens per rank: 256 tokens over 2.
        longer = ("--training.seq-len", "256", *self.SEED)
        with_cp = self.check_training(*self.train(4, "--parallelism.context-parallel-degree", "2", *longer))
        self.check_same_losses(self.check_training(*self.train(2, *longer, *EAGER)), with_cp, "FSDP 2",
                               "FSDP 2 x CP 2")

    def test_pipeline_with_fsdp(self):
        r, report = self.train(4, "--parallelism.pipeline-parallel-degree", "2", *EAGER)
        self.check_training(r, report)
        self.assertIn("Send", json.dumps(report["collectives"]), "pipeline stages pass activations point to point")

    def test_mixture_of_experts_with_expert_parallel(self):
        r, report = self.train(2, "--parallelism.expert-parallel-degree", "2", *self.SEED, *EAGER, model=DEEPSEEK)
        with_ep = self.check_training(r, report)
        # The experts' tokens go to the rank holding each expert and back, as messages of sizes
        # the router decided; the experts' grouped products are priced as matrix math.
        self.assertGreater(report["collectives"]["Send"]["calls"], 0, report["collectives"])
        rows = {row["name"]: row for row in report["operators"]["ranks"][0]["rows"]}
        self.assertEqual(rows["aten::_grouped_mm"]["category"], "matrix", rows.get("aten::_grouped_mm"))
        # The same training as every expert on every rank.
        self.check_same_losses(self.check_training(*self.train(2, *self.SEED, *EAGER, model=DEEPSEEK)), with_ep,
                               "FSDP 2", "FSDP 2 x EP 2")


class TorchtitanShapes(TorchtitanRuns):
    """torchtitan in shapes mode (values not computed, step time and memory modeled): the small
    control values it checks (positions against the RoPE cache, trunc_normal_'s rejection loop
    over DTensors) are computed or read as zero, and `fgpu --representative` predicts a 16-rank job
    from one process, and a pipeline from a process per stage, as running every rank does (checked
    at 8 ranks here); a pipeline without a process per stage runs again with them, or, where the
    user listed the processes, is refused naming what to run."""

    SHAPES = {"FAKEGPU_TORCH_COMPUTE": "shapes"}
    FSDP_BY_TP = ("--training.steps", "3", "--parallelism.tensor-parallel-degree", "2")
    PP_BY_FSDP = ("--training.steps", "3", "--parallelism.pipeline-parallel-degree", "2", *EAGER)

    def check_steps(self, r, report):
        self.assertEqual(report["steps"]["count"], 3, report["steps"])
        self.assertRegex(r.stdout + r.stderr, r"predicted step time: [\d.]+ ms \(median of steps 2-3")
        self.assertRegex(ANSI.sub("", r.stdout + r.stderr), r"step:\s*3\s+loss")

    def check_representative(self, parallelism, processes, model=LLAMA):
        """Eight ranks on two nodes of 4, every rank against `processes` standing for the rest."""
        full_run, full = self.train(8, *parallelism, nodes=2, env=self.SHAPES, model=model)
        self.check_steps(full_run, full)
        listed = {"FAKEGPU_REPRESENTATIVE": ",".join(map(str, processes))}
        one_run, one = self.train(8, *parallelism, nodes=2, fgpu_options=["--representative"], env=listed,
                                  model=model)
        self.check_steps(one_run, one)
        self.assertEqual(one["representative"]["processes"], processes, one["representative"])
        self.assertAlmostEqual(one["steps"]["median_time_us"], full["steps"]["median_time_us"],
                               delta=0.01 * full["steps"]["median_time_us"])
        self.assertEqual(communicators(one), communicators(full))
        self.assertEqual(ranks(one), ranks(full))
        self.assertEqual(peaks(one), peaks(full))
        return one_run

    def test_fsdp_with_tensor_parallel_on_two_nodes_every_rank_and_representative(self):
        self.check_representative(self.FSDP_BY_TP, [0])

    def test_mixture_of_experts_every_rank_and_representative(self):
        # Expert parallel 4 within each node: the token counts the router decides (spread evenly
        # over the experts in shapes mode) size the all-to-all's messages, between stood-in ranks
        # too, and on the second node's group, which no process holds.
        r = self.check_representative(("--training.steps", "3", "--parallelism.expert-parallel-degree", "4", *EAGER),
                                      [0], model=DEEPSEEK)
        self.assertIn("so a mixture of experts is modeled with balanced routing", r.stderr)

    def test_pipeline_with_a_process_per_stage_as_every_rank(self):
        # PP 2 x FSDP 4: stage 0 on the first node's ranks, stage 1 on the second's.
        self.check_representative(self.PP_BY_FSDP, [0, 4])

    def test_pipeline_from_one_process_runs_again_with_a_process_per_stage(self):
        # Rank 0 alone, as the user listed: refused, naming what to run.
        r = self.train(8, *self.PP_BY_FSDP, nodes=2, fgpu_options=["--representative"], fails=True,
                       env={"FAKEGPU_REPRESENTATIVE": "0"})
        self.assertIn("stages do different work, and ranks [4] run no process: run it with "
                      "FAKEGPU_REPRESENTATIVE=0,4", r.stdout + r.stderr)
        # No list: fgpu's first guess (rank 0) finds the pipeline, and fgpu runs the job again.
        r, report = self.train(8, *self.PP_BY_FSDP, nodes=2, fgpu_options=["--representative"])
        self.check_steps(r, report)
        self.assertIn("fgpu: running the job again with a process for each kind of rank: FAKEGPU_REPRESENTATIVE=0,4",
                      r.stderr)
        self.assertEqual(report["representative"]["processes"], [0, 4], report["representative"])

    def test_sixteen_ranks_on_two_nodes_from_one_process(self):
        r, report = self.train(16, *self.FSDP_BY_TP, nodes=2, fgpu_options=["--representative"])
        self.check_steps(r, report)
        self.assertEqual(report["world_size"], 16)
        stood_in = [rank for rank in report["ranks"] if rank.get("stood_in_by") is not None]
        self.assertEqual(len(stood_in), 15, report["ranks"])
        # TP pairs within a node and FSDP groups of 8 across both nodes, each dimension's groups all there.
        sizes = sorted(len(c["global_ranks"]) for c in report["communicators"])
        self.assertGreaterEqual(sizes.count(2), 8, sizes)
        self.assertGreaterEqual(sizes.count(8), 2, sizes)


if __name__ == "__main__":
    require_modules(["torchtitan", "tokenizers"], "torchtitan")
    unittest.main()
