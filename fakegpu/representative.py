"""`fgpu --representative`: start only the ranks that differ, and let the coordinator stand in for
the others (coordinator/job_stand_ins.cpp, torch_hook/representative.py)."""

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
