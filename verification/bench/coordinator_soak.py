#!/usr/bin/env python3
"""Runs many small AllReduces through one coordinator and prints its resident memory as it goes.

The target is flat memory: over the second half of a long run (once the timeline trace's
bounded buffer is full) growth stays under 5%.
Usage: verification/bench/coordinator_soak.py [--ops 1000000] [--ranks 2]
"""

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fakegpu.configs import write_single_node_config  # noqa: E402
from fakegpu.coordinator import Coordinator  # noqa: E402
from fakegpu.launch import rank_environment, run_ranks  # noqa: E402
from fakegpu.paths import built  # noqa: E402


def rss_kib(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=1_000_000)
    p.add_argument("--ranks", type=int, default=2)
    a = p.parse_args()
    config = write_single_node_config(a.ranks, name="soak")
    with Coordinator(config, "unix") as coord:
        pid = coord.process.pid
        samples = []
        stop = threading.Event()

        def sample():
            while not stop.wait(0.1):
                samples.append(rss_kib(pid))

        threading.Thread(target=sample, daemon=True).start()
        # A clean environment, but for the sanitizer runtimes' options, which ranks built with
        # FAKEGPU_SANITIZE need.
        sanitizer_options = {k: v for k, v in os.environ.items() if k.endswith("SAN_OPTIONS")}
        env = rank_environment(sanitizer_options, "unix", coord.address, config)
        env["PATH"] = "/usr/bin:/bin"
        idf = Path(tempfile.mkdtemp(prefix="fakegpu-soak-")) / "id"
        start = time.monotonic()
        code = run_ranks([str(built("allreduce_bench")), str(idf), "4", str(a.ops)], [list(range(a.ranks))], env)
        elapsed = time.monotonic() - start
        stop.set()
        samples.append(rss_kib(pid))
    if code != 0:
        print(f"soak failed: the ranks exited with {code}")
        return 1
    warm = samples[min(10, len(samples) - 1)]  # after a second: connections, comm and buffers exist
    half = samples[len(samples) // 2]
    print(f"{a.ops} allreduces on {a.ranks} ranks in {elapsed:.1f} s ({elapsed / a.ops * 1e6:.1f} us each)")
    print(f"coordinator RSS: start {samples[0]} KiB, after warm-up {warm} KiB, half-way {half} KiB, "
          f"end {samples[-1]} KiB, peak {max(samples)} KiB")
    # The timeline trace keeps its first 100,000 operations (a few MB), so memory rises until
    # they are in; a leak shows as growth after that, over the second half of a long run.
    print(f"growth after warm-up {(samples[-1] - warm) / warm * 100:+.2f}%, "
          f"over the second half {(samples[-1] - half) / half * 100:+.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
