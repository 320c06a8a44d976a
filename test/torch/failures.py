"""Mistakes a PyTorch job makes, under fgpu: the coordinator names them, and PyTorch raises or
its watchdog ends the job, instead of the hang real NCCL would give.
--case skip: rank 1 skips an all_reduce the others call (then waits in a barrier).
--case mismatch: rank 1 broadcasts where the others all-reduce.
--case kill: rank 2 dies in the middle of a step."""

import argparse
import os
import signal

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=("skip", "mismatch", "kill"), required=True)
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank = dist.get_rank()
    t = torch.ones(1024).cuda()
    dist.all_reduce(t)  # a first collective that every rank makes
    torch.cuda.synchronize()
    if a.case == "skip":
        if rank != 1:
            dist.all_reduce(t)
        dist.barrier()
    elif a.case == "mismatch":
        if rank == 1:
            dist.broadcast(t, src=0)
        else:
            dist.all_reduce(t)
    elif rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    else:
        dist.all_reduce(t)
    torch.cuda.synchronize()
    print(f"rank {rank}: finished", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
