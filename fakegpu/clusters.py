"""Clusters of any size built from the bundled presets, so a job gets a cluster without a YAML.

`--gpu h100 --nodes 16` means sixteen of the server the h100 presets describe (a DGX H100:
8 GPUs on NVSwitch, one 400 Gbit/s NIC per GPU). The node's shape, GPU profile and fabric come
from that family's one-node preset; only the node count, and the GPUs used per node, change.
"""

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .paths import SetupError, built, configs_dir

PRESETS = configs_dir() / "presets"

# The server a GPU name stands for: configs/presets/<family>-1node.yaml.
FAMILY_OF_GPU = {"a100": "dgx-a100", "h100": "dgx-h100", "h200": "hgx-h200", "h20": "h20", "b200": "dgx-b200",
                 "gb200": "gb200-nvl72"}
DEFAULT_GPU = "h100"


@dataclass
class NodeTemplate:
    """One server of a preset family, as the C++ parser reads its one-node preset."""
    family: str
    about: str         # the preset's leading comment: what the server is, and the figures' source
    profile: str       # GPU profile of every GPU
    gpus: int          # GPUs in one server
    nics: list         # its NICs as the cost model lays them out: [(Gbit/s, [local GPU indices])]
    fabric: dict       # the parser's fabric: intra_node and inter_node, each a mapping of the YAML's keys
    nccl_conf: dict    # cluster.nccl_conf: variable -> value
    nccl_version: str | None = None  # cluster.nccl_version

    def nics_for(self, gpus_used: int):
        """The NICs a node using its first `gpus_used` GPUs has on their rails: each NIC that serves
        one of them, at its own rate, serving those of them it served."""
        kept = [(gbps, [g for g in local if g < gpus_used]) for gbps, local in self.nics]
        return [(gbps, local) for gbps, local in kept if local]


def family_names():
    return sorted(p.name[:-len("-1node.yaml")] for p in PRESETS.glob("*-1node.yaml"))


