"""fgpu calibrate: times the operators of fakegpu/kernel_cases.py on this machine's real NVIDIA GPU
and writes them as a table of JSON lines, the kind verification/kernels/ keeps, then reads the
kernel model's rates for this GPU off it (fakegpu/rate_fit.py) into a GPU profile file that
`fgpu --gpu FILE` and a cluster YAML's `profile: FILE` name. About two minutes on an H100 to
measure, a few more to fit. `--fit TABLE` only fits, from a table measured before (any machine).
With --steps it measures instead whole training and inference steps (fakegpu/step_cases.py: their
time and GPU memory), each in a process of its own, for verification/steps/ and step_fidelity.py.

The measuring runs in a Python that has PyTorch's CUDA build (build/torch-venv by default), on
NVIDIA's own libraries: never under fgpu, whose GPUs are the model itself."""

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from .paths import REPO_ROOT

VENV_PYTHON = REPO_ROOT / "build" / "torch-venv" / "bin" / "python"


def default_python():
    return str(VENV_PYTHON) if VENV_PYTHON.exists() else sys.executable


def cmd_calibrate(argv) -> int:
    p = argparse.ArgumentParser(
        prog="fgpu calibrate",
        description="Time PyTorch's operators on this machine's real NVIDIA GPU (matrix products, memory-bound "
                    "kernels, norms, convolutions, attention, optimizers, the host's costs) and write them as a "
                    "table for fakegpu's kernel model. Then: python3 verification/bench/kernel_fidelity.py "
                    "--table TABLE --gpu PROFILE sets the model beside it.")
    p.add_argument("--out", help="the table to write (default: kernels-<gpu>.jsonl in the current directory)")
    p.add_argument("--profile", help="the GPU profile file to write (default: the table's name with .gpu.yaml)")
    p.add_argument("--fit", metavar="TABLE", help="measure nothing: write the GPU profile for a table measured before")
    p.add_argument("--base", help="with --fit: the built-in profile of the GPU measured (default: from the table)")
    p.add_argument("--python", default=default_python(),
                   help="a Python with PyTorch's CUDA build (default: build/torch-venv's, else this one)")
    p.add_argument("--device", type=int, default=0, help="the CUDA device to measure")
    p.add_argument("--only", help="measure only the cases of this class (gemm, elementwise, norm, conv, ...)")
    p.add_argument("--steps", "--memory", dest="steps", action="store_true",
                   help="measure whole training and inference steps instead (fakegpu/step_cases.py: step time, "
                        "GPU memory, the kernels of one step); the table goes to steps-<gpu>.jsonl by default")
    a = p.parse_args(argv)
    if a.fit:
        return write_profile(a.fit, a.profile, a.python, a.base)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKEGPU_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT)] + [v for v in [env.get("PYTHONPATH")] if v])
    env["CUDA_VISIBLE_DEVICES"] = str(a.device)
    preload = env.get("LD_PRELOAD", "")
    if "fakegpu" in preload or "nccl_stub" in preload:
        env.pop("LD_PRELOAD")
    cmd = ([a.python, "-m", "fakegpu.calibrate", "--steps" if a.steps else "--measure", "--out", a.out or ""] +
           (["--only", a.only] if a.only else []) + (["--profile", a.profile] if a.profile else []))
    return subprocess.run(cmd, env=env).returncode


def profile_path(table, given=None):
    return Path(given) if given else Path(table).with_suffix("").with_suffix(".gpu.yaml")


def write_profile(table, profile, python, base=None):
    """The GPU profile for a measured table (fakegpu/rate_fit.py), with the model's error by
    operator class before (the family's rates) and after."""
    from . import rate_fit
    from .paths import SetupError

    path = profile_path(table, profile)
    try:
        before, after = rate_fit.fit(table, path, python, base,
                                     log=lambda line: print(line, file=sys.stderr, flush=True))
    except SetupError as e:
        sys.exit(f"fgpu calibrate: {e}")
    print(f"{'operators':22} {'family':>8} {'fitted':>8}   median |modeled / measured - 1|")
    for group in sorted(before):
        print(f"{group:22} {before[group]:8.1%} {after.get(group, 0):8.1%}")
    print(f"fgpu calibrate: GPU profile written to {path}; name it with `fgpu --gpu {path}` or a cluster YAML's "
          f"`profile: {path}`")
    return 0


