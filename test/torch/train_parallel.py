"""FSDP2 and 2-D (tensor-parallel x FSDP2) training of a tiny transformer block under fgpu,
compared with the same training in one process on the CPU: the loss of every step and the final
weights must agree (fp32, rtol 1e-5), the way they would on real GPUs.

--style fsdp: every rank is data-parallel; parameters are sharded with fully_shard.
--style tp_dp: a (dp, tp) DeviceMesh, tp the ranks of one node: the block's linear layers are
  split column-/row-wise over tp (parallelize_module), and fully_shard shards over dp.
--style ddp_fsdp: DDP trains one copy, then FSDP2 another, both on the default process group
  (DDP's all-reduces, then FSDP2's all-gathers and reduce-scatters on their own streams); each
  must agree with the reference.
--compile: the sharded model runs under torch.compile with its default backend.
Each data-parallel rank trains on its slice of every global batch. Rank 0 writes --out."""

import argparse
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from torch.nn.parallel import DistributedDataParallel

STEPS, PER_RANK, SEQ, DIM, HEADS, LR = 4, 2, 8, 32, 4, 0.05


class TransformerBlock(torch.nn.Module):
    """Pre-norm attention and MLP of width `dim` over `heads` heads; the projections are separate
    so that they can be split."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.q, self.k, self.v = (torch.nn.Linear(dim, dim) for _ in range(3))
        self.o = torch.nn.Linear(dim, dim)
        self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.norm1(x)
        b, s, dim = h.shape
        split = lambda t: t.view(b, s, -1, dim // self.heads).transpose(1, 2)  # heads local to this rank
        q, k, v = split(self.q(h)), split(self.k(h)), split(self.v(h))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, -1)
        x = x + self.o(a)
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Block(TransformerBlock):
    """The block with a head giving one output per position."""

    def __init__(self):
        super().__init__(DIM, HEADS)
        self.head = torch.nn.Linear(DIM, 1)

    def forward(self, x):
        return self.head(super().forward(x)).squeeze(-1)


def make_model(device):
    torch.manual_seed(0)
    return Block().to(device)


def batches(dp_world):
    g = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        yield (torch.randn(dp_world * PER_RANK, SEQ, DIM, generator=g),
               torch.randn(dp_world * PER_RANK, SEQ, generator=g))


def train(model, rows, device, dp_world):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    losses = []
    for x, y in batches(dp_world):
        opt.zero_grad()
        loss = F.mse_loss(model(x[rows].to(device)), y[rows].to(device))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def full_weights(model):
    """Every parameter whole, in a fixed order: sharded ones are gathered from their ranks."""
    out = []
    for name, p in sorted(model.named_parameters()):
        t = p.full_tensor() if isinstance(p, DTensor) else p
        out.append(t.detach().reshape(-1).cpu())
    return torch.cat(out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=("fsdp", "tp_dp", "ddp_fsdp"), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--device-per-rank", action="store_true",
                   help="require a device for each rank of the node and select cuda:LOCAL_RANK, as PyTorch's "
                   "examples do (by default LOCAL_RANK modulo the devices there are)")
    a = p.parse_args()
    local, world = int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"])
    if a.device_per_rank:
        needed = int(os.environ["LOCAL_WORLD_SIZE"])
        if torch.cuda.device_count() < needed:
            sys.exit(f"Unable to locate sufficient GPUs: {torch.cuda.device_count()} for {needed} ranks on this node")
    else:
        local %= torch.cuda.device_count()
    torch.cuda.set_device(local)
    device = torch.device("cuda", local)
    model = make_model(device)
    ddp_losses = None
    if a.style == "ddp_fsdp":
        dist.init_process_group("nccl", device_id=device)
        dp_mesh, dp_rank, dp_world = None, dist.get_rank(), world
        ddp = DistributedDataParallel(make_model(device), device_ids=[local])
        ddp_losses = torch.stack(train(ddp, slice(dp_rank * PER_RANK, (dp_rank + 1) * PER_RANK), device, dp_world))
        dist.all_reduce(ddp_losses)
        ddp_losses = (ddp_losses / dp_world).cpu()
        fully_shard(model)
    elif a.style == "fsdp":
        dist.init_process_group("nccl", device_id=device)
        dp_mesh, dp_rank, dp_world = None, dist.get_rank(), world
        fully_shard(model)
    else:
        tp = int(os.environ["LOCAL_WORLD_SIZE"])
        mesh = init_device_mesh("cuda", (world // tp, tp), mesh_dim_names=("dp", "tp"))
        parallelize_module(model, mesh["tp"], {"q": ColwiseParallel(), "k": ColwiseParallel(), "v": ColwiseParallel(),
                                               "o": RowwiseParallel(), "up": ColwiseParallel(),
                                               "down": RowwiseParallel()})
        dp_mesh, dp_rank, dp_world = mesh["dp"], mesh.get_local_rank("dp"), world // tp
        fully_shard(model, mesh=dp_mesh)
    rank = dist.get_rank()
    trained = torch.compile(model) if a.compile else model
    losses = torch.stack(train(trained, slice(dp_rank * PER_RANK, (dp_rank + 1) * PER_RANK), device, dp_world))
    # The loss over the whole batch is the mean of the data-parallel ranks' losses.
    dp_group = dp_mesh.get_group() if dp_mesh is not None else None
    dist.all_reduce(losses, group=dp_group)
    losses = (losses / dp_world).cpu()
    weights = full_weights(model)
    # Each rank's devices as PyTorch saw them: how many, the current one, and where the model is.
    params = next(model.parameters())
    placed = torch.tensor([torch.cuda.device_count(), torch.cuda.current_device(),
                           (params.to_local() if isinstance(params, DTensor) else params).device.index], device=device)
    everyone = torch.empty(world * 3, dtype=placed.dtype, device=device)
    dist.all_gather_into_tensor(everyone, placed)
    if rank == 0:
        reference = make_model("cpu")
        ref_losses = torch.stack(train(reference, slice(None), "cpu", dp_world))
        ref_weights = full_weights(reference)
        result = {"style": a.style, "world": world, "losses": losses.tolist(), "reference_losses": ref_losses.tolist(),
                  "losses_agree": torch.allclose(losses, ref_losses, rtol=1e-5, atol=1e-6),
                  "weights_agree": torch.allclose(weights, ref_weights, rtol=1e-5, atol=1e-6),
                  "max_weight_difference": (weights - ref_weights).abs().max().item(),
                  "devices": everyone.view(world, 3).tolist()}
        if ddp_losses is not None:
            result["ddp_losses_agree"] = torch.allclose(ddp_losses, ref_losses, rtol=1e-5, atol=1e-6)
        with open(a.out, "w") as f:
            json.dump(result, f)
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
