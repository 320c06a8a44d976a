"""Shared helpers for tests that run rank processes against a real coordinator."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from cluster_files import write_single_node_config  # noqa: E402
from fakegpu.coordinator import Coordinator as _Coordinator  # noqa: E402
from fakegpu.launch import rank_environment  # noqa: E402
from fakegpu.paths import built  # noqa: E402
from trace_check import check_fgpu_trace, check_written_trace  # noqa: E402

CONFIGS = REPO / "configs"
FGPU = str(REPO / "fgpu")

# Two nodes of two GPUs: the smallest cluster with traffic inside and between nodes.
TWO_BY_TWO = """version: 1
cluster: {name: two-by-two}
nodes:
  - {id: n0, ranks: [0, 1], gpus: [{profile: h100}, {profile: h100}]}
  - {id: n1, ranks: [2, 3], gpus: [{profile: h100}, {profile: h100}]}
fabric:
  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}
  inter_node: {type: infiniband, bandwidth_gbps: 400, latency_us: 5}
"""


class Coordinator(_Coordinator):
    """fakegpu's coordinator, whose trace, when it writes a report, is checked as it stops."""

    def __exit__(self, *exc):
        super().__exit__(*exc)
        if self.report and exc[0] is None:
            check_written_trace(self.report)


def fgpu(*args, env=None):
    """Runs the fgpu launcher and captures its output; checks the trace of the report it names."""
    # From the temporary directory: a job without --report leaves its report there, not in the repository.
    r = subprocess.run([FGPU, *map(str, args)], capture_output=True, text=True, env=env, timeout=120,
                       cwd=tempfile.gettempdir())
    check_fgpu_trace(args)
    return r


def single_node_config(world: int) -> Path:
    return Path(write_single_node_config(world, name=f"test-{world}"))


def run_rank_processes(binary, args, coordinator, world, timeout=120, extra_env=None, new_session=False):
    """Runs `world` copies of binary as ranks, each in a session of its own with new_session (as
    torchrun starts them); returns a list of CompletedProcess."""
    env = rank_environment(os.environ, coordinator.transport, coordinator.address, coordinator.cluster_config)
    env.update(extra_env or {})
    procs = []
    for rank in range(world):
        rank_env = dict(env, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([str(binary), *map(str, args)], env=rank_env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, start_new_session=new_session))
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"rank processes did not finish within {timeout} s (hang)")
        results.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return results
