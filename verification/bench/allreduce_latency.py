#!/usr/bin/env python3
"""Prints fakegpu's AllReduce median latency and bandwidth against this machine's memcpy bound.

Each case is timed three ways: on the legacy stream, which runs the collective from the calling
thread (legacy_us); on a created stream, synchronised after each operation, as nccl-tests and
PyTorch queue collectives (stream_us); and on a created stream with all ranks arriving together
before each operation, the slowest rank timed, as in a training step (barrier_us).
The bound is N x S bytes copied once at the memcpy bandwidth rank 0 measures in the same run; the
ratio says how far the data path is from it. Figures vary with machine load: compare ratios
from one run, not absolute numbers across runs.
With --compare-mpi, and mpicc and mpirun on the PATH, it also times MPI_Allreduce on the same
machine in the same run (verification/bench/mpi_allreduce.c), back to back and after a barrier,
and prints fakegpu's stream times over MPI's.
With --nccl-tests BINARY (nccl-tests' all_reduce_perf built with MPI=1, see docs/nccl-tests.md)
it also prints nccl-tests' own time per operation, run under fgpu and mpirun.
With --compare-socket it also times each case with the frames on the unix socket instead of the
control ring (FAKEGPU_CONTROL_RING=0).
With --floor it also times, for each rank count, processes that sum one double through shared
memory alone, with no coordinator (verification/bench/shm_allreduce_floor.c, built with cc): the
floor for a small AllReduce on this machine.
With --repeat N every case runs N times, each time fakegpu then OpenMPI, and a last line per case
gives the median of the N ratios to OpenMPI: on a busy machine one run's ratio can move by half.
The ranks see the caller's FAKEGPU_* settings: FAKEGPU_EAGER_COLLECTIVES=0, say, times
collectives queued whole on their streams.
With --check it fails when a run fails, a result is not exact (each run ends with an AllReduce of
known values) or a median exceeds --max-median-us: a bound hundreds of times the usual figure, so
it catches a lost wakeup or a stall, never the machine's noise.
Usage: verification/bench/allreduce_latency.py [--ranks 2,4,8] [--sizes 4,65536,...] [--compare-mpi]
       [--nccl-tests BINARY] [--compare-socket] [--floor] [--repeat N] [--check [--max-median-us US]]
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test" / "integration"))  # the tests' cluster writer

from cluster_files import write_single_node_config  # noqa: E402
from fakegpu.coordinator import Coordinator  # noqa: E402
from fakegpu.launch import rank_environment, run_ranks  # noqa: E402
from fakegpu.paths import built  # noqa: E402


def mpi_binary():
    """Builds the MPI reference next to the other build outputs; None without an MPI toolchain."""
    if not (shutil.which("mpicc") and shutil.which("mpirun")):
        return None
    out = built("fakegpu-coordinator").parent / "mpi_allreduce"
    src = Path(__file__).with_name("mpi_allreduce.c")
    subprocess.run(["mpicc", "-O2", "-o", str(out), str(src)], check=True)
    return out


def floor_binary():
    """Builds the shared-memory floor next to the other build outputs; None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    out = built("fakegpu-coordinator").parent / "shm_allreduce_floor"
    subprocess.run([cc, "-O2", "-o", str(out), str(Path(__file__).with_name("shm_allreduce_floor.c"))], check=True)
    return out


def floor_median_us(binary, world, iters):
    r = subprocess.run([str(binary), str(world), str(iters)], capture_output=True, text=True, timeout=600)
    return float(r.stdout.split()[1]) if r.returncode == 0 else None


def mpi_median_us(binary, world, size, iters, mode):
    r = subprocess.run(["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(world), str(binary), str(size),
                        str(iters), mode], capture_output=True, text=True, timeout=600)
    return float(r.stdout.split()[2]) if r.returncode == 0 else None


def nccl_tests_us(binary, config, world, size, iters):
    """nccl-tests' out-of-place time per operation (its `time` column, us), or None."""
    r = subprocess.run([str(REPO / "fgpu"), "--cluster-config", str(config), "mpirun", "--allow-run-as-root",
                        "--oversubscribe", "-np", str(world), str(binary), "-b", str(size), "-e", str(size), "-c", "0",
                        "-n", str(iters)], capture_output=True, text=True, timeout=600)
    for line in r.stdout.splitlines():
        fields = line.split()
        if r.returncode == 0 and len(fields) > 5 and fields[0] == str(size):
            return float(fields[5])
    return None


def fakegpu_median(env, world, size, iters, mode):
    """(median us, memcpy GB/s, 99th percentile us) from one run of the ranks in the given mode
    (allreduce_bench's legacy, stream or barrier), or None when they failed."""
    out = Path(tempfile.mkdtemp()) / "out"
    idf = out.parent / "id"
    cmd = ["sh", "-c", f'"$0" "$@" > "{out}.$RANK"', str(built("allreduce_bench")), str(idf), str(size), str(iters),
           mode]
    if run_ranks(cmd, [list(range(world))], env) != 0:
        return None
    fields = Path(f"{out}.0").read_text().split()
    return float(fields[2]), float(fields[3]), float(fields[4])


