"""Environment for rank processes, and a small local launcher (like mpirun -np N)."""

from pathlib import Path

from .modes import loaded_library
from .paths import SetupError, built
from .report import span_list
from .supervise import GRACE_SECONDS, Launch, supervise


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


def share_gpus(env: dict, per_node: int, gpus: int, workdir: Path) -> str:
    """Hybrid mode. Where a node's ranks outnumber the GPUs here, each rank sees the node's
    devices, device d running on GPU d % gpus, so that a program (PyTorch's too) may select
    LOCAL_RANK as it would on the cluster: libfakegpu-hybrid-devices.so over the CUDA runtime and
    driver, and libfakegpu-hybrid-nvml.so over NVML, each standing before NVIDIA's library under
    its soname and reaching it under a name linked in `workdir` (libfakecuda/hybrid/). Returns
    what fgpu tells the user."""
    if per_node <= gpus:
        return f"up to {per_node} ranks per node compute on this machine's {gpus} GPU(s), each on the device it selects"
    links = workdir / "hybrid-libraries"
    links.mkdir(exist_ok=True)
    preload = [built("libfakegpu-hybrid-devices.so")]
    driver = loaded_library("libcuda.so.1")
    if not driver:
        raise SetupError("hybrid mode: NVIDIA's driver (libcuda.so.1) was found, then could not be loaded again")
    (links / "libfakegpu-cuda-driver.so.1").symlink_to(driver)
    nvml = loaded_library("libnvidia-ml.so.1")
    if nvml:  # without it PyTorch counts the devices through the runtime, which is shared already
        (links / "libfakegpu-nvml.so.1").symlink_to(nvml)
        preload.append(built("libfakegpu-hybrid-nvml.so"))
    env["LD_PRELOAD"] = prepend("LD_PRELOAD", ":".join(map(str, preload)), env)
    env["LD_LIBRARY_PATH"] = prepend("LD_LIBRARY_PATH", str(links), env)
    env["FAKEGPU_HYBRID_DEVICES"] = str(per_node)
    return (f"{per_node} ranks per node share this machine's {gpus} GPU(s): each rank sees {per_node} devices, "
            f"device d on GPU d % {gpus}")


def virtual_nodes_value(node_names, nodes) -> str:
    """FAKEGPU_VIRTUAL_NODES: each node's id and ranks, "node0=0-3;node1=4-7". A rank started by
    another launcher (mpirun, srun) takes its node from it when it starts (libnccl_stub's
    virtual_node.cpp)."""
    return ";".join(f"{name}={span_list(ranks, ',')}" for name, ranks in zip(node_names, nodes))


def rank_launches(command, nodes, env, node_names=None):
    """One Launch per rank with RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE set.

    nodes is a list of rank lists, one per node. With node_names (virtual nodes on this one
    machine) each rank also gets its node's name as FAKEGPU_HOSTNAME, the host it reports.
    """
    world = sum(len(n) for n in nodes)
    launches = []
    for node_index, ranks in enumerate(nodes):
        for local, rank in enumerate(ranks):
            # FAKEGPU_NODE gives each rank its node's devices and PCI domain in the fake runtime.
            rank_env = dict(env, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local),
                            LOCAL_WORLD_SIZE=str(len(ranks)), GROUP_RANK=str(node_index), FAKEGPU_NODE=str(node_index))
            node = node_names[node_index] if node_names else f"node{node_index}"
            if node_names:
                rank_env["FAKEGPU_HOSTNAME"] = node
            launches.append(Launch(list(command), rank_env, f"rank {rank}", rank, node))
    return launches


def run_ranks(command, nodes, env, node_names=None, grace_seconds=GRACE_SECONDS, stdout=None) -> int:
    """Runs one process per rank (rank_launches); returns the job's exit code."""
    return supervise(rank_launches(command, nodes, env, node_names), grace_seconds, stdout=stdout).code
