"""A small CNN with nn.SyncBatchNorm under DDP, compared with the same CNN with plain BatchNorm
trained in one process on the CPU over the whole batch: SyncBatchNorm normalizes over every rank's
slice together, so each step must match, and so must the weights and the running statistics
after the last step (fp32, rtol 1e-5). Rank 0 writes --out."""

import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

STEPS, PER_RANK, CLASSES, LR = 3, 3, 5, 0.1


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3), torch.nn.BatchNorm2d(8, momentum=0.3), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, CLASSES))


def batches(world):
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        yield torch.randn(world * PER_RANK, 3, 10, 10, generator=g), torch.randint(0, CLASSES, (world * PER_RANK,), generator=g)


def train(model, world, rows, device):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    losses = []
    for x, y in batches(world):
        opt.zero_grad()
        loss = F.cross_entropy(model(x[rows].to(device)), y[rows].to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def state(model):
    """Weights and running statistics, flattened."""
    return torch.cat([t.detach().float().reshape(-1).cpu() for t in model.state_dict().values()])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()

    model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(make_model()).cuda()
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    losses = torch.stack(train(ddp, world, slice(rank * PER_RANK, (rank + 1) * PER_RANK), "cuda"))
    dist.all_reduce(losses)  # each rank's loss is over its slice; the whole batch's is their mean
    losses /= world
    model.eval()
    x, _ = next(batches(world))
    evaluated = model(x[:2].cuda()).cpu()  # with the running statistics

    if rank == 0:
        reference = make_model()
        ref_losses = torch.stack(train(reference, world, slice(None), "cpu"))
        reference.eval()
        ref_evaluated = reference(x[:2])
        agree = lambda a, b: torch.allclose(a.cpu(), b, rtol=1e-5, atol=1e-6)
        result = {"world": world, "losses": losses.tolist(), "reference_losses": ref_losses.tolist(),
                  "losses_agree": agree(losses, ref_losses), "state_agrees": agree(state(model), state(reference)),
                  "eval_agrees": agree(evaluated, ref_evaluated),
                  "max_state_difference": (state(model) - state(reference)).abs().max().item()}
        print(json.dumps(result))
        with open(a.out, "w") as f:
            json.dump(result, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
