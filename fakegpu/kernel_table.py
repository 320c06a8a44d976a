"""Tables of operator timings (JSON lines, fakegpu/kernel_cases.py): reading them, timing their
cases again under fgpu (the model's figures) and comparing the two. Only the timing under fgpu
needs PyTorch, in the Python it is given.

    python3 -m fakegpu.kernel_table --run TABLE --out OUT    (under fgpu: what model_table runs)
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .paths import REPO_ROOT, SetupError


def read_table(path):
    """The lines of a timing table (JSON lines), with the line number of each."""
    lines = []
    with open(path) as f:
        for number, text in enumerate(f, 1):
            if text.strip():
                try:
                    lines.append((number, json.loads(text)))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{number}: not a JSON object ({e.msg})") from None
    return lines


def error(predicted, measured):
    """predicted / measured - 1."""
    return predicted / measured - 1 if measured else math.inf


METRICS = ("fwd_us", "fwd_bwd_us", "host_us")


@dataclass
class Row:
    """One measured figure of a line beside the model's."""
    measured: dict  # the measured line
    metric: str     # fwd_us, fwd_bwd_us or host_us
    modeled: float
    error: float    # modeled / measured - 1

    @property
    def group(self):
        """The line's operator class and pass: gemm/fwd, norm/fwd+bwd, ..."""
        return f"{self.measured['case']}/{'fwd+bwd' if self.metric == 'fwd_bwd_us' else 'fwd'}"


def compare(measured, modeled_lines):
    """Rows for every figure a measured line (by line number) and its modeled line both have, and
    a message for each line that could not run under fgpu."""
    rows, failed = [], []
    for modeled in modeled_lines:
        real = measured[modeled["line"]]
        if "error" in modeled:
            failed.append(f"line {modeled['line']} {real['case']}/{real.get('op')}: {modeled['error']}")
            continue
        for metric in METRICS:
            if real.get(metric) is not None and modeled.get(metric) is not None:
                rows.append(Row(real, metric, modeled[metric], error(modeled[metric], real[metric])))
    return rows, failed


def run_cases(table, out):
    """Under fgpu: times each line of the table as kernel_cases does on a GPU, writing the lines
    with the model's figures and the number of the line they time."""
    from . import kernel_cases

    with open(out, "w") as f:
        for number, case in read_table(table):
            if case.get("case") == "device":
                continue
            try:
                timed = kernel_cases.run_case(case)
            except Exception as e:  # one case that cannot run is reported, the rest still run
                timed = dict(case, error=f"{type(e).__name__}: {e}")
            timed["line"] = number
            f.write(json.dumps(timed) + "\n")
            f.flush()


def model_table(table, gpu, python):
    """The model's figures for every line of the table on `gpu` (a profile's name or a GPU profile
    file): its cases timed under fgpu in shapes mode by `python`, which has PyTorch."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "modeled.jsonl"
        env = dict(os.environ, FAKEGPU_TORCH_COMPUTE="shapes", PYTHONPATH=str(REPO_ROOT))
        cmd = [sys.executable, "-m", "fakegpu", "--nodes", "1", "--gpus-per-node", "1", "--gpu", str(gpu),
               "--nproc", "1", "--report", str(Path(tmp) / "report.json"), str(python), "-m", "fakegpu.kernel_table",
               "--run", str(table), "--out", str(out)]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SetupError(f"timing {table} under fgpu failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def main():
    p = argparse.ArgumentParser(description="time a table's cases under fgpu (used by model_table)")
    p.add_argument("--run", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    run_cases(a.run, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
