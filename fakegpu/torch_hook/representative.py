"""Representative runs (`fgpu --representative`, FAKEGPU_REPRESENTATIVE): only some ranks of the job
run as processes, and the coordinator stands in for the others. Two things change in PyTorch for
that, and only then:

- The env:// rendezvous does not wait for every rank of the world to reach its store: the store
  on rank 0 is made without a count of workers, since most of them never come.
- Every process group the program makes (new_group, a DeviceMesh's groups, the default group,
  every part of a split_group) is named to the coordinator with its global ranks, through
  fakegpu's NCCL library. Every rank makes every group, member or not, under the same name, and a
  group's NCCL communicators carry that name; so the coordinator knows whom each communicator
  holds, and which groups are of one kind, without a process for their ranks.

A stood-in rank repeats the nearest process below it, so ranks that do different work need
processes of their own. Pipeline stages (torch.distributed.pipelining) are the common case: a
stage whose pipeline has a stage on a rank that runs no process stops the job at once, rather
than send activations to a rank that only repeats stage 0. So does a process in a group whose
first rank runs none: the group's broadcasts and scatters start there. Where fgpu chose the
processes (FAKEGPU_REPRESENTATIVE_RERUN set), it is told the FAKEGPU_REPRESENTATIVE that runs the
job and runs it again; otherwise the message gives it."""

import functools
import importlib
import inspect
import os
import sys

import torch

from fakegpu.representative import NeedsProcesses, check_group_ranks, check_stage_ranks
from fakegpu.torch_hook import bridge as B


def enabled():
    return bool(os.environ.get("FAKEGPU_REPRESENTATIVE"))


def _runtime():
    """fakegpu's runtime, where fakegpu's NCCL library is loaded beside it; None (having said so)
    otherwise."""
    runtime = B.find()
    if runtime is None or not runtime.coordinator_linked():
        sys.stderr.write("fakegpu: FAKEGPU_REPRESENTATIVE is set but fakegpu's libnccl.so.2 is not loaded; "
                         "run the job under fgpu --representative\n")
        return None
    return runtime


def install():
    """Patches torch.distributed as the module docstring says; nothing without FAKEGPU_REPRESENTATIVE."""
    if not enabled() or not torch.distributed.is_available():
        return
    runtime = _runtime()
    if runtime is None:
        return
    distributed_c10d = importlib.import_module("torch.distributed.distributed_c10d")
    rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the module, not its function

    name_group = distributed_c10d._process_group_name
    naming = [True]  # off while split_group runs: it names its parts itself

    def process_group_name(ranks, *args, **kwargs):
        name = name_group(ranks, *args, **kwargs)
        if naming[0]:
            runtime.describe_group(str(name), [int(r) for r in ranks])
            _check_first_rank([int(r) for r in ranks])
        return name

    distributed_c10d._process_group_name = process_group_name
    _name_split_parts(runtime, distributed_c10d, naming)
    _name_message_pairs(runtime, distributed_c10d)

    create_store = rendezvous._create_c10d_store

    def create_c10d_store(hostname, port, rank, world_size, timeout, *args, **kwargs):
        return create_store(hostname, port, rank, None, timeout, *args, **kwargs)  # None: wait for no one

    rendezvous._create_c10d_store = create_c10d_store
    _check_pipeline_stages()


def _name_split_parts(runtime, distributed_c10d, naming):
    """split_group (a DeviceMesh's way once init_process_group has a device_id) makes every part
    of a split at once, with one ncclCommSplit, and PyTorch names only the part of the rank that
    calls it. Its other parts are named here too, with their global ranks, before the process's
    own: the coordinator makes the part the process named last, and the others of its kind
    (the same size, apart) become its mirrors."""
    split = distributed_c10d.split_group
    signature = inspect.signature(split)

    def split_group(*args, **kwargs):
        given = signature.bind(*args, **kwargs).arguments
        parent = given.get("parent_pg") or distributed_c10d._get_default_group()
        to_global = torch.distributed.get_process_group_ranks(parent)
        mine = torch.distributed.get_rank(parent)
        parts = sorted(given.get("split_ranks") or [], key=lambda part: mine in part)  # the process's last
        for part in parts:
            runtime.describe_group(distributed_c10d._hash_ranks_to_str(part), [int(to_global[r]) for r in part])
        if parts and mine in parts[-1]:
            _check_first_rank([int(to_global[r]) for r in parts[-1]])
        naming[0] = False
        try:
            return split(*args, **kwargs)
        finally:
            naming[0] = True

    _replace("split_group", split, split_group,
             (distributed_c10d, torch.distributed, importlib.import_module("torch.distributed.device_mesh")))


