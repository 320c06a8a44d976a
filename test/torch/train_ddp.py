"""An ordinary DDP training script, run unchanged under fgpu: set the device from LOCAL_RANK,
init the NCCL process group (with or without device_id), build a model on cuda, train a few
steps, destroy the group. Each rank also writes what the test checks to OUT/rank<R>.json:
whether DDP's initial broadcast gave it rank 0's parameters exactly, the sizes of DDP's
gradient buckets at every step, whether the replicas were identical after every step, and the
step losses."""

import argparse
import json
import os

import torch
import torch.distributed as dist

FEATURES, HIDDEN, OUTPUTS, BATCH = 32, 256, 8, 16


def make_model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, HIDDEN),
                               torch.nn.ReLU(), torch.nn.Linear(HIDDEN, OUTPUTS))


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def replicas_identical(model, world):
    mine = flat(model)
    everyone = torch.zeros(world * mine.numel(), device=mine.device)
    dist.all_gather_into_tensor(everyone, mine)
    everyone = everyone.cpu().reshape(world, -1)
    return all(torch.equal(everyone[r], everyone[0]) for r in range(world))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device-id", action="store_true", help="pass device_id to init_process_group")
    p.add_argument("--bucket-cap-mb", type=float, default=0.1)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    if a.device_id:
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    else:
        dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    # Every rank starts from different weights; DDP must give them all rank 0's.
    model = make_model(seed=100 + rank).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], bucket_cap_mb=a.bucket_cap_mb)
    init_is_rank0s = torch.equal(flat(model).cpu(), flat(make_model(seed=100)))

    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    buckets, identical, losses = [], [], []
    generator = torch.Generator().manual_seed(rank)
    for _ in range(a.steps):
        x = torch.randn(BATCH, FEATURES, generator=generator).cuda()
        y = torch.randn(BATCH, OUTPUTS, generator=generator).cuda()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()
        buckets.append([b.buffer().numel() * b.buffer().element_size() for b in ddp.reducer._get_zeros_like_grad_buckets()])
        opt.step()
        losses.append(loss.item())
        identical.append(replicas_identical(model, world))

    with open(os.path.join(a.out, f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "world": world, "node": os.environ.get("FAKEGPU_NODE"), "init_is_rank0s": init_is_rank0s,
                   "buckets": buckets, "replicas_identical": identical, "losses": losses}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
