"""fgpu's side of measured kernel times (fakegpu/torch_hook/measured.py, kernel_timing.py): the
ranks' samples gathered into one table (--measure-kernels), and a table checked before a job
uses it (--kernel-times)."""

import json
import shutil
import tempfile
from pathlib import Path

from .paths import SetupError
from .rate_fit import find_base
from .torch_hook import measured


def gather(folder: Path, out: Path):
    """Writes the table of the samples the ranks left in `folder` to `out`; returns what fgpu says
    of it, or None when no rank timed anything."""
    samples, devices = {}, set()
    for path in sorted(folder.glob("rank*.json")):
        try:
            rank = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # a rank that died while writing: the others' samples still count
        devices.add(rank["device"])
        for key, times in rank["samples"].items():
            samples.setdefault(key, []).extend(times)
    if not samples:
        return None
    if len(devices) > 1:
        raise SetupError(f"--measure-kernels: the ranks computed on different GPUs ({', '.join(sorted(devices))}); "
                         "one table holds one GPU's times")
    device = devices.pop()
    try:
        profile = find_base(device)["name"]
    except SetupError:
        profile = None  # a GPU fakegpu has no profile for: its times are used as they are
    out.write_text(measured.table_text(device, profile, samples))
    carried = (f" (profile {profile})" if profile else
               " (fakegpu has no profile for it: a simulate run uses its times unscaled)")
    return f"kernel times of {len(samples)} operators measured on {device}{carried} written to {out}"


def measure_over_runtime(run, table: Path):
    """For machines without a GPU (the benchmarks' check of their own path): run(extra_env) runs a
    job under fgpu in simulate mode with the variables given, whose ranks then time their operators
    over fakegpu's runtime (its events give modeled times); their samples are gathered into `table`
    as --measure-kernels gathers them."""
    folder = Path(tempfile.mkdtemp(prefix="fakegpu-samples-"))
    try:
        run({"FAKEGPU_MEASURE_KERNELS": str(folder)})
        if gather(folder, table) is None:
            raise RuntimeError("no rank timed an operator")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check(path) -> str:
    """The table's absolute path, once it reads as one."""
    try:
        measured.read_table(path)
    except ValueError as e:
        raise SetupError(f"--kernel-times: {e}") from e
    return str(Path(path).resolve())
