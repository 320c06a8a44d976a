"""fgpu model --measured: the model against a run of nccl-tests on a real cluster, size by size.

Each row sets the modeled time beside the run's out-of-place time. Where the run logged NCCL's
choices (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=TUNING), the row also names them and models the
algorithm and protocol NCCL ran, which tells a wrong choice from a wrong time. The run's shape
(ranks on each host) reshapes the cluster unless --nodes or --gpus-per-node say otherwise."""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from .clusters import cluster_config_path, write_cluster_config
from .nccl_tests_output import COLLECTIVES, parse
from .paths import SetupError
from .svg_plot import line_chart


def canonical_collective(name):
    """nccl-tests' name for a collective given as fakegpu-model takes it (allreduce, AllReduce...);
    a name it does not know stays as given, for fakegpu-model to refuse with the list."""
    if name is None:
        return None
    plain = {c.replace("_", ""): c for c in COLLECTIVES}
    return plain.get(name.lower().replace("-", "").replace("_", ""), name)


def load_runs(path: str, default_collective):
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        raise SetupError(f"--measured {path}: {e.strerror}")
    runs = parse(text)
    if not runs:
        raise SetupError(f"--measured {path}: no nccl-tests result rows (lines of size, count, type, redop, "
                         f"time...)")
    for run in runs:
        run.collective = run.collective or canonical_collective(default_collective)
        if run.collective is None:
            raise SetupError(f"--measured {path}: the output names no test (such as all_reduce_perf); "
                             f"give --collective")
        if run.collective == "hypercube":
            raise SetupError(f"--measured {path}: hypercube_perf has no counterpart in the model")
    return runs


def run_shape(path: str, run, nodes, gpus_per_node):
    """(nodes, GPUs per node) for the cluster: the flags', else the run's ranks on each host,
    else None (the cluster file's own shape)."""
    if nodes or gpus_per_node:
        return nodes, gpus_per_node
    per_host = run.ranks_per_host()
    if not per_host:
        return None
    if len(set(per_host.values())) != 1:
        spread = ", ".join(f"{h}: {n}" for h, n in per_host.items())
        raise SetupError(f"--measured {path}: its ranks sit unevenly on its hosts ({spread}); the model puts "
                         f"the same number on every node")
    return len(per_host), next(iter(per_host.values()))


def error(model_us, measured_us):
    return (model_us - measured_us) / measured_us


def compare_run(model, path, run, forced):
    """The run's rows with the model's figures. model(collective, size, root, extra_flags) gives
    fakegpu-model's answer for one size (its JSON: the cluster and one result)."""
    rows, doc = [], None
    for r in run.rows:
        doc = model(run.collective, r.size, r.root, forced)
        mine = doc["results"][0]
        row = {"size": r.size, "measured_us": r.out_of_place_us, "in_place_us": r.in_place_us,
               "model_us": mine["time_us"], "error": error(mine["time_us"], r.out_of_place_us),
               "algorithm": mine["algorithm"], "protocol": mine["protocol"],
               "busbw_factor": mine["busbw_gbs"] / mine["algbw_gbs"] if mine["algbw_gbs"] else 1.0}
        nccl = run.nccl_choice(r.size)
        if nccl:
            row["nccl_algorithm"], row["nccl_protocol"] = nccl
            same = nccl == (mine["algorithm"], mine["protocol"])
            theirs = mine if same else model(run.collective, r.size, r.root,
                                             ["--algo", nccl[0], "--proto", nccl[1]])["results"][0]
            row["model_us_nccl_choice"] = theirs["time_us"]
            row["error_nccl_choice"] = error(theirs["time_us"], r.out_of_place_us)
        rows.append(row)
    errors = [abs(x["error"]) for x in rows]
    worst = max(rows, key=lambda x: abs(x["error"]))
    known = [x for x in rows if "nccl_algorithm" in x]
    return {"file": path, "collective": run.collective, "run_nccl_version": run.nccl_version,
            "nccl_version_modeled": doc["nccl_version"],
            "cluster": f"{doc['cluster']} ({doc['nodes']} x {doc['ranks'] // doc['nodes']} GPUs)",
            "ranks": len(run.hosts) or None,
            "hosts": len(run.ranks_per_host()) or None, "rows": rows,
            "median_abs_error": statistics.median(errors), "worst_error": worst["error"], "worst_size": worst["size"],
            "nccl_choices_logged": len(known),
            "model_chose_as_nccl": sum((x["algorithm"], x["protocol"]) == (x["nccl_algorithm"], x["nccl_protocol"])
                                       for x in known)}


def pct(x):
    return f"{100 * x:+.1f}%"


