"""Reading a cluster report and printing its short summary."""

import json

from .paths import SetupError


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def human_us(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us"


def typical_step(steps: dict) -> dict:
    """The step nearest the median, the first left out where there are others (it also holds the set-up)."""
    after_first = steps["per_step"][1:] or steps["per_step"]
    return min(after_first, key=lambda s: abs(s["time_us"] - steps["median_time_us"]))


def step_line(steps: dict) -> str:
    """The predicted step time, with the median step's compute and communication on its slowest rank."""
    median = steps["median_time_us"]
    typical = typical_step(steps)
    split = (f"on rank {typical['slowest_rank']}: compute {human_us(typical['compute_us'])}, communication "
             f"{human_us(typical['comm_us'])} ({human_us(typical['exposed_comm_us'])} of it not hidden behind compute)")
    if steps["marked_by"] == "none":
        return f"modeled run (no steps marked): {human_us(median)}; {split}"
    counted = f"steps 2-{steps['count']}" if steps["count"] > 2 else "step 2" if steps["count"] == 2 else "1 step"
    return f"predicted step time: {human_us(median)} (median of {counted}, marked by {steps['marked_by']}); {split}"


def operators_line(operators: dict, steps) -> str:
    """Where a step's time goes on one rank: its compute split as its operators' GPU time splits
    (matrix math, attention, memory-bound kernels), the GPU idle waiting on the host, and
    communication nothing hid; then its largest operators."""
    ranks = {r["global_rank"]: r for r in operators["ranks"]}
    typical = typical_step(steps) if steps else None
    rank = ranks.get(typical["slowest_rank"]) if typical else None
    rank = rank or operators["ranks"][0]
    split = rank["gpu_us_by_category"]
    gpu = max(rank["gpu_us"], 1e-9)
    kinds = (("matrix math", split["matrix"]), ("attention", split["attention"]),
             ("memory-bound", split["memory"] + split["host_copy"]))
    if typical and typical["time_us"] > 0:
        step = typical["time_us"]
        parts = [(name, typical["compute_us"] * us / gpu) for name, us in kinds]
        gaps = max(0.0, step - typical["compute_us"] - typical["exposed_comm_us"])
        parts += [("host-bound gaps", gaps), ("exposed communication", typical["exposed_comm_us"])]
        head = f"step {typical['step']} on rank {rank['global_rank']}: "
    else:
        step, parts, head = gpu, list(kinds), f"GPU time on rank {rank['global_rank']}: "
    top = ", ".join(f"{r['name']} {r['share']:.0%}" for r in rank["rows"][:3])
    line = head + ", ".join(f"{name} {us / step:.0%}" for name, us in parts) + f"; largest operators: {top}"
    if rank.get("measured_gpu_us"):
        source = operators.get("kernel_times") or {}
        on = f" on {source['measured_on']}" if source.get("measured_on") else ""
        line += f"; {rank['measured_gpu_us'] / gpu:.0%} of its GPU time from kernel times measured{on}"
    return line


def gib(n: float) -> str:
    return f"{n / (1 << 30):.1f}"


def _parts_text(parts: dict, torch: bool) -> str:
    """A device's memory by part, largest first, in GiB: "PyTorch 55.0, NCCL 1.1, context 0.8"."""
    names = {"program": "PyTorch" if torch else "program", "nccl": "NCCL", "context": "context",
             "libraries": "libraries"}
    shown = sorted(((n, parts[k]) for k, n in names.items() if parts.get(k, 0) >= (1 << 30) / 20),
                   key=lambda p: -p[1])
    return ", ".join(f"{name} {gib(n)}" for name, n in shown)


def memory_lines(memory: dict, stepped: bool) -> list:
    """The peak GPU memory of the rank nearest its GPU's capacity, and each out-of-memory error;
    `stepped` when the program's steps were marked, so that the step of each can be named."""
    ranks = {r["global_rank"]: r for r in memory["ranks"]}
    r = ranks[memory["fullest_rank"]]
    peak = r["peak"]
    when = f"step {peak['step']}; " if stepped else ""
    lines = [f"peak GPU memory: {gib(peak['bytes'])} of {gib(r['capacity'])} GiB on rank {r['global_rank']} "
             f"({when}{_parts_text(peak['parts'], 'pytorch' in r)})"]
    for rank in memory["out_of_memory_ranks"]:
        k = ranks[rank]
        oom = k["out_of_memory"]
        in_use = sum(oom["in_use"].values())
        where = f" in step {oom['step']}" if stepped else ""
        line = (f"out of memory on rank {rank}{where}: tried to allocate "
                f"{human_bytes(oom['requested_bytes'])} with {gib(in_use)} of {gib(k['capacity'])} GiB in use "
                f"({_parts_text(oom['in_use'], True)}): the job does not fit this cluster's GPUs")
        if oom["largest_live_blocks"]:
            line += "; largest live blocks " + ", ".join(human_bytes(b) for b in oom["largest_live_blocks"][:4])
        lines.append(line)
    return lines


def span_list(ranks, sep=", ") -> str:
    """0-3, 8, 12-15: a sorted rank list, short however long."""
    spans = []
    for r in ranks:
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return sep.join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def own_work_of_rank_0(report: dict) -> list:
    """Where ranks 0 and 1 both ran as processes: whether rank 0's steps compute more or less than
    rank 1's, whose work the ranks after it repeat (the last step of each, past warm-up)."""
    compute = {r["global_rank"]: r["per_step"][-1]["compute_us"]
               for r in report.get("steps", {}).get("ranks", []) if r.get("per_step")}
    if 0 not in compute or 1 not in compute:
        return []
    zero, one = compute[0], compute[1]
    if abs(zero - one) <= 0.01 * max(zero, one):
        return [f"  ranks 0 and 1 compute alike: {one / 1000:.2f} ms in their last step"]
    return [f"  rank 0 computes {zero / 1000:.2f} ms in its last step, rank 1 {one / 1000:.2f} ms: the ranks rank 1 "
            "stands for take rank 1's"]


def summarize(report: dict) -> str:
    cluster = report.get("cluster", {})
    nodes = cluster.get("nodes", [])
    lines = [f"cluster '{cluster.get('name', '?')}': world size {report.get('world_size')}, {len(nodes)} node(s)"]
    ranks = report.get("ranks", [])
    lines.append(f"ranks seen: {len(ranks)}, communicators: {len(report.get('communicators', []))}")
    if rep := report.get("representative"):
        processes, stood_in = rep.get("processes", []), rep.get("stood_in", [])
        stood = (f"the coordinator stood in for {len(stood_in)}, each repeating the nearest process below it"
                 if stood_in else
                 "the coordinator stood in for none (it stands in for ranks as their communicators are made)")
        lines.append(f"representative run: {len(processes)} rank(s) ran as processes ({span_list(processes)}); {stood}")
        if processes == [0] and 1 in stood_in:
            lines.append("  (rank 0's work stands for every rank's: if rank 0 does work of its own on the GPU, "
                         "FAKEGPU_REPRESENTATIVE=0,1 runs the others as rank 1)")
        elif {0, 1} <= set(processes):
            lines += own_work_of_rank_0(report)
    if hybrid := report.get("hybrid"):
        lines.append(f"computed on this machine's {', '.join(hybrid.get('computed_on', []))}; communication modeled "
                     f"on the cluster's {', '.join(hybrid.get('modeled_gpus', [])) or 'GPUs'}")
    colls = report.get("collectives", {})
    if colls:
        for name, stats in sorted(colls.items()):
            calls = stats["calls"]
            line = f"{name}: {calls} call{'' if calls == 1 else 's'} of {human_bytes(stats['bytes'])} in all"
            if stats.get("modeled_time_us"):
                mix = ", ".join(f"{algo} x{n}" for algo, n in sorted(stats.get("algorithms", {}).items()))
                line += f", modeled {stats['modeled_time_us']:.1f} us ({mix})"
            lines.append(line)
    else:
        lines.append("collectives: none")
    makespan = report.get("totals", {}).get("modeled_makespan_us")
    links = report.get("links", [])
    if makespan and links:
        busiest = max(links, key=lambda link: link["utilization"])
        lines.append(f"modeled timeline: {makespan:.1f} us; busiest link {busiest['link']} "
                     f"({busiest['utilization']:.0%} busy, {human_bytes(busiest['bytes'])})")
    steps = report.get("steps")
    if steps and steps.get("per_step"):
        lines.append(step_line(steps))
    if report.get("operators"):
        lines.append(operators_line(report["operators"], steps if steps and steps.get("per_step") else None))
    if report.get("memory"):
        lines.extend(memory_lines(report["memory"], bool(steps) and steps.get("marked_by") != "none"))
    plane = report.get("data_plane")
    if plane:
        lines.append(f"data: {human_bytes(plane['shared_memory_bytes'])} in place in shared memory, "
                     f"{human_bytes(plane['socket_bytes'])} over the socket"
                     + (f", {human_bytes(plane['payload_free_bytes'])} not moved (FAKEGPU_PAYLOAD)"
                        if plane.get("payload_free_bytes") else ""))
    diag = report.get("diagnoses", {})
    found = [f"{kind} x{n}" for kind, n in diag.get("mismatches", {}).items()]
    found += [f"{len(diag['deadlocks'])} deadlock(s)"] if diag.get("deadlocks") else []
    found += [f"{diag['timeouts']} rendezvous timeout(s)"] if diag.get("timeouts") else []
    if found:
        lines.append("diagnoses: " + ", ".join(found))
    errors = report.get("errors", [])
    lines.append(f"errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    return "\n".join("  " + line for line in lines)


def load(path) -> dict:
    """The JSON cluster report at path; SetupError, saying what the file is instead, otherwise."""
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        raise SetupError(f"cannot read the report {path}: {e.strerror}") from e
    except (ValueError, UnicodeDecodeError) as e:
        hint = " (the Markdown companion: give the .json beside it)" if str(path).endswith(".md") else ""
        raise SetupError(f"{path} is not a JSON cluster report{hint}: {e}") from e
    if isinstance(report, dict) and "traceEvents" in report:
        raise SetupError(f"{path} is the Perfetto trace (open it in ui.perfetto.dev); the report is the .json beside it")
    if not isinstance(report, dict) or "schema_version" not in report or "cluster" not in report:
        raise SetupError(f"{path} is JSON but not a fakegpu cluster report (no schema_version and cluster)")
    return report
