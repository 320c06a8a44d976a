"""fgpu model: the cost model's what-if, on cluster files, presets by name or a cluster described
by flags; several clusters (or each algorithm) side by side in one table, and an SVG plot.

The C++ `fakegpu-model` does the modeling and owns the sweep's flags (-b, -e, --collective...);
this wrapper picks the clusters, runs it once per line of the comparison, and lays out the result.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from .clusters import FAMILY_OF_GPU, cluster_config_path, write_cluster_config
from .model_measured import cmd_measured
from .paths import SetupError, built
from .svg_plot import line_chart

ALGORITHMS = ("Ring", "Tree", "NVLS", "NVLSTree", "CollNetDirect", "CollNetChain", "PAT")

EXTRA_HELP = f"""
fgpu model also takes:
  --cluster-config FILE|PRESET   several times, to compare clusters side by side; a preset by name
                                 (e.g. dgx-h100-2node, from configs/presets/) or family (aws-p5: one node)
  --gpu NAME                     a cluster of that GPU's servers ({', '.join(sorted(FAMILY_OF_GPU))}, or a
                                 family such as dgx-h100), --nodes of them (default 1), using
                                 --gpus-per-node GPUs of each; without --cluster-config it is the cluster
  --nccl-version X.Y             model NCCL X.Y's rules (2.18 to 2.30; default the newest, or the cluster's
                                 cluster.nccl_version); several times, to compare releases side by side
  --each-algo                    one line per algorithm NCCL could run, forced in turn
  --plot FILE                    write an SVG of bus bandwidth against size, a line per cluster or algorithm
  --measured FILE                an nccl-tests output from a real cluster (several times for several files):
                                 the model beside each of its sizes, the run's shape (ranks on each host)
                                 reshaping the one cluster; with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING in
                                 the run, also NCCL's choice of algorithm and the model's time for it; the
                                 model follows the NCCL release the output names unless --nccl-version is given