def print_comparison(result):
    shape = f", {result['ranks']} ranks on {result['hosts']} hosts" if result["ranks"] else ""
    logged = result["nccl_choices_logged"] > 0
    ran = f"the run's NCCL {result['run_nccl_version']}" if result["run_nccl_version"] else "the run names none"
    print(f"# {result['file']}: {result['collective']}{shape}, against {result['cluster']}, with NCCL "
          f"{result['nccl_version_modeled']}'s rules ({ran})")
    header = (f"#{'size (B)':>12} {'measured us':>12} {'in-place us':>12} {'model us':>10} {'error':>8}  "
              f"{'model algo':<16}")
    print((header + (f" {'NCCL algo':<16} {'model us, NCCL algo':>19} {'error':>8}" if logged else "")).rstrip())
    for x in result["rows"]:
        in_place = f"{x['in_place_us']:.2f}" if x["in_place_us"] is not None else "-"
        line = (f" {x['size']:>12} {x['measured_us']:>12.2f} {in_place:>12} {x['model_us']:>10.2f} "
                f"{pct(x['error']):>8}  {x['algorithm'] + '/' + x['protocol']:<16}")
        if "nccl_algorithm" in x:
            line += (f" {x['nccl_algorithm'] + '/' + x['nccl_protocol']:<16} {x['model_us_nccl_choice']:>19.2f} "
                     f"{pct(x['error_nccl_choice']):>8}")
        elif logged:
            line += f" {'-':<16} {'-':>19} {'-':>8}"
        print(line.rstrip())
    summary = (f"# {len(result['rows'])} sizes: median |error| {100 * result['median_abs_error']:.1f}%, worst "
               f"{pct(result['worst_error'])} at {result['worst_size']} B")
    if logged:
        summary += (f"; NCCL's choice logged at {result['nccl_choices_logged']}, the model's the same at "
                    f"{result['model_chose_as_nccl']}")
    else:
        summary += "; no NCCL tuning lines (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING in the run would show its choices)"
    print(summary)


def plot_series(result):
    """Measured and modeled bus bandwidth, as nccl-tests computes it, for --plot."""
    measured = [(x["size"], x["size"] / x["measured_us"] / 1e3 * x["busbw_factor"]) for x in result["rows"]]
    modeled = [(x["size"], x["size"] / x["model_us"] / 1e3 * x["busbw_factor"]) for x in result["rows"]]
    return [("measured", measured), ("model", modeled)]


def measured_flags(a, rest):
    """--collective (for output that names no test) and --proto: the rest comes from the run."""
    p = argparse.ArgumentParser(prog="fgpu model --measured", add_help=False)
    p.add_argument("--collective")
    p.add_argument("--proto")
    flags, unknown = p.parse_known_args(rest)
    if unknown:
        raise SetupError(f"--measured takes sizes, roots and the cluster's shape from the run: {unknown[0]} "
                         f"does not apply")
    if len(a.nccl_version) > 1:
        raise SetupError("--measured compares one model with the run: give --nccl-version once (or leave it out "
                         "to model the NCCL the run names)")
    if a.each_algo or len(a.cluster_config) + bool(a.gpu) > 1:
        raise SetupError("--measured compares one cluster with the run: give one --cluster-config or --gpu, "
                         "without --each-algo")
    forced = (["--algo", a.algo] if a.algo else []) + (["--proto", flags.proto] if flags.proto else [])
    return flags.collective, forced


def modeled_version(a, run):
    """fakegpu-model's --nccl-version for a run: the flag's, else the NCCL the run names (the
    nearest release modeled, which fakegpu-model says it used), else the default."""
    if a.nccl_version:
        return ["--nccl-version", a.nccl_version[0]]
    if run.nccl_version:
        return ["--nearest-nccl-version", run.nccl_version]
    return []


def measured_cluster(a, shape, workdir):
    """fakegpu-model's flags for the one cluster, in the run's shape (nodes, GPUs per node)."""
    nodes, per_node = shape or (None, None)
    if not a.cluster_config:
        return ["--cluster-config", write_cluster_config(a.gpu, None, nodes or 1, per_node, directory=workdir)]
    return (["--cluster-config", str(cluster_config_path(a.cluster_config[0]))] +
            (["--nodes", str(nodes)] if nodes else []) +
            (["--gpus-per-node", str(per_node)] if per_node else []))


def one_size(run_model, base, path):
    """fakegpu-model's answer for one size of a run (collective, size, root, forcing flags)."""
    def model(collective, size, root, extra):
        args = base + ["--collective", collective, "-b", str(size), "-e", str(size), "--json"] + extra
        try:
            return run_model(args + (["--root", str(root)] if root >= 0 else []))
        except SetupError as e:
            raise SetupError(f"--measured {path}: {e}")
    return model


def cmd_measured(a, rest, run_model) -> int:
    """fgpu model --measured; run_model(flags) runs fakegpu-model and returns its JSON."""
    collective, forced = measured_flags(a, rest)
    runs = [(path, run) for path in a.measured for run in load_runs(path, collective)]
    if a.plot and len(runs) != 1:
        raise SetupError(f"--plot draws one run; the files given hold {len(runs)}")
    results = []
    with tempfile.TemporaryDirectory(prefix="fakegpu-model-") as workdir:
        for path, run in runs:
            base = (measured_cluster(a, run_shape(path, run, a.nodes, a.gpus_per_node), workdir) +
                    modeled_version(a, run))
            results.append(compare_run(one_size(run_model, base, path), path, run, forced))
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        for result in results:
            print_comparison(result)
    if a.plot:
        sys.stdout.flush()
        r = results[0]
        Path(a.plot).write_text(line_chart(plot_series(r), f"{r['collective']}: measured and modeled bus bandwidth",
                                           "message size (bytes)", "bus bandwidth (GB/s)"))
        print(f"fgpu model: plot written to {a.plot}", file=sys.stderr)
    return 0
