"""What the torchtitan benchmarks share: a torchtitan config trained for three steps under
`fgpu --representative` (shapes mode) on a cluster of 8-GPU servers (H100 unless told), from one process, in a
workspace of the synthetic dataset and tokenizer the tests write."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from representative_scale import run_sampled

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / "build" / "torch-venv" / "bin" / "python"
sys.path.insert(0, str(ROOT / "test" / "integration"))


def workspace_or_skip():
    """A workspace for torchtitan's configs (tests/assets); exits 77 (skipped) without torchtitan."""
    if not PYTHON.exists() or subprocess.run([str(PYTHON), "-c", "import torch, torchtitan, tokenizers"],
                                             capture_output=True).returncode != 0:
        print(f"skipped: needs PyTorch's CUDA build and torchtitan in {PYTHON.parent.parent} (./scripts/setup-torch)")
        sys.exit(77)
    from test_torchtitan import make_workspace
    return make_workspace()  # the model keeps its own vocabulary


def job_env():
    """A torchtitan job's environment here: offline (the workspace holds its data and tokenizer)."""
    return dict(os.environ, PYTHONWARNINGS="ignore", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")


def chosen(parser, option, value, known):
    """The names a comma-separated option lists (all of `known` when empty); refuses, naming them,
    any it does not know."""
    names = value.split(",") if value else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"{option}: no {', '.join(unknown)} (there are {', '.join(known)})")
    return names


def train(gpus, workspace, module, config, *options, gpu="h100"):
    """torchtitan's `config` of `module` for three steps on `gpus` GPUs of the preset family `gpu`,
    8 a server; (the report, wall seconds, peak host memory in bytes of every process fgpu
    started, summed)."""
    report = Path(tempfile.mkdtemp(prefix="fakegpu-torchtitan-bench-")) / "report.json"
    nodes = gpus // 8
    command = [str(ROOT / "fgpu"), "--representative", "--gpu", gpu, "--nodes", str(nodes), "--gpus-per-node", "8",
               "--report", str(report), str(PYTHON.parent / "torchrun"), "--nproc_per_node=8", f"--nnodes={nodes}",
               "-m", "torchtitan.train", "--module", module, "--config", config,
               "--hf-assets-path", "./tests/assets/tokenizer", "--dataloader.dataset", "c4_test",
               "--profiler.no-enable-profiling", "--metrics.no-enable-tensorboard", "--training.steps", "3",
               "--validator.no-enable", "--checkpoint.no-enable", *options]
    wall, host, output, code = run_sampled(command, job_env(), cwd=workspace)
    if code != 0:
        sys.exit(f"{config} on {gpus} GPUs failed:\n{output[-3000:]}")
    return json.loads(report.read_text()), wall, host
