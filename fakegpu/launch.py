"""Environment for rank processes, and a small local launcher (like mpirun -np N)."""

import os
import signal
import subprocess
import time
from pathlib import Path

from .paths import built


def prepend(var: str, value: str, env: dict) -> str:
    old = env.get(var, "")
    return value + (":" + old if old else "")


def rank_environment(base: dict, transport: str, address: str, cluster_config: str, device_count=None,
                     mode="simulate") -> dict:
    """The variables every rank needs: our libraries first on the search path, and the coordinator.
    In hybrid mode only our libnccl.so.2: the program computes on its own CUDA runtime, NVIDIA's."""
    env = dict(base)
    env["LD_PRELOAD"] = prepend("LD_PRELOAD", str(built("libnccl.so.2")), env)
    if mode == "simulate":  # the build directory also holds fakegpu's libcudart.so.12 and .13
        env["LD_LIBRARY_PATH"] = prepend("LD_LIBRARY_PATH", str(built("libnccl.so.2").parent), env)
        # Python ranks (PyTorch) load fakegpu's CUDA libraries before torch: python_hook/sitecustomize.py.
        env["PYTHONPATH"] = prepend("PYTHONPATH", str(Path(__file__).resolve().parent / "python_hook"), env)
        env["FAKEGPU_BUILD_DIR"] = str(built("libnccl.so.2").parent)
    env["FAKEGPU_MODE"] = mode
    env["FAKEGPU_DIST_MODE"] = env.get("FAKEGPU_DIST_MODE", "simulate")
    env["FAKEGPU_COORDINATOR_TRANSPORT"] = transport
    env["FAKEGPU_COORDINATOR_ADDR"] = address
    env["FAKEGPU_CLUSTER_CONFIG"] = cluster_config
    if device_count:
        env["FAKEGPU_DEVICE_COUNT"] = str(device_count)
    return env


def virtual_nodes_value(node_names, nodes) -> str:
    """FAKEGPU_VIRTUAL_NODES: each node's id and ranks, "node0=0-3;node1=4-7". A rank started by
    another launcher (mpirun, srun) takes its node from it when it starts (libnccl_stub's
    virtual_node.cpp)."""
    def spans(ranks):
        out, start = [], None
        for i, r in enumerate(ranks):
            if start is None:
                start = r
            if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
                out.append(str(start) if start == r else f"{start}-{r}")
                start = None
        return ",".join(out)
    return ";".join(f"{name}={spans(ranks)}" for name, ranks in zip(node_names, nodes))


def run_ranks(command, nodes, env, node_names=None, grace_seconds=10.0):
    """Starts one process per rank with RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set.

    nodes is a list of rank lists, one per node. With node_names (virtual nodes on this one
    machine) each rank also gets its node's name as FAKEGPU_HOSTNAME, the host it reports.
    Returns the first non-zero exit code, or 0.
    """
    world = sum(len(n) for n in nodes)
    launches = []
    for node_index, ranks in enumerate(nodes):
        for local, rank in enumerate(ranks):
            # FAKEGPU_NODE gives each rank its node's devices and PCI domain in the fake runtime.
            rank_env = dict(env, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local),
                            LOCAL_WORLD_SIZE=str(len(ranks)), GROUP_RANK=str(node_index), FAKEGPU_NODE=str(node_index))
            if node_names:
                rank_env["FAKEGPU_HOSTNAME"] = node_names[node_index]
            launches.append((command, rank_env))
    return run_all(launches, grace_seconds)


def run_all(launches, grace_seconds=10.0):
    """Runs (command, env) pairs side by side. Returns the first non-zero exit code, or 0.
    When one fails, the others get grace_seconds to notice (the coordinator tells them) before
    they are stopped."""
    procs = [subprocess.Popen(command, env=env) for command, env in launches]
    try:
        first_failure = 0
        deadline = None
        while any(p.poll() is None for p in procs):
            for p in procs:
                if p.returncode not in (None, 0) and not first_failure:
                    first_failure = p.returncode
                    deadline = time.monotonic() + grace_seconds
            if deadline and time.monotonic() > deadline:
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
                deadline = None
            time.sleep(0.01)
        for p in procs:
            if p.returncode != 0 and not first_failure:
                first_failure = p.returncode
        return first_failure
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