def _name_message_pairs(runtime, distributed_c10d):
    """Without a device_id, PyTorch makes a communicator of two ranks for the messages between
    them (send, recv, isend, irecv), named as their group. The pair is named to the coordinator
    ("<group>/pair:<low>:<high>") before its first message, so that the coordinator can bring the
    stood-in one."""
    named = set()

    def name_pair(group, peer):
        me = torch.distributed.get_rank()
        if peer is None or peer == me or getattr(group, "bound_device_id", None) is not None:
            return  # no communicator of its own: with a device_id, messages use the group's
        low, high = sorted((me, peer))
        if (group.group_name, low, high) in named:
            return
        named.add((group.group_name, low, high))
        runtime.describe_group(f"{group.group_name}/pair:{low}:{high}", [low, high])
        _check_first_rank([low, high])

    def naming_pairs(send_or_recv, peer_name):
        signature = inspect.signature(send_or_recv)

        @functools.wraps(send_or_recv)
        def call(*args, **kwargs):
            given = signature.bind(*args, **kwargs).arguments
            group = given.get("group") or distributed_c10d._get_default_group()
            peer, group_peer = given.get(peer_name), given.get(f"group_{peer_name}")
            if peer is None and group_peer is not None:
                peer = distributed_c10d.get_global_rank(group, group_peer)
            name_pair(group, peer)
            return send_or_recv(*args, **kwargs)

        return call

    for name, peer_name in (("send", "dst"), ("isend", "dst"), ("recv", "src"), ("irecv", "src")):
        original = getattr(distributed_c10d, name)
        wrapped = naming_pairs(original, peer_name)
        _replace(name, original, wrapped, (distributed_c10d, torch.distributed))


def _replace(name, original, replacement, modules):
    """Puts `replacement` wherever these modules hold `original` as `name` (torch.distributed and
    the device mesh import PyTorch's functions under their own names)."""
    for module in modules:
        if getattr(module, name, None) is original:
            setattr(module, name, replacement)


def _check_pipeline_stages():
    stage = importlib.import_module("torch.distributed.pipelining.stage")
    init = stage._PipelineStageBase.__init__

    def checked_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        try:
            check_stage_ranks(torch.distributed.get_process_group_ranks(self.group), self.num_stages,
                              torch.distributed.get_world_size(), os.environ["FAKEGPU_REPRESENTATIVE"])
        except NeedsProcesses as e:
            _run_again_or_raise(e)

    stage._PipelineStageBase.__init__ = checked_init


def _check_first_rank(ranks):
    """check_group_ranks for a group this process makes (global ranks; none: the world)."""
    if not ranks or not torch.distributed.is_initialized():
        return
    try:
        check_group_ranks(ranks, torch.distributed.get_rank(), os.environ["FAKEGPU_REPRESENTATIVE"])
    except NeedsProcesses as e:
        _run_again_or_raise(e)


def _run_again_or_raise(e):
    """Where fgpu chose the processes, tells it the ones to run the job with and ends the
    process; otherwise raises `e`, which names them."""
    rerun = os.environ.get("FAKEGPU_REPRESENTATIVE_RERUN")
    if not rerun:
        raise e
    with open(rerun, "w") as f:  # fgpu runs the job again with these processes
        f.write(e.processes)
    print(f"{e.what}: fgpu runs it again with FAKEGPU_REPRESENTATIVE={e.processes}", file=sys.stderr, flush=True)
    os._exit(EXIT_FOR_RERUN)


# How a rank that asked fgpu to run the job again ends (sysexits' EX_TEMPFAIL).
EXIT_FOR_RERUN = 75
