"""ProcessGroupNCCL's collectives under fgpu, each result checked element by element. Tensors
are filled on the host and copied to the device, so every value on the device is real whatever
fakegpu computes there. Run as a rank of `fgpu --nproc N` (N even, at least 4)."""

import os

import torch
import torch.distributed as dist


def on_device(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype).cuda()


def expect(name, got, want):
    got = got.cpu()
    want = torch.as_tensor(want, dtype=got.dtype)
    if not torch.equal(got, want):
        raise AssertionError(f"rank {dist.get_rank()}: {name}: got {got.tolist()}, want {want.tolist()}")


def main():
    # Modulo the device count: in hybrid mode ranks may share fewer real GPUs.
    local = int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))  # split_group needs it
    rank, world = dist.get_rank(), dist.get_world_size()
    base = [float(rank * 10 + i) for i in range(4)]
    ranks = range(world)

    t = on_device(base)
    dist.all_reduce(t)
    expect("all_reduce sum", t, [sum(r * 10 + i for r in ranks) for i in range(4)])
    t = on_device(base)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    expect("all_reduce max", t, [(world - 1) * 10 + i for i in range(4)])
    t = on_device(base)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    expect("all_reduce avg", t, [sum(r * 10 + i for r in ranks) / world for i in range(4)])
    t = on_device(base)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    expect("all_reduce premul_sum", t, [sum(r * 10 + i for r in ranks) * 0.5 for i in range(4)])
    t = on_device([rank] * 3, torch.int64)
    dist.all_reduce(t)
    expect("all_reduce int64", t, [sum(ranks)] * 3)

    t = on_device(base)
    dist.broadcast(t, src=1)
    expect("broadcast", t, [10.0 + i for i in range(4)])
    t = on_device(base)
    dist.reduce(t, dst=2)
    if rank == 2:
        expect("reduce", t, [sum(r * 10 + i for r in ranks) for i in range(4)])

    out = torch.zeros(world * 4).cuda()
    dist.all_gather_into_tensor(out, on_device(base))
    expect("all_gather_into_tensor", out, [r * 10.0 + i for r in ranks for i in range(4)])
    gathered = [torch.zeros(4).cuda() for _ in ranks]
    dist.all_gather(gathered, on_device(base))
    for r in ranks:
        expect(f"all_gather[{r}]", gathered[r], [r * 10.0 + i for i in range(4)])

    inp = on_device([float(rank * 100 + j) for j in range(world * 2)])
    out = torch.zeros(2).cuda()
    dist.reduce_scatter_tensor(out, inp)
    expect("reduce_scatter_tensor", out, [sum(r * 100 + rank * 2 + j for r in ranks) for j in range(2)])

    inp = on_device([float(rank * 100 + j) for j in range(world)])
    out = torch.zeros(world).cuda()
    dist.all_to_all_single(out, inp)
    expect("all_to_all_single", out, [float(r * 100 + rank) for r in ranks])

    # Pairs (0,1), (2,3), ...: even ranks send first.
    peer = rank ^ 1
    if rank % 2 == 0:
        dist.send(on_device(base), dst=peer)
        got = torch.zeros(4).cuda()
        dist.recv(got, src=peer)
    else:
        got = torch.zeros(4).cuda()
        dist.recv(got, src=peer)
        dist.send(on_device(base), dst=peer)
    expect("send/recv", got, [peer * 10.0 + i for i in range(4)])

    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(4).cuda()
    ops = [dist.P2POp(dist.isend, on_device(base), right), dist.P2POp(dist.irecv, got, left)]
    for work in dist.batch_isend_irecv(ops):
        work.wait()
    expect("batch_isend_irecv", got, [left * 10.0 + i for i in range(4)])

    dist.barrier()

    evens = dist.new_group([r for r in ranks if r % 2 == 0])
    t = on_device(base)
    if rank % 2 == 0:
        dist.all_reduce(t, group=evens)
        expect("new_group all_reduce", t, [sum(r * 10 + i for r in ranks if r % 2 == 0) for i in range(4)])

    half = world // 2
    split = dist.split_group(split_ranks=[list(range(half)), list(range(half, world))])
    t = on_device(base)
    dist.all_reduce(t, group=split)
    mine = range(half) if rank < half else range(half, world)
    expect("split_group all_reduce", t, [sum(r * 10 + i for r in mine) for i in range(4)])

    torch.cuda.synchronize()
    print(f"rank {rank}/{world}: collectives exact", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