# allreduce_bench's modes: the legacy stream, a created stream, a created stream after a barrier.
MODES = ("legacy", "stream", "barrier")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", default="2,4,8,16")
    p.add_argument("--sizes", default="4,65536,1048576,16777216,67108864")
    p.add_argument("--compare-mpi", action="store_true")
    p.add_argument("--nccl-tests", metavar="BINARY", help="nccl-tests' all_reduce_perf, built with MPI=1")
    p.add_argument("--compare-socket", action="store_true",
                   help="also time each size with the frames on the unix socket (FAKEGPU_CONTROL_RING=0)")
    p.add_argument("--floor", action="store_true",
                   help="also time a shared-memory AllReduce among processes with no coordinator")
    p.add_argument("--repeat", type=int, default=1, help="run every case this many times, alternating with OpenMPI")
    p.add_argument("--check", action="store_true", help="fail on a median above --max-median-us")
    p.add_argument("--max-median-us", type=float, default=20000.0)
    a = p.parse_args()
    failed = False
    mpi = mpi_binary() if a.compare_mpi else None
    if a.compare_mpi and not mpi:
        print("no mpicc/mpirun: MPI comparison skipped")
    print(f"{'ranks':>5} {'bytes':>10} {'legacy_us':>10} {'p99_us':>9} {'GB/s':>8} {'memcpy_GB/s':>11} {'bound_us':>9} "
          f"{'x_bound':>8} {'stream_us':>10} {'barrier_us':>10}" + (f" {'socket_us':>10}" if a.compare_socket else "") +
          (f" {'mpi_us':>10} {'mpi_bar_us':>10} {'x_mpi':>6} {'x_mpi_bar':>9}" if mpi else "") +
          (f" {'nccl_tests_us':>13}" if a.nccl_tests else ""))
    floor = floor_binary() if a.floor else None
    if a.floor and not floor:
        print("no C compiler: shared-memory floor skipped")
    for world in map(int, a.ranks.split(",")):
        if floor:
            floor_us = floor_median_us(floor, world, 20000)
            print(f"{world:>5} ranks: shared-memory floor (no coordinator) " +
                  (f"{floor_us:.1f} us" if floor_us else "failed"))
            failed |= floor_us is None
        config = write_single_node_config(world, name="bench")
        ratios = {}  # size -> [(stream / OpenMPI, after a barrier / OpenMPI) per run]
        with Coordinator(config, "unix") as coord:
            # A clean environment, but for the sanitizer runtimes' options, which ranks built with
            # FAKEGPU_SANITIZE need, and the caller's FAKEGPU_* settings, to time them.
            kept = {k: v for k, v in os.environ.items() if k.endswith("SAN_OPTIONS") or k.startswith("FAKEGPU_")}
            env = rank_environment(kept, "unix", coord.address, str(config))
            env["PATH"] = "/usr/bin:/bin"
            for size in [s for s in map(int, a.sizes.split(",")) for _ in range(max(1, a.repeat))]:
                iters = 1000 if size <= 4096 else 200 if size <= 65536 else (20 if size <= 16 << 20 else 5)
                results = {mode: fakegpu_median(env, world, size, iters, mode) for mode in MODES}
                if not all(results.values()):
                    print(f"{world:>5} {size:>10} FAILED in {', '.join(m for m, r in results.items() if not r)}")
                    failed = True
                    continue
                medians = {mode: r[0] for mode, r in results.items()}
                for mode, median in medians.items():
                    if a.check and median > a.max_median_us:
                        print(f"{world} ranks x {size} bytes, {mode}: median {median:.1f} us is above the bound of "
                              f"{a.max_median_us:.0f} us")
                        failed = True
                median, bw, p99 = results["legacy"]
                bound = world * size / (bw * 1e9) * 1e6
                line = (f"{world:>5} {size:>10} {median:>10.1f} {p99:>9.1f} {size / median / 1e3:>8.2f} {bw:>11.2f} {bound:>9.1f} "
                        f"{median / bound:>8.1f} {medians['stream']:>10.1f} {medians['barrier']:>10.1f}")
                if a.compare_socket:
                    on_socket = fakegpu_median({**env, "FAKEGPU_CONTROL_RING": "0"}, world, size, iters, "legacy")
                    line += f" {on_socket[0]:>10.1f}" if on_socket else "     failed"
                if mpi:
                    loop_us = mpi_median_us(mpi, world, size, iters, "loop")
                    barrier_us = mpi_median_us(mpi, world, size, iters, "barrier")
                    if loop_us and barrier_us:
                        line += (f" {loop_us:>10.1f} {barrier_us:>10.1f} {medians['stream'] / loop_us:>6.2f} "
                                 f"{medians['barrier'] / barrier_us:>9.2f}")
                        ratios.setdefault(size, []).append((medians['stream'] / loop_us, medians['barrier'] / barrier_us))
                    else:
                        line += "     failed"
                if a.nccl_tests:
                    nt_us = nccl_tests_us(a.nccl_tests, config, world, size, iters)
                    line += f" {nt_us:>13.1f}" if nt_us else "        failed"
                print(line)
        for size, runs in ratios.items():
            if len(runs) > 1:
                print(f"{world:>5} {size:>10} median of {len(runs)} runs: x_mpi {statistics.median(r[0] for r in runs):.2f}, "
                      f"x_mpi_bar {statistics.median(r[1] for r in runs):.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
