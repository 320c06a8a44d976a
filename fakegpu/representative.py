"""`fgpu --representative`: start only the ranks that differ, and let the coordinator stand in for
the others (coordinator/job_stand_ins.cpp, torch_hook/representative.py). Also the checks the
ranks' hook makes of the groups and pipelines the program builds: which ranks must run as
processes, and the list that runs them."""

import os
from pathlib import Path

from .paths import SetupError
from . import torchrun


def rank_list(text: str):
    """The ranks of FAKEGPU_REPRESENTATIVE ("0,8", "0-3"), sorted; SetupError when malformed."""
    ranks = set()
    for item in text.split(","):
        first, dash, last = item.strip().partition("-")
        try:
            span = range(int(first), int(last if dash else first) + 1)
        except ValueError:
            raise SetupError(f"FAKEGPU_REPRESENTATIVE={text}: '{item}' is not a rank or a range of ranks "
                             "(write them as 0,8 or 0-3)") from None
        ranks.update(span)
    if 0 not in ranks:
        raise SetupError(f"FAKEGPU_REPRESENTATIVE={text}: rank 0 must run as a process")
    return sorted(ranks)


def check_representative(args, gpus) -> str:
    """The ranks that run as processes, as a list FAKEGPU_REPRESENTATIVE can hold ("0,4"; ranges
    written out, so that the ranks' hook reads it plainly); SetupError when the job cannot run so."""
    if gpus:
        raise SetupError(f"--representative runs on fake GPUs only, not with --mode {args.mode}")
    if not args.nproc and torchrun.split(args.command) is None:
        raise SetupError("--representative starts the ranks itself: give --nproc N and the program, or a torchrun "
                         "command (fgpu --representative torchrun --nproc_per_node=8 train.py)")
    return ",".join(map(str, rank_list(os.environ.get("FAKEGPU_REPRESENTATIVE") or "0")))


def direct_command(command):
    """The command one rank of a torchrun command runs: its script under the Python beside
    torchrun (or the one that runs torch.distributed.run), as torchrun itself would start it."""
    launcher, given, _, script = torchrun.split(command)
    if not script:
        raise SetupError(f"{' '.join(command)}: torchrun is given no script")
    if given.get("--no_python") or given.get("--no-python"):
        return list(script)
    python = launcher[0] if len(launcher) > 1 else str(Path(launcher[0]).parent / "python")
    module = given.get("-m") or given.get("--module")
    return [python, "-m", *script] if module else [python, *script]


def representative_launches(launches, representatives: str):
    """Of every rank's launch, those of the ranks that run as processes; SetupError when one is
    beyond the world."""
    wanted = rank_list(representatives)
    world = len(launches)
    if wanted[-1] >= world:
        raise SetupError(f"FAKEGPU_REPRESENTATIVE={representatives}: rank {wanted[-1]} is beyond the world of "
                         f"{world} ranks")
    return [launch for launch in launches if launch.rank in wanted]


class NeedsProcesses(RuntimeError):
    """Ranks that do different work run no process: `what` says so, `processes` is the
    FAKEGPU_REPRESENTATIVE that runs them."""

    def __init__(self, what, processes, which="a process for each stage"):
        super().__init__(f"{what}: run it with FAKEGPU_REPRESENTATIVE={processes} ({which})")
        self.what, self.processes = what, processes


def check_group_ranks(ranks, rank, processes):
    """Raises NeedsProcesses where `rank`, a process, is in a group (global ranks) whose first
    rank runs none: a group's broadcasts and scatters start there, and only a process posts the
    messages they send (a stand-in repeats collectives, and meets messages sent to it)."""
    running = {int(r) for r in processes.split(",")}
    first = min(ranks)
    if rank in ranks and first not in running:
        raise NeedsProcesses(f"fakegpu: --representative: process group of ranks {sorted(ranks)} holds rank {rank}, "
                             f"which runs as a process, but its first rank, {first}, runs none",
                             ",".join(str(r) for r in sorted(running | {first})),
                             "a process for each group's first rank")


def check_stage_ranks(stage_ranks, stages, world, processes):
    """Raises, naming what to run instead, unless every rank of this pipeline runs as a process and
    every other rank repeats the process of its own stage: stages as blocks of consecutive ranks
    (the pipeline as the outermost dimension of the mesh), as a stood-in rank follows the nearest
    process below it."""
    running = {int(r) for r in processes.split(",")}
    block, first = world // len(stage_ranks), min(stage_ranks)
    if first >= block or sorted(stage_ranks) != [first + i * block for i in range(len(stage_ranks))]:
        raise RuntimeError(f"fakegpu: --representative: this job runs a pipeline of {stages} stages on ranks "
                           f"{sorted(stage_ranks)} of {world}; a stood-in rank repeats the nearest process below it, "
                           "so each stage must hold a block of consecutive ranks (the pipeline as the outermost "
                           "dimension of the device mesh). Run every rank (leave out --representative)")
    if not running.issuperset(stage_ranks):
        # Every process of the first stage (0 and 1, say) has a pipeline like this one, a block
        # apart: all their stages are named at once, so that each process asks for the same list.
        needed = {p + i * block for p in running if p < block for i in range(len(stage_ranks))}
        raise NeedsProcesses(f"fakegpu: --representative: this job runs a pipeline of {stages} stages on ranks "
                             f"{sorted(stage_ranks)}, whose stages do different work, and ranks "
                             f"{sorted(set(stage_ranks) - running)} run no process",
                             ",".join(str(r) for r in sorted(running | needed)))