def _slug(name):
    return re.sub(r"[^a-z0-9]+", "-", name.lower().replace("nvidia", "")).strip("-")


def _require_real_gpu():
    """PyTorch on a real NVIDIA GPU, or an exit naming what is missing."""
    try:
        import torch
    except ImportError:
        sys.exit(f"fgpu calibrate: {sys.executable} has no PyTorch; give --python a Python with its CUDA build")
    # fgpu's sitecustomize hands fakegpu's runtime to the hook's binding before torch loads.
    hook_bridge = sys.modules.get("fakegpu.torch_hook.bridge")
    if hook_bridge is not None and hook_bridge.find() is not None:
        sys.exit("fgpu calibrate: this process runs on fakegpu's CUDA runtime, whose GPUs are the model; run "
                 "`fgpu calibrate` outside fgpu, on a machine with a real NVIDIA GPU")
    if torch.version.cuda is None:
        sys.exit(f"fgpu calibrate: {sys.executable} has a CPU build of PyTorch ({torch.__version__}); give --python "
                 "a Python with its CUDA build")
    if not torch.cuda.is_available():
        sys.exit("fgpu calibrate: no NVIDIA GPU here (torch.cuda.is_available() is False): it measures a real GPU")
    return torch


def measure(out, only, profile=None):
    torch = _require_real_gpu()
    from . import kernel_cases

    device = kernel_cases.device_line()
    path = Path(out or f"kernels-{_slug(device['name'])}.jsonl")
    todo = [c for c in kernel_cases.cases() if not only or c["case"] == only]
    if not todo:
        sys.exit(f"fgpu calibrate: no cases of class {only!r}")
    failed = 0
    with open(path, "w") as f:
        f.write(json.dumps(device) + "\n")
        for i, case in enumerate(todo, 1):
            try:
                line = kernel_cases.run_case(case)
            except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
                line, failed = dict(case, error=str(e).splitlines()[0]), failed + 1
            f.write(json.dumps(line) + "\n")
            f.flush()
            print(f"\r{i}/{len(todo)} {case['case']}/{case['op']}", end="", file=sys.stderr, flush=True)
    print(f"\nfgpu calibrate: {len(todo) - failed} cases on {device['name']} written to {path}"
          + (f" ({failed} could not run; their lines say why)" if failed else ""))
    if only:  # a part of the table says too little for a whole profile
        return 0
    return write_profile(path, profile, sys.executable)


def measure_steps(out, only):
    """Each step case in a fresh process (its own context and allocator), one line each."""
    torch = _require_real_gpu()
    from . import step_cases

    name = torch.cuda.get_device_name()
    path = Path(out or f"steps-{_slug(name)}.jsonl")
    todo = [c for c in step_cases.CASES if not only or c == only]
    if not todo:
        sys.exit(f"fgpu calibrate: no step case {only!r}")
    with open(path, "w") as f:
        for i, case in enumerate(todo, 1):
            r = subprocess.run([sys.executable, "-m", "fakegpu.step_cases", "--case", case, "--kernels"],
                               capture_output=True, text=True, timeout=600)
            lines = r.stdout.strip().splitlines()
            line = lines[-1] if r.returncode == 0 and lines else json.dumps(
                {"case": case, "error": (r.stderr.strip().splitlines() or ["no output"])[-1]})
            f.write(line + "\n")
            f.flush()
            print(f"\r{i}/{len(todo)} {case}", end="", file=sys.stderr, flush=True)
    print(f"\nfgpu calibrate: {len(todo)} step cases on {name} written to {path}")
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--measure", action="store_true")
    p.add_argument("--steps", action="store_true")
    p.add_argument("--out")
    p.add_argument("--only")
    p.add_argument("--profile")
    a = p.parse_args()
    if a.steps:
        return measure_steps(a.out, a.only)
    return measure(a.out, a.only, a.profile) if a.measure else cmd_calibrate(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
