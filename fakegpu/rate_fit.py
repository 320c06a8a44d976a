"""A GPU profile from a table of operator timings measured on that GPU (`fgpu calibrate`'s): the
kernel model's rates (common/cluster/gpu_rates.h) read off the operators each one governs, and the speed
of the host the table was measured in.

The model times every line of the table under fgpu with the rates it has so far; each rate is
then scaled by how far off the figures it governs are, at the median (a rate of work: by
modeled / measured), and the host's speed by how far off the host cases' figures are. The model
runs again, and each group of changes (gemm, convolutions, attention, ...) that did not bring
its class's figures closer is undone (a ratio misleads where another bound sets the time). The
forward's rates are read in a first pass, the backward's (off forward-and-backward figures) in a
second. Rates no rule names (the fixed cost per kernel, L2's speed-up, a tile's prologue, cuDNN's
layout transforms) stay the family's.

`fgpu calibrate` runs it after measuring; `fgpu calibrate --fit TABLE` on a table measured before.
"""

import datetime
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import kernel_table
from .clusters import gpu_profile
from .paths import SetupError

# A figure shorter than this is taken as the host's, not its kernels': an operator costs the host
# 8 to 50 us in eager PyTorch, and a forward and backward pass 150 to 350 us more.
GPU_BOUND_US = {"fwd_us": 40.0, "fwd_bwd_us": 400.0}


def _shape(line):
    return line.get("shape") or []


def _is_half(line):
    return line.get("dtype") in ("bf16", "fp16")


def _narrow_conv(line):
    """A convolution whose input channels fill less than a 16-byte load ([n, c, h, w, k, r, s])."""
    return line["case"] == "conv" and _shape(line)[1] * (2 if _is_half(line) else 4) < 16


def _gemm_rows_and_columns(line):
    shape = _shape(line)
    return (shape[1], shape[2]) if line.get("op") == "bmm" else (shape[0], shape[1])


@dataclass
class Rule:
    """A rate, the measured figures it is read off, and the group of rates it is judged with."""
    rate: str
    metric: str
    selects: Callable[[dict], bool]
    group: str


def _row_wise(line):
    return (line["case"] == "norm" and line["op"] in ("layer_norm", "softmax")) or line["case"] == "loss"


RULES = [
    Rule("memory_share", "fwd_us", lambda l: l["case"] == "elementwise", "memory"),
    Rule("row_memory_share", "fwd_us", _row_wise, "rows"),
    Rule("gemm_tile_share", "fwd_us",
         lambda l: l["case"] == "gemm" and l["dtype"] in ("bf16", "tf32") and min(_gemm_rows_and_columns(l)) >= 256,
         "gemm"),
    Rule("gemm_cuda_core_share", "fwd_us",
         lambda l: l["case"] == "gemm" and l["dtype"] == "fp32" and min(_gemm_rows_and_columns(l)) >= 256, "gemm"),
    Rule("skinny_memory_share", "fwd_us",
         lambda l: l["case"] == "gemm" and _is_half(l) and min(_gemm_rows_and_columns(l)) < 32, "gemm"),
    # [n, c, h, w, k, r, s]: 3x3 and larger filters in NHWC are the main loops; 1x1 ones their reads;
    # a stem of a few channels its gather.
    Rule("conv_tile_share", "fwd_us",
         lambda l: l["case"] == "conv" and _is_half(l) and l.get("layout") == "nhwc" and _shape(l)[5] > 1
         and not _narrow_conv(l), "conv"),
    Rule("conv_memory_share", "fwd_us", lambda l: l["case"] == "conv" and _shape(l)[5] == 1, "conv"),
    Rule("conv_gather_per_us", "fwd_us", lambda l: _narrow_conv(l) and l.get("layout") == "nhwc", "conv"),
    Rule("attention_share_d64", "fwd_us", lambda l: l["case"] == "attention" and _is_half(l) and _shape(l)[3] <= 64,
         "attention"),
    Rule("attention_share_d128", "fwd_us", lambda l: l["case"] == "attention" and _is_half(l) and _shape(l)[3] >= 128,
         "attention"),
    Rule("attention_fp32_share_d64", "fwd_us",
         lambda l: l["case"] == "attention" and l["dtype"] == "fp32" and _shape(l)[3] <= 64, "attention"),
    Rule("attention_fp32_share_d128", "fwd_us",
         lambda l: l["case"] == "attention" and l["dtype"] == "fp32" and _shape(l)[3] >= 128, "attention"),
    Rule("attention_backward_share", "fwd_bwd_us", lambda l: l["case"] == "attention" and _is_half(l), "attention"),
    # Batch norm runs on cuDNN's kernels, except in bf16 (PyTorch's own).
    Rule("channel_reduce_per_us", "fwd_us", lambda l: l["op"] == "batch_norm" and l["dtype"] != "bf16", "batch_norm"),
    Rule("channel_reduce_backward_per_us", "fwd_bwd_us", lambda l: l["op"] == "batch_norm" and l["dtype"] != "bf16",
         "batch_norm"),
    Rule("native_channel_reduce_per_us", "fwd_us", lambda l: l["op"] == "batch_norm" and l["dtype"] == "bf16",
         "native_batch_norm"),
    Rule("native_channel_reduce_backward_per_us", "fwd_bwd_us",
         lambda l: l["op"] == "batch_norm" and l["dtype"] == "bf16", "native_batch_norm"),
    Rule("pool_forward_per_us", "fwd_us", lambda l: l["case"] == "pool", "pool"),
    Rule("pool_backward_per_us", "fwd_bwd_us", lambda l: l["case"] == "pool", "pool"),
]

