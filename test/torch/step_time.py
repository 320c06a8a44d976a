"""A DDP training step timed with CUDA events on fake GPUs: the modeled time of the step on the
simulated cluster, compute (each operator's roofline on the rank's GPU) and communication (the
gradient all-reduces, as the cluster's model prices them) as the streams overlap them. Rank 0
writes the modeled step times (ms) to --out. With --nvtx, each step is an NVTX range named for
it, with the forward pass a range nested inside."""

import argparse
import contextlib
import json
import os

import torch
import torch.distributed as dist


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--nvtx", action="store_true")
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x = torch.randn(16, 128, 1024).cuda()
    times = []
    for step in range(a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if a.nvtx:
            torch.cuda.nvtx.range_push(f"train step {step}")
        start.record()
        opt.zero_grad()
        with torch.cuda.nvtx.range("forward") if a.nvtx else contextlib.nullcontext():
            loss = ddp(x).square().mean()
        loss.backward()
        opt.step()
        end.record()
        if a.nvtx:
            torch.cuda.nvtx.range_pop()
        end.synchronize()
        times.append(start.elapsed_time(end))
    if dist.get_rank() == 0:
        with open(a.out, "w") as f:
            json.dump({"world": dist.get_world_size(), "step_ms": times}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