def gpu_profile(name: str) -> dict:
    """A GPU profile (a built-in's name or a GPU profile file) as the C++ parser reads it: name,
    base, product name, peaks, kernel_rates, host_speed. SetupError with the parser's message."""
    done = subprocess.run([str(built("fakegpu-coordinator")), "--print-gpu", name], capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(done.stderr.strip() or done.stdout.strip())
    return json.loads(done.stdout)


def is_profile_file(gpu: str) -> bool:
    return gpu.endswith((".yaml", ".yml"))


def template(gpu: str) -> NodeTemplate:
    """The server for a GPU name (h100), preset family (dgx-h100) or GPU profile file (fgpu
    calibrate's: the server of the GPU it is based on, with that file's GPUs); SetupError naming
    the known ones otherwise."""
    if is_profile_file(gpu):
        if not Path(gpu).is_file():
            raise SetupError(f"--gpu {gpu}: no such GPU profile file")
        base = gpu_profile(gpu)["base"]
        servers = [template(family) for family in FAMILY_OF_GPU.values()]
        server = next((s for s in servers if s.profile == base), None)
        if server is None:
            raise SetupError(f"--gpu {gpu}: no preset server has its base GPU {base} (servers of "
                             f"{', '.join(sorted(FAMILY_OF_GPU))}); give a cluster YAML naming the file instead")
        server.profile = json.dumps(str(Path(gpu).resolve()))  # quoted: any path is one YAML scalar
        server.about = server.about + f"# GPUs: {server.profile}\n"
        return server
    key = gpu.strip().lower()
    family = FAMILY_OF_GPU.get(key, key)
    path = PRESETS / f"{family}-1node.yaml"
    if not path.is_file():
        raise SetupError(f"--gpu {gpu}: no preset server for it; use one of {', '.join(sorted(FAMILY_OF_GPU))} "
                         f"or a family: {', '.join(family_names())}")
    about = "".join(line + "\n" for line in path.read_text().splitlines() if line.startswith("#"))
    layout = cluster_layout(path)
    [node] = layout["nodes"]
    return NodeTemplate(family, about, node["gpus"][0], len(node["gpus"]),
                        [(nic["bandwidth_gbps"], nic["gpus"]) for nic in node["nics"]], layout["fabric"],
                        layout["nccl_conf"], layout["nccl_version"])


def cluster_layout(path) -> dict:
    """A cluster config as the coordinator's validating parser reads it (--print-layout)."""
    done = subprocess.run([str(built("fakegpu-coordinator")), "--print-layout", "--cluster-config", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SetupError(done.stderr.strip() or done.stdout.strip())
    return json.loads(done.stdout)


def flow_mapping(values: dict) -> str:
    """A YAML flow mapping of scalars: strings quoted as JSON (a subset of YAML), numbers plain."""
    def scalar(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return f"{v:.15g}"
        return json.dumps(v)
    return "{" + ", ".join(f"{k}: {scalar(v)}" for k, v in values.items()) + "}"


def plan_nodes(server: NodeTemplate, world=None, nodes=None, gpus_per_node=None):
    """GPUs on each node: `nodes` x `gpus_per_node` (which `world`, when given too, must match), or
    `world` GPUs on as many full nodes as it takes (the last holds the rest), as a scheduler places
    ranks on servers."""
    per_node = gpus_per_node or server.gpus
    for flag, value in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node), ("--nproc", world)):
        if value is not None and value < 1:
            raise SetupError(f"{flag} {value}: must be at least 1")
    if per_node > server.gpus:
        raise SetupError(f"--gpus-per-node {per_node}: a {server.family} node has {server.gpus} GPUs")
    if nodes is not None:
        if world is not None and world != nodes * per_node:
            raise SetupError(f"--nproc {world} does not match --nodes {nodes} x {per_node} GPUs")
        return [per_node] * nodes
    world = world or per_node
    return [per_node] * (world // per_node) + ([world % per_node] if world % per_node else [])


def cluster_yaml(server: NodeTemplate, shape) -> str:
    """Cluster YAML for nodes of the server, using shape[i] GPUs of node i."""
    if len(set(shape)) == 1 and shape[0] == server.gpus:
        name = f"{server.family}-{len(shape)}node"  # the name the bundled preset of that size has
    else:
        name = f"{server.family}-{sum(shape)}gpu"
    cluster = (f"cluster: {{name: {json.dumps(name)}, default_backend: nccl" +
               (f", nccl_conf: {flow_mapping(server.nccl_conf)}" if server.nccl_conf else "") +
               (f", nccl_version: {json.dumps(server.nccl_version)}" if server.nccl_version else "") + "}")
    lines = [f"# {sum(shape)} GPUs on {len(shape)} {server.family} node{'s' if len(shape) > 1 else ''}, "
             "built by fgpu from its one-node preset:\n" + server.about.rstrip("\n"),
             "version: 1", cluster, "nodes:"]
    rank = 0
    for index, used in enumerate(shape):
        ranks = ", ".join(str(r) for r in range(rank, rank + used))
        gpus = ", ".join([f"{{profile: {server.profile}}}"] * used)
        nics = ", ".join(f"{{bandwidth_gbps: {gbps:g}, gpus: [{', '.join(map(str, local))}]}}"
                         for gbps, local in server.nics_for(used))
        lines.append(f"  - {{id: node{index}, host: 127.0.0.1, ranks: [{ranks}], gpus: [{gpus}], nics: [{nics}]}}")
        rank += used
    lines.append("fabric:")
    for link in ("intra_node", "inter_node"):
        if link in server.fabric:
            keys = server.fabric[link]
            first = {k: keys[k] for k in ("type", "bandwidth_gbps", "latency_us") if k in keys}
            lines.append(f"  {link}: {flow_mapping({**first, **keys})}")
    return "\n".join(lines) + "\n"


def write_cluster_config(gpu=None, world=None, nodes=None, gpus_per_node=None, directory=None) -> str:
    """Writes the cluster (see plan_nodes) to a new file in directory (by default the temporary
    directory, where the caller must remove it); returns its path."""
    server = template(gpu or DEFAULT_GPU)
    text = cluster_yaml(server, plan_nodes(server, world, nodes, gpus_per_node))
    fd, path = tempfile.mkstemp(prefix="fakegpu-cluster-", suffix=".yaml", dir=directory)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def preset_path(name: str):
    """A bundled preset named without its directory and suffix (dgx-h100-2node), or by its family
    alone (aws-p5: its one-node preset, which --nodes repeats), or None."""
    if "/" in name:
        return None
    for path in (PRESETS / f"{name}.yaml", PRESETS / f"{name}-1node.yaml"):
        if path.is_file():
            return path
    return None


def cluster_config_path(given: str) -> Path:
    """--cluster-config's file: a path, else a bundled preset by name; refused with the presets' names."""
    path = Path(given) if Path(given).is_file() else preset_path(given)
    if path is None:
        names = sorted(p.stem for p in PRESETS.glob("*.yaml"))
        raise SetupError(f"--cluster-config {given}: no such file, nor a preset of that name (presets: "
                         f"{', '.join(names)}; or a family alone: {', '.join(family_names())})")
    return path
