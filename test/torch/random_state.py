"""CUDA random numbers on fake GPUs follow the CUDA generator's state, as on a GPU: what programs
rely on, checked on every rank of a two-rank job. Prints one line per rank; exits 1 on a failure.

- torch.cuda.manual_seed makes draws reproducible, and a new seed changes them;
- torch.cuda.get_rng_state / set_rng_state (and torch.random.fork_rng) replay the same numbers,
  dropout masks and flash and memory-efficient attention's dropout included;
- a generator made for the device (torch.Generator("cuda")) has a stream of its own;
- drawing on the GPU leaves the CPU generator's sequence as it was (data made on the CPU);
- activation checkpointing recomputes dropout with the same mask: gradients match the plain run;
- DTensor's random ops give each shard its own numbers and every replica the same ones."""

import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.utils.checkpoint import checkpoint

failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


def seeded_draws():
    torch.cuda.manual_seed(7)
    a = torch.rand(1000, device="cuda")
    torch.cuda.manual_seed(7)
    b = torch.rand(1000, device="cuda")
    torch.cuda.manual_seed(8)
    c = torch.rand(1000, device="cuda")
    check("the same seed gives the same numbers", torch.equal(a, b))
    check("another seed gives other numbers", not torch.equal(a, c))
    check("successive draws differ", not torch.equal(b, torch.rand(1000, device="cuda")))


def state_replay():
    state = torch.cuda.get_rng_state()
    a = F.dropout(torch.ones(1000, device="cuda"), 0.5)
    b = torch.randn(10, device="cuda")
    torch.cuda.set_rng_state(state)
    check("set_rng_state replays dropout", torch.equal(a, F.dropout(torch.ones(1000, device="cuda"), 0.5)))
    check("set_rng_state replays randn", torch.equal(b, torch.randn(10, device="cuda")))
    q = torch.randn(2, 4, 16, 32, device="cuda", dtype=torch.bfloat16)  # flash attention, with dropout
    state = torch.cuda.get_rng_state()
    a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.3)
    torch.cuda.set_rng_state(state)
    check("set_rng_state replays attention dropout", torch.equal(a, F.scaled_dot_product_attention(q, q, q, dropout_p=0.3)))
    check("attention dropout draws afresh", not torch.equal(a, F.scaled_dot_product_attention(q, q, q, dropout_p=0.3)))
    q, mask = q.float(), torch.zeros(16, 16, device="cuda")  # memory-efficient attention, with dropout
    state = torch.cuda.get_rng_state()
    a = F.scaled_dot_product_attention(q, q, q, mask, 0.3)
    torch.cuda.set_rng_state(state)
    check("set_rng_state replays efficient attention's dropout",
          torch.equal(a, F.scaled_dot_product_attention(q, q, q, mask, 0.3)))
    with torch.random.fork_rng(devices=[torch.cuda.current_device()]):
        inside = torch.rand(5, device="cuda")
    check("fork_rng restores the state", torch.equal(inside, torch.rand(5, device="cuda")))


def own_generator():
    g = torch.Generator(device="cuda").manual_seed(3)
    a = torch.randn(100, device="cuda", generator=g)
    torch.rand(100, device="cuda")  # the default generator moves, g does not
    g.manual_seed(3)
    check("a device generator replays its own stream", torch.equal(a, torch.randn(100, device="cuda", generator=g)))


def cpu_sequence_untouched():
    torch.manual_seed(0)
    want = torch.randn(20)
    torch.manual_seed(0)
    torch.rand(1000, device="cuda")
    F.dropout(torch.ones(100, device="cuda"), 0.3)
    check("GPU draws leave the CPU generator's sequence alone", torch.equal(want, torch.randn(20)))


def checkpointed_dropout():
    lin = torch.nn.Linear(64, 64).cuda()
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    layer = lambda t: F.dropout(torch.relu(lin(t)), 0.5)
    state = torch.cuda.get_rng_state()
    layer(x).sum().backward()
    plain = x.grad.clone()
    x.grad = None
    torch.cuda.set_rng_state(state)
    checkpoint(layer, x, use_reentrant=False).sum().backward()
    check("checkpointing recomputes the same dropout mask", torch.equal(plain, x.grad))


def dtensor_random():
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    torch.manual_seed(0)  # DTensor's random ops take their seed from rank 0
    sharded = distribute_tensor(torch.empty(4 * dist.get_world_size(), 64, device="cuda"), mesh, [Shard(0)])
    torch.nn.init.normal_(sharded)
    full = sharded.full_tensor()
    check("every shard of a random DTensor has its own numbers", not torch.equal(full[:4], full[4:8]))
    replicated = distribute_tensor(torch.empty(64, device="cuda"), mesh, [Replicate()])
    torch.nn.init.uniform_(replicated)
    everyone = [torch.empty(64, device="cuda") for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, replicated.to_local())
    check("a replicated random DTensor is the same on every rank", all(torch.equal(e, everyone[0]) for e in everyone))


def main():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    for case in (seeded_draws, state_replay, own_generator, cpu_sequence_untouched, checkpointed_dropout,
                 dtensor_random):
        case()
    rank = dist.get_rank()
    dist.destroy_process_group()
    print(f"rank {rank}: " + ("random state as on a GPU" if not failures else "FAILED: " + "; ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