"""


def parser():
    p = argparse.ArgumentParser(prog="fgpu model", add_help=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--cluster-config", action="append", default=[])
    p.add_argument("--gpu")
    p.add_argument("--nodes", type=int)
    p.add_argument("--gpus-per-node", type=int)
    p.add_argument("--each-algo", action="store_true")
    p.add_argument("--plot")
    p.add_argument("--json", action="store_true")
    p.add_argument("--algo")
    p.add_argument("--measured", action="append", default=[])
    p.add_argument("--nccl-version", action="append", default=[])
    return p


def cluster_files(a, workdir):
    """The clusters to model, each a file, and the flags fakegpu-model still needs for each."""
    files = [str(cluster_config_path(given)) for given in a.cluster_config]
    reshape = []
    if a.gpu or not files:
        files.append(write_cluster_config(a.gpu, None, a.nodes or 1, a.gpus_per_node, directory=workdir))
    else:  # the node counts reshape every given cluster, as fakegpu-model does
        reshape += ["--nodes", str(a.nodes)] if a.nodes else []
        reshape += ["--gpus-per-node", str(a.gpus_per_node)] if a.gpus_per_node else []
    return files, reshape


def run_model(args):
    r = subprocess.run([str(built("fakegpu-model"))] + args, capture_output=True, text=True)
    if r.returncode != 0:
        raise SetupError(r.stderr.strip().removeprefix("fgpu model: error: "))
    return json.loads(r.stdout)


def sweeps(a, files, reshape, rest):
    """[(label, fakegpu-model's JSON)], one per line of the comparison."""
    out = []
    versions = a.nccl_version or [None]
    for path in files:
        for version in versions:
            base = (["--cluster-config", path] + reshape + rest + (["--algo", a.algo] if a.algo else []) +
                    (["--nccl-version", version] if version else []) + ["--json"])
            doc = run_model(base)  # NCCL's own choice; any error in the flags shows here
            label = doc["cluster"] + (f" ({doc['ranks']} GPUs)" if len(files) > 1 else "")
            if len(versions) > 1:
                label = f"NCCL {doc['nccl_version']}" + (f", {label}" if len(files) > 1 else "")
            if not a.each_algo:
                out.append((label, doc))
                continue
            for algo in ALGORITHMS:
                try:
                    doc = run_model(base + ["--algo", algo])
                except SetupError as e:
                    if "no algorithm/protocol available" in str(e):
                        continue  # the cluster or collective has no such algorithm
                    raise
                # A forced algorithm the cluster cannot run falls back to another: keep only its own rows.
                doc["results"] = [r for r in doc["results"] if r["algorithm"] == algo]
                if doc["results"]:
                    out.append((f"{label}: {algo}" if len(files) > 1 or len(versions) > 1 else algo, doc))
    return out


def print_table(lines):
    collectives = list(dict.fromkeys(r["collective"] for _, doc in lines for r in doc["results"]))
    for coll in collectives:
        print(f"# {coll}: time (us), bus bandwidth (GB/s), algorithm/protocol")
        for i, (label, _) in enumerate(lines):
            print(f"#   [{i + 1}] {label}")
        rows = {}
        for i, (_, doc) in enumerate(lines):
            for r in doc["results"]:
                if r["collective"] == coll:
                    rows.setdefault(r["size"], {})[i] = r
        header = f"#{'size (B)':>12}" + "".join(f" {f'[{i + 1}] us':>11} {'busbw':>8} {'algo':<15}" for i in
                                                  range(len(lines)))
        print(header.rstrip())
        for size in sorted(rows):
            cells = ""
            for i in range(len(lines)):
                r = rows[size].get(i)
                cells += (f" {r['time_us']:>11.2f} {r['busbw_gbs']:>8.2f} {r['algorithm'] + '/' + r['protocol']:<15}"
                          if r else f" {'-':>11} {'-':>8} {'-':<15}")
            print((f" {size:>12}" + cells).rstrip())


def write_plot(path, lines):
    collectives = {r["collective"] for _, doc in lines for r in doc["results"]}
    if len(collectives) != 1:
        raise SetupError("--plot draws one collective: choose it with --collective")
    series = [(label, [(r["size"], r["busbw_gbs"]) for r in doc["results"] if r["size"] > 0]) for label, doc in lines]
    coll = collectives.pop()
    Path(path).write_text(line_chart(series, f"{coll}: modeled bus bandwidth", "message size (bytes)",
                                     "bus bandwidth (GB/s)"))
    print(f"fgpu model: plot written to {path}", file=sys.stderr)


def cmd_model(argv) -> int:
    a, rest = parser().parse_known_args(argv)
    if a.help:
        subprocess.call([str(built("fakegpu-model")), "--help"])
        print(EXTRA_HELP, end="")
        return 0
    if a.each_algo and a.algo:
        raise SetupError("--each-algo forces each algorithm in turn; leave out --algo")
    for flag, value in (("--nodes", a.nodes), ("--gpus-per-node", a.gpus_per_node)):
        if value is not None and value < 1:
            raise SetupError(f"{flag} {value}: must be at least 1")
    if a.measured:
        return cmd_measured(a, rest, run_model)
    with tempfile.TemporaryDirectory(prefix="fakegpu-model-") as workdir:
        files, reshape = cluster_files(a, workdir)
        if len(files) == 1 and len(a.nccl_version) <= 1 and not a.each_algo and not a.plot:
            # fakegpu-model's own table, as nccl-tests prints
            return subprocess.call([str(built("fakegpu-model")), "--cluster-config", files[0]] + reshape + rest +
                                   (["--algo", a.algo] if a.algo else []) +
                                   (["--nccl-version", a.nccl_version[0]] if a.nccl_version else []) +
                                   (["--json"] if a.json else []))
        lines = sweeps(a, files, reshape, rest)
    if not lines:
        raise SetupError("no algorithm could run this collective on this cluster")
    if a.json:
        print(json.dumps([{"label": label, **doc} for label, doc in lines], indent=2))
    else:
        print_table(lines)
    if a.plot:
        sys.stdout.flush()
        write_plot(a.plot, lines)
    return 0