# The figures each group of rates is judged by: every figure of the operators its rates price long
# enough to be their kernels' (a ratio read where another bound sets the time can take a rate
# anywhere; the whole class shows it).
GROUP_FIGURES = {
    "memory": lambda l: l["case"] in ("elementwise", "reduction", "optimizer"),
    "rows": _row_wise,
    "gemm": lambda l: l["case"] == "gemm",
    "conv": lambda l: l["case"] == "conv",
    "attention": lambda l: l["case"] == "attention",
    "batch_norm": lambda l: l["op"] == "batch_norm" and l["dtype"] != "bf16",
    "native_batch_norm": lambda l: l["op"] == "batch_norm" and l["dtype"] == "bf16",
    "pool": lambda l: l["case"] == "pool",
}

# Shares of a peak cannot pass it; nor is a rate read off a handful of lines trusted beyond a
# factor of four of the family's.
SHARE_LIMIT = 1.0
RANGE = 4.0


def kernels_bound(row):
    """Whether the figure is long enough to be its kernels', not the host's."""
    return row.measured["case"] != "host" and row.measured[row.metric] >= GPU_BOUND_US.get(row.metric, float("inf"))


def governed(rows, rule):
    """The rows of the rule's figures long enough to be the kernels'."""
    return [row for row in rows if row.metric == rule.metric and kernels_bound(row) and rule.selects(row.measured)]


def host_cases(rows):
    """The host cases' figures: calls whose GPU work is tiny, chains of small layers' forward and
    backward passes, optimizer steps (kernel_cases.py). Other figures too short to be their
    kernels' are left out: a single operator timed back to back in a loop says less about a step's
    host than these (on the machine of verification/kernels/h200.jsonl such figures put the host
    at 1.16 times the reference server's speed, the host cases at 0.90, and its whole steps sided
    with the host cases)."""
    return [row for row in rows if row.measured["case"] == "host"]


def median_error(rows):
    return statistics.median(abs(row.error) for row in rows) if rows else 0.0


def refit(rates, family, host_speed, rows, metric="fwd_us"):
    """The rates of the rules on `metric`'s figures and the host speed, as one pass reads them off
    `rows` (the model's figures with `rates` and `host_speed`), and for each rate the number of
    figures it was read from."""
    new, used = dict(rates), {}
    for rule in RULES:
        if rule.metric != metric:
            continue
        found = [row.modeled / row.measured[rule.metric] for row in governed(rows, rule)]
        if not found:
            continue
        value = rates[rule.rate] * statistics.median(found)
        base = family[rule.rate]
        value = min(max(value, base / RANGE), base * RANGE)
        if rule.rate.endswith("_share"):
            value = min(value, SHARE_LIMIT)
        new[rule.rate], used[rule.rate] = round(value, 4), len(found)
    found = [row.modeled / row.measured[row.metric] for row in host_cases(rows)]
    if found:
        host_speed = round(host_speed * statistics.median(found), 3)
    return new, host_speed, used


def keep_what_helped(old, new, old_rows, new_rows, metric="fwd_us"):
    """`new` (rates, host speed) with each group of changes undone unless it brought its figures
    of `metric` closer (GROUP_FIGURES; the host's speed: the host cases'), and the names undone."""
    rates, host_speed = dict(new[0]), new[1]
    undone = []
    for group, figures in GROUP_FIGURES.items():
        changed = [rule.rate for rule in RULES if rule.group == group and rates[rule.rate] != old[0][rule.rate]]
        if not changed:
            continue
        judged_old = [row for row in old_rows if row.metric == metric and kernels_bound(row) and figures(row.measured)]
        judged_new = [row for row in new_rows if row.metric == metric and kernels_bound(row) and figures(row.measured)]
        if median_error(judged_new) >= median_error(judged_old):
            for rate in changed:
                rates[rate] = old[0][rate]
            undone += changed
    if host_speed != old[1] and median_error(host_cases(new_rows)) >= median_error(host_cases(old_rows)):
        host_speed = old[1]
        undone.append("host_speed")
    return (rates, host_speed), undone


