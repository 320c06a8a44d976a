"""A small SPMD training job whose every rank does the same work, for comparing `fgpu
--representative` with running every rank: a stack of pre-norm transformer blocks trained for a
few steps with AdamW.

--style ddp: DistributedDataParallel over the world.
--style fsdp: fully_shard (FSDP2) over the world.
--style tp_dp: a (dp, tp) DeviceMesh, tp the ranks of one node: the blocks' linear layers split
  column- and row-wise over tp, and fully_shard over dp.
--style pp: a (pp, dp) DeviceMesh of 2 pipeline stages, each half the blocks on the ranks of half the
  nodes, fully_shard over dp, run by torch.distributed.pipelining's 1F1B schedule in 4 microbatches.
--device-id: init_process_group binds the rank's GPU, so PyTorch makes the DeviceMesh's groups by
  splitting the world's communicator (split_group, ncclCommSplit) instead of with new_group.
Nothing is written: the figures are the cluster report's."""

import argparse
import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel

from train_parallel import TransformerBlock

STEPS, BATCH, SEQ, DIM, HEADS, LAYERS = 4, 4, 128, 256, 8, 2  # --size can make it larger
STAGES, MICROBATCHES = 2, 4  # --style pp


def build(style, device):
    model = torch.nn.Sequential(*(TransformerBlock(DIM, HEADS) for _ in range(LAYERS))).to(device)
    world = dist.get_world_size()
    if style == "ddp":
        return DistributedDataParallel(model, device_ids=[device])
    if style == "fsdp":
        for block in model:
            fully_shard(block)
        return fully_shard(model)
    tp = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    mesh = init_device_mesh("cuda", (world // tp, tp), mesh_dim_names=("dp", "tp"))
    plan = {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(), "o": RowwiseParallel(),
            "up": ColwiseParallel(), "down": RowwiseParallel()}
    for block in model:
        parallelize_module(block, mesh["tp"], plan)
        fully_shard(block, mesh=mesh["dp"])
    return fully_shard(model, mesh=mesh["dp"])


def pipeline(device):
    """This rank's stage of the blocks, and the 1F1B schedule that runs it."""
    world = dist.get_world_size()
    mesh = init_device_mesh("cuda", (STAGES, world // STAGES), mesh_dim_names=("pp", "dp"))
    stage_index = mesh["pp"].get_local_rank()
    per_stage = max(1, LAYERS // STAGES)
    blocks = torch.nn.Sequential(*(TransformerBlock(DIM, HEADS) for _ in range(per_stage))).to(device)
    for block in blocks:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(blocks, mesh=mesh["dp"])
    stage = PipelineStage(blocks, stage_index, STAGES, device, group=mesh["pp"].get_group())
    schedule = Schedule1F1B(stage, n_microbatches=MICROBATCHES,
                            loss_fn=lambda out, target: (out.float() - target).pow(2).mean())
    return blocks, stage_index, schedule


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=("ddp", "fsdp", "tp_dp", "pp"), required=True)
    p.add_argument("--size", help="BATCH,SEQ,DIM,HEADS,LAYERS in place of the small default")
    p.add_argument("--device-id", action="store_true", help="bind each rank's GPU in init_process_group")
    args = p.parse_args()
    if args.size:
        global BATCH, SEQ, DIM, HEADS, LAYERS
        BATCH, SEQ, DIM, HEADS, LAYERS = map(int, args.size.split(","))
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group("nccl", device_id=device if args.device_id else None)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    if args.style == "pp":
        model, stage_index, schedule = pipeline(device)
    else:
        model = build(args.style, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(STEPS):
        x = torch.randn(BATCH, SEQ, DIM, device=device)
        if args.style != "pp":
            model(x).float().pow(2).mean().backward()
        elif stage_index == 0:
            schedule.step(x)
        else:
            schedule.step(target=torch.zeros(BATCH, SEQ, DIM, device=device))
        optimizer.step()
        optimizer.zero_grad()
    torch.cuda.synchronize()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
