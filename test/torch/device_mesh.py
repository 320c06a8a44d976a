"""The seeds' TP x DP layout as a 2-D DeviceMesh: data-parallel across the nodes, tensor-parallel
within each node. Collectives on each dimension are checked element by element on host-filled
tensors. Run under fgpu with a cluster of DP nodes of TP GPUs each; every rank prints one line."""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh


def expect(name, got, want):
    got = got.cpu()
    if not torch.equal(got, torch.as_tensor(want, dtype=got.dtype)):
        raise AssertionError(f"rank {dist.get_rank()}: {name}: got {got.tolist()}, want {want}")


def main():
    # Modulo the device count: in hybrid mode ranks may share fewer real GPUs.
    local = int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count()
    tp = int(os.environ["LOCAL_WORLD_SIZE"])
    world = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(local)
    mesh = init_device_mesh("cuda", (world // tp, tp), mesh_dim_names=("dp", "tp"))
    rank = dist.get_rank()
    dp_rank, tp_rank = mesh.get_local_rank("dp"), mesh.get_local_rank("tp")
    if (dp_rank, tp_rank) != (rank // tp, rank % tp):
        raise AssertionError(f"rank {rank}: mesh coordinates {(dp_rank, tp_rank)}")

    # Tensor-parallel: the ranks of one node.
    t = torch.tensor([float(rank), 1.0]).cuda()
    dist.all_reduce(t, group=mesh.get_group("tp"))
    node = range(dp_rank * tp, dp_rank * tp + tp)
    expect("tp all_reduce", t, [float(sum(node)), float(tp)])
    shards = torch.zeros(tp).cuda()
    dist.all_gather_into_tensor(shards, torch.tensor([float(rank)]).cuda(), group=mesh.get_group("tp"))
    expect("tp all_gather", shards, [float(r) for r in node])

    # Data-parallel: the same local rank on every node.
    t = torch.tensor([float(rank)]).cuda()
    dist.all_reduce(t, group=mesh.get_group("dp"))
    expect("dp all_reduce", t, [float(sum(range(tp_rank, world, tp)))])
    torch.cuda.synchronize()
    print(f"rank {rank}: dp {dp_rank} tp {tp_rank} on {os.environ.get('FAKEGPU_HOSTNAME')}: mesh collectives exact",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
