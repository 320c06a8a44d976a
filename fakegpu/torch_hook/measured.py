"""Kernel times measured on a real GPU, in place of the kernel model's. In hybrid mode,
`fgpu --measure-kernels FILE` times each ATen operator the ranks run on the GPU (kernel_timing.py)
and writes FILE; a simulate run given `--kernel-times FILE` (FAKEGPU_KERNEL_TIMES) then prices
every operator it finds there at its measured time, carried to the cluster's GPU by the runtime
(record_measured_op: scaled by the ratio of the kernel model's times on the two GPUs), and every
other operator with the kernel model. An operator is found by its name and its facts (cost.py),
which both runs compute the same way from its shapes, dtypes and strides. Imports no torch."""

import atexit
import json
import os
import statistics
import sys

FORMAT = "fakegpu-kernel-times"
FORMAT_VERSION = 1


def key(name, facts):
    """The table's key for an operator: its name and every fact the kernel model reads, before the
    hook adds the flags of where it ran (backward, compiled graph)."""
    dims = ",".join(str(d) for d in facts.dims)
    return (f"{name}|{facts.kind}|{facts.math}|{facts.flags}|{facts.element_bytes}|{facts.row_alignment}|"
            f"{facts.flops!r}|{facts.bytes!r}|{dims}")


def table_text(device, profile, samples):
    """FILE's JSON: per key, the median of the samples (microseconds) and their count."""
    operators = {k: {"us": statistics.median(v), "samples": len(v)} for k, v in sorted(samples.items()) if v}
    return json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "device": device, "profile": profile,
                       "operators": operators}, indent=1) + "\n"


def read_table(path):
    """(profile, device, {key: us}) of a table fgpu --measure-kernels wrote; ValueError saying what
    is wrong with it otherwise."""
    try:
        table = json.loads(open(path).read())
    except (OSError, ValueError) as e:
        raise ValueError(f"cannot read kernel times {path}: {e}") from e
    if not isinstance(table, dict) or table.get("format") != FORMAT or table.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path} is not a table of kernel times (fgpu --measure-kernels writes them; format "
                         f"{FORMAT} version {FORMAT_VERSION})")
    try:
        times = {k: float(v["us"]) for k, v in table["operators"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ValueError(f"{path}: an operator without a time in microseconds ({e})") from e
    return table.get("profile"), table.get("device") or "a GPU", times


class Times:
    """A table in use: prices the operators it holds, and counts how much of the modeled kernel time
    came from it, for the line each rank's process prints at exit."""

    def __init__(self, path):
        self.profile, self.device, self.times = read_table(path)
        self.found = self.missed = 0
        self.found_us = self.missed_us = 0.0

    def record(self, runtime, stream, facts, name, table_key):
        us = self.times.get(table_key)
        if us is None:
            cost = runtime.record(stream, facts, name)
            self.missed += 1
            self.missed_us += cost.gpu_us
        else:
            cost = runtime.record_measured(stream, facts, name, us, self.profile)
            self.found += 1
            self.found_us += cost.gpu_us
        return cost

    def summary(self):
        total_us = self.found_us + self.missed_us
        share = 100.0 * self.found_us / total_us if total_us else 0.0
        carried = f", carried to this cluster's GPU from {self.profile}" if self.profile else ""
        return (f"fakegpu: kernel times: {self.found} of {self.found + self.missed} operator calls ({share:.0f}% of "
                f"the kernel time) measured on {self.device}{carried}; the rest from the kernel model")


_times = None


def install():
    """Reads FAKEGPU_KERNEL_TIMES when set (fgpu has checked it already); a table that cannot be
    used stops the rank, saying why."""
    global _times
    path = os.environ.get("FAKEGPU_KERNEL_TIMES")
    if not path:
        return
    try:
        _times = Times(path)
    except ValueError as e:
        raise RuntimeError(f"fakegpu: FAKEGPU_KERNEL_TIMES: {e}") from e
    if os.environ.get("RANK", "0") == "0":
        atexit.register(_say_how_much)


def _say_how_much():
    if _times.found + _times.missed:  # not a launcher (torchrun's agent) that priced nothing
        print(_times.summary(), file=sys.stderr, flush=True)


def active():
    return _times is not None


def record(runtime, stream, facts, name, table_key):
    """Prices the operator at its measured time where the table has it (table_key: its key before
    the hook added flags to its facts), else with the kernel model."""
    return _times.record(runtime, stream, facts, name, table_key)