def profile_text(name, base, device, rates, host_speed, table, used):
    """The GPU profile file: the GPU as the table's device line describes it, on `base`'s other
    figures, with the rates read off the table."""
    lines = [f"# GPU profile written by fgpu calibrate from {Path(table).name} "
             f"({device.get('name', '?')}, PyTorch {device.get('torch', '?')}, CUDA {device.get('cuda', '?')}), "
             f"{datetime.date.today().isoformat()}.",
             "# Name it with `fgpu --gpu THIS_FILE` or a cluster YAML's `profile: THIS_FILE`; see cluster-config.md.",
             "version: 1", f"name: {name}", f"base: {base['name']}",
             f"product_name: {json.dumps(device.get('name') or base['product_name'])}",
             f"memory_gib: {device.get('mem_gib') or round(base['memory_mib'] / 1024, 1)}",
             f"sm_count: {device.get('sms') or base['sm_count']}",
             f"compute_capability: '{base['compute_capability']}'",
             f"host_speed: {host_speed}", "kernel_rates:"]
    for rate, value in rates.items():
        note = f"  # read off {used[rate]} figures" if rate in used else "  # the family's"
        lines.append(f"  {rate}: {value:g}{note}")
    return "\n".join(lines) + "\n"


def find_base(device_name):
    """The built-in profile a measured GPU's name stands for: the one whose product name it is, else
    the first found of its leading words joined ("h100-pcie"), its first word with one other
    ("a100-40gb" for an A100-PCIE-40GB), or its first word alone."""
    unknown = SetupError(f"no built-in GPU profile for '{device_name}': give --base (h100, a100, ...)")
    words = device_name.lower().replace("nvidia", "").replace("tesla", "").replace("-", " ").split()
    if not words:
        raise unknown
    joined = [join(words[:count]) for count in range(len(words), 1, -1) for join in ("-".join, "".join)]
    candidates = joined + [f"{words[0]}-{word}" for word in words[1:]] + words[:1]
    found = []
    for candidate in dict.fromkeys(candidates):
        try:
            profile = gpu_profile(candidate)
        except SetupError:
            continue
        if profile["product_name"].lower() == device_name.lower():
            return profile
        found.append(profile)
    if not found:
        raise unknown
    return found[0]


KERNELS = "all: kernels' figures"


def summary(rows):
    """Median |error| by operator class, over all, over the figures long enough to be their
    kernels' and over the host cases."""
    groups = {}
    for row in rows:
        groups.setdefault(row.group, []).append(abs(row.error))
    out = {group: statistics.median(errs) for group, errs in groups.items()}
    out["all"] = median_error(rows)
    out[KERNELS] = median_error([row for row in rows if kernels_bound(row)])
    out["all: host cases"] = median_error(host_cases(rows))
    return out


PASSES = ("fwd_us", "fwd_bwd_us")


def fit(table, out, python, base_name=None, name=None, log=print):
    """Writes the GPU profile for `table` to `out`; returns the median |error| by class before (the
    family's rates) and after."""
    measured = {n: line for n, line in kernel_table.read_table(table)}
    device = next((line for line in measured.values() if line.get("case") == "device"), {})
    base = gpu_profile(base_name) if base_name else find_base(device.get("name", ""))
    name = name or f"{base['name']}-measured"
    family = gpu_profile(base["name"])["kernel_rates"]
    out = Path(out)
    read_off = {}  # the figures each kept rate was read from, for the file's comments

    def model(rates, host_speed):
        out.write_text(profile_text(name, base, device, rates, host_speed, table, read_off))
        rows, failed = kernel_table.compare(measured, kernel_table.model_table(table, out.resolve(), python))
        for line in failed:
            log(f"rate_fit: could not run {line}")
        return rows

    current = (dict(family), 1.0)
    rows = model(*current)
    before = summary(rows)
    # The forward's rates first; then the backward's, read off forward-and-backward figures whose
    # forward part is then right.
    for step, metric in enumerate(PASSES):
        proposed_rates, proposed_host, used = refit(current[0], family, current[1], rows, metric)
        proposed = (proposed_rates, proposed_host)
        if proposed == current:
            continue  # no figures for this pass's rules
        proposed_rows = model(*proposed)
        kept, undone = keep_what_helped(current, proposed, rows, proposed_rows, metric)
        log(f"rate_fit: pass {step + 1} of {len(PASSES)} ({metric}): median error of the kernels' figures "
            f"{summary(rows)[KERNELS]:.1%} -> {summary(proposed_rows)[KERNELS]:.1%}"
            + (f"; undone: {', '.join(undone)}" if undone else ""))
        read_off.update({rate: count for rate, count in used.items() if rate not in undone})
        current, rows = kept, (model(*kept) if undone else proposed_rows)
    out.write_text(profile_text(name, base, device, current[0], current[1], table, read_off))
    return before, summary(rows)
