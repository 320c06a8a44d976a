"""Reading a cluster report and printing its short summary."""

import json


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def summarize(report: dict) -> str:
    cluster = report.get("cluster", {})
    nodes = cluster.get("nodes", [])
    lines = [f"cluster '{cluster.get('name', '?')}': world size {report.get('world_size')}, {len(nodes)} node(s)"]
    ranks = report.get("ranks", [])
    lines.append(f"ranks seen: {len(ranks)}, communicators: {len(report.get('communicators', []))}")
    colls = report.get("collectives", {})
    if colls:
        for name, stats in sorted(colls.items()):
            line = f"{name}: {stats['calls']} calls, {human_bytes(stats['bytes'])} per rank"
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
    plane = report.get("data_plane")
    if plane:
        lines.append(f"data: {human_bytes(plane['shared_memory_bytes'])} in place in shared memory, "
                     f"{human_bytes(plane['socket_bytes'])} over the socket"
                     + (f", {human_bytes(plane['payload_free_bytes'])} not moved (FAKEGPU_PAYLOAD=none)"
                        if plane.get("payload_free_bytes") else ""))
    diag = report.get("diagnoses", {})
    found = [f"{kind} x{n}" for kind, n in diag.get("mismatches", {}).items()]
    found += [f"{len(diag['deadlocks'])} deadlock(s)"] if diag.get("deadlocks") else []
    found += [f"{diag['rank_timeouts']} rendezvous timeout(s)"] if diag.get("rank_timeouts") else []
    if found:
        lines.append("diagnoses: " + ", ".join(found))
    errors = report.get("errors", [])
    lines.append(f"errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else ""))
    return "\n".join("  " + line for line in lines)


def load(path) -> dict:
    with open(path) as f:
        return json.load(f)
