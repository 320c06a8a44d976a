"""Shared helpers for the PyTorch tests: the Python with PyTorch's CUDA build that
scripts/setup-torch installs (build/torch-venv), and fgpu runs of the scripts in test/torch."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rank_jobs import FGPU, REPO
from trace_check import check_fgpu_trace

TORCH_SCRIPTS = REPO / "test" / "torch"
TORCH_VENV = Path(os.environ.get("FAKEGPU_TORCH_VENV") or REPO / "build" / "torch-venv")
PYTHON = TORCH_VENV / "bin" / "python"
TORCHRUN = TORCH_VENV / "bin" / "torchrun"

PROBE = """
import sys, torch, torch.distributed as dist
if torch.version.cuda is None:
    sys.exit("torch " + torch.__version__ + " is a CPU build")
if not dist.is_nccl_available():
    sys.exit("torch " + torch.__version__ + " has no NCCL support")
"""


def require_torch():
    """Exits with ctest's skip code (77), saying why, unless build/torch-venv has a CUDA build of
    torch with NCCL."""
    if not PYTHON.exists():
        print(f"skipped: needs PyTorch's CUDA build in {TORCH_VENV} (./scripts/setup-torch installs it)")
        sys.exit(77)
    r = subprocess.run([str(PYTHON), "-c", PROBE], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print(f"skipped: {TORCH_VENV}: {(r.stderr.strip().splitlines() or ['torch does not import'])[-1]}")
        sys.exit(77)


def require_modules(modules, what):
    """require_torch(), then exits with ctest's skip code (77), saying so, unless the PyTorch
    environment imports every one of `modules` (a library built on PyTorch, named `what`)."""
    require_torch()
    if subprocess.run([str(PYTHON), "-c", "import " + ", ".join(modules)], capture_output=True).returncode != 0:
        print(f"skipped: {what} is not installed in the PyTorch environment (scripts/setup-torch installs it "
              "when the package index is reachable)")
        sys.exit(77)


def fgpu_torch(*args, timeout=600, env=None):
    """Runs fgpu with the given arguments (scripts named by their file in test/torch) and returns
    the CompletedProcess; stdout and stderr are captured."""
    env = dict(os.environ if env is None else env)
    env.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")
    # From the temporary directory: a job without --report leaves its report there, not in the repository.
    r = subprocess.run([FGPU, *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout,
                       cwd=tempfile.gettempdir())
    check_fgpu_trace(args)
    return r
