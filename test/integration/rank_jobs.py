"""Shared helpers for tests that run rank processes against a real coordinator."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fakegpu.coordinator import Coordinator  # noqa: E402
from fakegpu.launch import rank_environment  # noqa: E402
from fakegpu.paths import built  # noqa: E402

CONFIGS = REPO / "configs"


def single_node_config(world: int) -> Path:
    gpus = ", ".join(["{profile: h100}"] * world)
    text = (f"version: 1\ncluster: {{name: test-{world}}}\nnodes:\n"
            f"  - {{id: node0, ranks: [{', '.join(map(str, range(world)))}], gpus: [{gpus}]}}\n"
            "fabric:\n  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}\n")
    fd, path = tempfile.mkstemp(prefix="fakegpu-test-", suffix=".yaml")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return Path(path)


def run_rank_processes(binary, args, coordinator, world, timeout=120, extra_env=None):
    """Runs `world` copies of binary as ranks; returns a list of CompletedProcess."""
    env = rank_environment(os.environ, coordinator.transport, coordinator.address, coordinator.cluster_config)
    env.update(extra_env or {})
    procs = []
    for rank in range(world):
        rank_env = dict(env, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
        procs.append(subprocess.Popen([str(binary), *map(str, args)], env=rank_env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
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
