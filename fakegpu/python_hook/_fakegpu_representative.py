"""Representative runs (`fgpu --representative`, FAKEGPU_REPRESENTATIVE): only some ranks of the job
run as processes, and the coordinator stands in for the others. Two things change in PyTorch for
that, and only then:

- The env:// rendezvous does not wait for every rank of the world to reach its store: the store
  on rank 0 is made without a count of workers, since most of them never come.
- Every process group the program makes (new_group, a DeviceMesh's groups, the default group) is
  named to the coordinator with its global ranks, through fakegpu's NCCL library. Every rank
  makes every group, member or not, under the same name, and a group's NCCL communicators carry
  that name; so the coordinator knows whom each communicator holds, and which groups are of one
  kind, without a process for their ranks."""

import ctypes
import importlib
import os
import sys


def enabled():
    return bool(os.environ.get("FAKEGPU_REPRESENTATIVE"))


def _describe_group():
    """fakegpu_nccl_describe_group of the loaded NCCL library; None (having said so) without it."""
    try:
        fn = ctypes.CDLL(None).fakegpu_nccl_describe_group
    except AttributeError:
        sys.stderr.write("fakegpu: FAKEGPU_REPRESENTATIVE is set but fakegpu's libnccl.so.2 is not loaded; "
                         "run the job under fgpu --representative\n")
        return None
    fn.argtypes = (ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int32))
    fn.restype = ctypes.c_int
    return fn


def install(torch):
    """Patches torch.distributed as the module docstring says; nothing without FAKEGPU_REPRESENTATIVE."""
    if not enabled() or not torch.distributed.is_available():
        return
    describe = _describe_group()
    if describe is None:
        return
    distributed_c10d = importlib.import_module("torch.distributed.distributed_c10d")
    rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the module, not its function

    name_group = distributed_c10d._process_group_name

    def process_group_name(ranks, *args, **kwargs):
        name = name_group(ranks, *args, **kwargs)
        members = (ctypes.c_int32 * len(ranks))(*ranks)
        describe(str(name).encode(), len(ranks), members)
        return name

    distributed_c10d._process_group_name = process_group_name

    create_store = rendezvous._create_c10d_store

    def create_c10d_store(hostname, port, rank, world_size, timeout, *args, **kwargs):
        return create_store(hostname, port, rank, None, timeout, *args, **kwargs)  # None: wait for no one

    rendezvous._create_c10d_store = create_c10d_store
