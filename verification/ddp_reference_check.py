"""DDP training compared with a single-process reference: the loss of every step and the final
weights must agree. Started by torchrun or `fgpu --nproc`. Under fgpu's simulate mode the ranks
compute on fake GPUs (PyTorch's CPU kernels over the device memory) and the reference can train
on the CPU (--reference-device cpu; test/run_ddp_multinode.sh); under `fgpu --mode hybrid` they
compute on the real GPU (test/run_hybrid_ddp.sh). Either way DDP averages the gradients through
fakegpu's simulator.

Each rank trains on its slice of every global batch. DDP averages the gradients, so with equal
slices every step equals one step of a single process on the whole batch, which rank 0 replays
afterwards from the same initial weights (in eager mode, also with --compile). `--device cpu
--backend gloo` runs the same comparison without a GPU or fakegpu, which checks the check itself.
"""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

STEPS, PER_RANK, FEATURES, LR = 6, 8, 16, 0.1


def make_model(device):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(device)


def global_batches(world, device):
    """The same batches on every rank: generated on the CPU from a fixed seed."""
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        x = torch.randn(world * PER_RANK, FEATURES, generator=g)
        y = torch.randn(world * PER_RANK, 1, generator=g)
        yield x.to(device), y.to(device)


def train(model, batches, rows):
    """SGD over the batches, each cut down to `rows`; returns the loss of every step."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for x, y in batches:
        opt.zero_grad()
        loss = F.mse_loss(model(x[rows]), y[rows])
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--backend", default="nccl")
    p.add_argument("--out", help="write the compared figures here as JSON (rank 0)")
    p.add_argument("--rtol", type=float, default=1e-4, help="relative tolerance of the comparison")
    p.add_argument("--reference-device", help="where rank 0 trains the reference (default: where the ranks train)")
    p.add_argument("--compile", action="store_true", help="train the DDP model under torch.compile")
    a = p.parse_args()
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.device == "cuda":
        # More ranks than GPUs share them, as under fgpu's hybrid mode on one GPU.
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")

    model = make_model(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if a.device == "cuda" else None)
    trained = torch.compile(ddp) if a.compile else ddp
    local_losses = train(trained, global_batches(world, device), slice(rank * PER_RANK, (rank + 1) * PER_RANK))
    # The loss over the whole batch is the mean of the ranks' losses over their equal slices.
    losses = torch.stack(local_losses)
    dist.all_reduce(losses)
    losses /= world
    # DDP keeps the replicas identical: every rank's weights must equal rank 0's, bit for bit.
    weights = flat(model)
    rank0_weights = weights.clone()
    dist.broadcast(rank0_weights, 0)
    same_replicas = torch.equal(weights, rank0_weights)

    ok = same_replicas
    if rank == 0:
        ref_device = torch.device(a.reference_device) if a.reference_device else device
        reference = make_model(ref_device)
        ref_losses = torch.stack(train(reference, global_batches(world, ref_device), slice(None))).to(device)
        ref_weights = flat(reference).to(device)
        losses_agree = torch.allclose(losses, ref_losses, rtol=a.rtol, atol=1e-6)
        weights_agree = torch.allclose(weights, ref_weights, rtol=a.rtol, atol=1e-6)
        ok = ok and losses_agree and weights_agree
        result = {"world": world, "device": str(device), "backend": a.backend,
                  "ddp_losses": losses.tolist(), "reference_losses": ref_losses.tolist(),
                  "reference_device": str(ref_device),
                  "max_weight_difference": (weights - ref_weights).abs().max().item(),
                  "losses_agree": losses_agree, "weights_agree": weights_agree}
        print(json.dumps(result))
        if a.out:
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)
    print(f"rank {rank}/{world}: " + ("DDP matches the single-process reference" if ok else "MISMATCH") +
          ("" if same_replicas else " (replicas differ from rank 0)"))
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
