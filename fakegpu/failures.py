"""The table fgpu prints when a job fails or is stopped: every process, how it ended, and where
its NCCL calls were, first the process that failed first."""

import signal


def _by_rank(entries):
    return {e.get("global_rank"): e for e in entries or [] if e.get("global_rank", -1) >= 0}


def nccl_state(rank, live: dict, report: dict) -> str:
    """Where a rank was: its live state when fgpu had to stop it, else its last call in the report."""
    if rank is None:
        return ""
    doing = _by_rank(live.get("ranks")).get(rank, {}).get("doing")
    if doing and doing != "has disconnected":
        return doing
    seen = _by_rank(report.get("ranks")).get(rank)
    if seen is None:
        return "never connected to the coordinator"
    return f"last posted {seen['last_operation']}" if seen.get("last_operation") else "posted no NCCL call"


def headline(outcome) -> str:
    if outcome.interrupted:
        return f"fgpu: interrupted by {signal.Signals(outcome.interrupted).name}: the job was stopped"
    first = outcome.first_failure
    return (f"fgpu: the job failed: {first.launch.label} failed first, with {first.describe()}, "
            f"{first.after_s:.1f} s after the start")


def failure_table(outcome, live: dict, report: dict) -> str:
    """live: the coordinator's status taken just before processes were stopped ({} if none);
    report: the cluster report ({} if none)."""
    first = outcome.first_failure
    order = sorted(outcome.exits, key=lambda e: (e is not first, e.launch.rank if e.launch.rank is not None else -1,
                                                 e.launch.label))
    header = ("process", "node", "pid", "how it ended", "NCCL")
    rows = [(e.launch.label, e.launch.node or "-", str(e.pid), e.describe(),
             nccl_state(e.launch.rank, live, report)) for e in order]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = [headline(outcome)]
    for row in [header, *rows]:
        lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    return "\n".join(line.rstrip() for line in lines)
