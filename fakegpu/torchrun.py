"""One torchrun per virtual node.

A single torchrun on this machine would make every rank local to one node. With a cluster of K
nodes fgpu starts K torchruns instead, as K machines would: `--nnodes K --node_rank i`, a static
rendezvous on this host, and each told its node (FAKEGPU_NODE, FAKEGPU_HOSTNAME), so LOCAL_RANK
counts within the node and each rank sees its node's devices."""

import socket
from pathlib import Path

from .paths import SetupError

# torchrun options without a value; every other option takes one (as `--opt v` or `--opt=v`).
FLAGS = {"--standalone", "--no_python", "--no-python", "-m", "--module", "--run_path", "--run-path"}
# What fgpu decides for each node's torchrun.
OWNED = {"--nnodes", "--node_rank", "--node-rank", "--master_addr", "--master-addr", "--master_port",
         "--master-port", "--rdzv_endpoint", "--rdzv-endpoint", "--rdzv_backend", "--rdzv-backend", "--rdzv_id",
         "--rdzv-id", "--standalone", "--nproc_per_node", "--nproc-per-node"}


def split(command):
    """(launcher, {option: value}, [options kept], script and its arguments), or None when the
    command is not torchrun."""
    if not command:
        return None
    if Path(command[0]).name == "torchrun":
        launcher, rest = command[:1], command[1:]
    elif Path(command[0]).name.startswith("python") and command[1:3] == ["-m", "torch.distributed.run"]:
        launcher, rest = command[:3], command[3:]
    else:
        return None
    given, kept = {}, []
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        name, eq, value = rest[i].partition("=")
        option = [rest[i]]
        if not eq and name not in FLAGS and i + 1 < len(rest):
            value = rest[i + 1]
            option.append(value)
        i += len(option)
        given[name] = value if (eq or name not in FLAGS) else True
        if name not in OWNED:
            kept += option
    return launcher, given, kept, rest[i:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def per_node_launches(command, node_names, nodes, env):
    """The (command, env) of each node's torchrun, or None when command is not torchrun.
    Raises SetupError when its options contradict the cluster."""
    parts = split(command)
    if parts is None:
        return None
    launcher, given, kept, script = parts
    sizes = {len(ranks) for ranks in nodes}
    if len(sizes) != 1:
        raise SetupError("torchrun starts the same number of ranks on every node, but the cluster's nodes have "
                         f"{sorted(len(r) for r in nodes)} GPUs")
    per_node = sizes.pop()
    for option, want in (("--nproc_per_node", per_node), ("--nproc-per-node", per_node), ("--nnodes", len(nodes))):
        if option in given and str(given[option]) != str(want):
            raise SetupError(f"torchrun {option} {given[option]} does not match the cluster config, which has "
                             f"{len(nodes)} nodes of {per_node} GPUs")
    port = str(free_port())
    launches = []
    for index, name in enumerate(node_names):
        cmd = [*launcher, *kept, "--nnodes", str(len(nodes)), "--node_rank", str(index), "--nproc_per_node",
               str(per_node), "--master_addr", "127.0.0.1", "--master_port", port, *script]
        launches.append((cmd, dict(env, FAKEGPU_NODE=str(index), FAKEGPU_HOSTNAME=name)))
    return launches
