"""The trace-event rules every trace fakegpu writes must keep, checked on each trace the suite
writes: slices on one track nest (none starts inside another and ends after it), and every flow
arrow has its start and its end."""

import json
from pathlib import Path

RESOLUTION_US = 1e-3  # ranks keep modeled time in whole nanoseconds


def trace_of(report) -> Path:
    """The trace the coordinator writes beside a report: r.json -> r.trace.json."""
    report = Path(report)
    return report.with_name((report.name[:-5] if report.name.endswith(".json") else report.name) + ".trace.json")


def trace_problems(trace_path) -> list:
    events = json.loads(Path(trace_path).read_text())["traceEvents"]
    problems = []
    tracks = {}
    for e in events:
        if e["ph"] == "X":
            if e["dur"] < 0:
                problems.append(f"slice {e['name']} at {e['ts']} has a negative duration")
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for track, slices in tracks.items():
        open_slices = []
        for start, end, name in sorted(slices, key=lambda s: (s[0], -s[1])):
            while open_slices and open_slices[-1][0] <= start + RESOLUTION_US:
                open_slices.pop()
            if open_slices and end > open_slices[-1][0] + RESOLUTION_US:
                problems.append(f"track {track}: {name} [{start}, {end}] overlaps {open_slices[-1][1]} partly")
            open_slices.append((end, name))
    flows = {}
    for e in events:
        if e["ph"] in ("s", "f"):
            flows.setdefault(e["id"], []).append(e["ph"])
    for flow, ends in flows.items():
        if sorted(ends) != ["f", "s"]:
            problems.append(f"flow {flow} has ends {ends}")
    return problems


def check_written_trace(report):
    """Raises AssertionError naming what is wrong with the trace beside `report`, if one was written."""
    trace = trace_of(report)
    if trace.exists():
        problems = trace_problems(trace)
        assert not problems, f"{trace}: " + "; ".join(problems[:5])


def check_fgpu_trace(args):
    """The same for an fgpu command line that names a report (--report PATH)."""
    args = [str(a) for a in args]
    if "--report" in args[:-1]:
        check_written_trace(args[args.index("--report") + 1])
