"""Cluster configs the tests and benchmarks write for themselves (fgpu writes its own from the
presets: fakegpu/clusters.py)."""

import os
import tempfile


def write_single_node_config(world: int, name: str = "", directory=None) -> str:
    """Writes a one-node cluster of `world` H100s on NVSwitch to a new file in directory (by
    default the temporary directory, where the caller must remove it); returns its path."""
    gpus = ", ".join(["{profile: h100}"] * world)
    text = (f"version: 1\ncluster: {{name: {name or f'local-{world}gpu'}}}\nnodes:\n"
            f"  - {{id: node0, ranks: [{', '.join(map(str, range(world)))}], gpus: [{gpus}]}}\n"
            "fabric:\n  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}\n")
    fd, path = tempfile.mkstemp(prefix="fakegpu-cluster-", suffix=".yaml", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path
