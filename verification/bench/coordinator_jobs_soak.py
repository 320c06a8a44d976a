#!/usr/bin/env python3
"""One long-lived coordinator (as `fgpu coordinator start` leaves running) serving many small
jobs one after another; prints its resident memory and open file descriptors as it goes.

Each job is a new set of rank processes: they connect, initialise the world, split it, reduce on
every communicator, destroy them and exit. What the coordinator keeps for its report is bounded
(the newest departed ranks and retired communicators, the trace's first operations); the trace
is held to 1,000 operations here, so that every bounded part is full after the warm-up and any
growth after it is a leak. The target is flat: after the warm-up the coordinator holds no more
file descriptors, and its memory grows by under 3%. --check asserts both.
Usage: verification/bench/coordinator_jobs_soak.py [--jobs 1000] [--ranks 2] [--check]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test" / "integration"))  # the tests' cluster writer

from cluster_files import write_single_node_config  # noqa: E402
from fakegpu.coordinator import Coordinator  # noqa: E402
from fakegpu.launch import rank_environment, run_ranks  # noqa: E402
from fakegpu.paths import built  # noqa: E402
from coordinator_soak import rss_kib  # noqa: E402  (beside this file)

WARM_UP_JOBS = 300  # by then the report's bounded lists and the trace are full
TRACE_OPS = 1000


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def settled_fds(pid, baseline, wait_s=1.0):
    """The coordinator closes a job's connections as it notices them go: give it a moment."""
    deadline = time.monotonic() + wait_s
    while open_fds(pid) > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    return open_fds(pid)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--check", action="store_true", help="fail unless descriptors and memory stay flat")
    a = p.parse_args()
    if a.jobs <= WARM_UP_JOBS:
        p.error(f"--jobs must be more than the {WARM_UP_JOBS} warm-up jobs")
    with tempfile.TemporaryDirectory(prefix="fakegpu-jobs-soak-") as tmp:
        config = write_single_node_config(a.ranks, name="jobs-soak", directory=tmp)
        with Coordinator(config, "unix", env=dict(os.environ, FAKEGPU_TRACE_MAX_OPS=str(TRACE_OPS))) as coord:
            pid = coord.process.pid
            # A clean environment, but for the sanitizer runtimes' options.
            env = rank_environment({k: v for k, v in os.environ.items() if k.endswith("SAN_OPTIONS")}, "unix",
                                   coord.address, config)
            env["PATH"] = "/usr/bin:/bin"
            command = [str(built("nccl_check")), str(Path(tmp) / "id"), "--count", "1024", "--iters", "2",
                       "--tp", str(a.ranks)]
            idle_fds = open_fds(pid)
            # AddressSanitizer keeps freed memory in quarantine: resident memory then says nothing of leaks.
            asan = "libasan" in Path(f"/proc/{pid}/maps").read_text()
            rss, fds = [], []
            start = time.monotonic()
            for job in range(a.jobs):
                (Path(tmp) / "id").unlink(missing_ok=True)
                code = run_ranks(command, [list(range(a.ranks))], env, stdout=subprocess.DEVNULL)
                if code != 0:
                    print(f"soak failed: job {job + 1} exited with {code}:\n{coord.output()[-4000:]}")
                    return 1
                fds.append(settled_fds(pid, idle_fds))
                rss.append(rss_kib(pid))
            elapsed = time.monotonic() - start
    warm, half = WARM_UP_JOBS - 1, a.jobs // 2
    print(f"{a.jobs} jobs of {a.ranks} ranks in {elapsed:.1f} s ({elapsed / a.jobs * 1e3:.0f} ms each)")
    print(f"coordinator RSS: after job 1 {rss[0]} KiB, after job {warm + 1} {rss[warm]} KiB, after job {half + 1} "
          f"{rss[half]} KiB, after job {a.jobs} {rss[-1]} KiB, peak {max(rss)} KiB")
    growth = (rss[-1] - rss[warm]) / rss[warm] * 100
    print(f"RSS growth after warm-up {growth:+.2f}%, over the second half {(rss[-1] - rss[half]) / rss[half] * 100:+.2f}%")
    print(f"open file descriptors: idle {idle_fds}, after job {warm + 1} {fds[warm]}, after job {a.jobs} {fds[-1]}, "
          f"most {max(fds[warm:])}")
    if a.check:
        problems = []
        if max(fds[warm:]) > fds[warm]:
            problems.append(f"file descriptors grew from {fds[warm]} to {max(fds[warm:])}")
        if growth > 3 and not asan:
            problems.append(f"memory grew {growth:.1f}% after warm-up (limit 3%)")
        if asan:
            print("memory not checked: the coordinator runs under AddressSanitizer, whose quarantine keeps freed memory")
        if problems:
            print("soak check failed: " + "; ".join(problems))
            return 1
        print("soak check passed: descriptors flat" + ("" if asan else ", memory growth under 3%"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
