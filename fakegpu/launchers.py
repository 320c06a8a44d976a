"""Launcher command lines (torchrun, mpirun and friends): which launcher, and the number of ranks
it asks for, where fgpu sizes the cluster by it."""

from pathlib import Path

from . import torchrun

MPI_LAUNCHERS = {"mpirun", "mpiexec", "orterun", "srun"}


def launcher_name(command):
    """"torchrun", or the MPI launcher's name, when the command starts ranks of its own; else None."""
    if torchrun.split(command) is not None:
        return "torchrun"
    name = Path(command[0]).name if command else ""
    return name if name in MPI_LAUNCHERS else None


def launcher_world_size(command):
    """The number of ranks a launcher command line asks for, or None when it does not say:
    mpirun/mpiexec -np N (or -n N), srun -n N, torchrun --nproc_per_node N [--nnodes M]."""
    if not command:
        return None

    def number(text):
        return int(text) if isinstance(text, str) and text.isdigit() and int(text) > 0 else None

    launcher = launcher_name(command)
    if launcher == "torchrun":
        given = torchrun.split(command)[1]  # torchrun's options, up to its script
        per_node = number(given.get("--nproc_per_node") or given.get("--nproc-per-node"))
        nodes = number(given.get("--nnodes")) or 1
        return per_node * nodes if per_node else None
    args = list(command)

    def value(*flags):
        for i, a in enumerate(args):
            for f in flags:
                if a == f and i + 1 < len(args):
                    return args[i + 1]
                if a.startswith(f + "="):
                    return a.split("=", 1)[1]
        return None

    if launcher:
        return number(value("-np", "-n", "--np", "--ntasks"))
    return None
