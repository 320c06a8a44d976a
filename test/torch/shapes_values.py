"""Control values in shapes mode (FAKEGPU_TORCH_COMPUTE=shapes): what a program computes on the
GPU from data it copied in (positions, lengths, arange, objects it exchanges) is computed for real,
an init's rejection loop over values nobody computed ends, those values read as zero on every rank,
an assertion on one stops with a message naming where it came from, and operators that return
nothing stay on the meta device. Prints what it saw as JSON (rank 0)."""

import json

import torch
import torch.distributed as dist

from untouched_weights import resident_mib


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank)
    seen = {}

    positions = torch.arange(128).repeat(2, 1).to("cuda")
    torch._assert_async(torch.all(positions <= 127), "positions in range")
    seen["offsets"] = torch.cumsum(torch.tensor([3, 5, 2], device="cuda"), 0).tolist()
    seen["arange_sum"] = torch.arange(10, device="cuda").sum().item()
    seen["scaled"] = (torch.tensor([1.0, 2.0], device="cuda") * 3).tolist()

    # Objects of different sizes: the all-gathered sizes must be compared for real.
    objects = [None] * dist.get_world_size()
    dist.all_gather_object(objects, {"rank": rank, "pad": "x" * (300 * rank)})
    seen["objects"] = [(o["rank"], len(o["pad"])) for o in objects]

    # trunc_normal_ draws until no value is out of bounds, asking mask.any() each time.
    weight = torch.empty(64, 64, device="cuda")
    torch.nn.init.trunc_normal_(weight)

    draws = torch.randn(512, 1024, device="cuda")  # 2 MiB of random numbers, not drawn
    seen["uncomputed_sum"] = draws.sum().item()
    flag = (draws.abs().max() > 1e9).to(torch.int32)
    dist.all_reduce(flag)
    seen["all_reduced_flag"] = flag.item()
    try:
        torch._assert_async(draws.sum() > 0, "sum positive")
        seen["assertion"] = None
    except RuntimeError as e:
        seen["assertion"] = str(e)

    # Operators that return nothing run on the meta device as well: FSDP2's copy-out and copy-in
    # (split_with_sizes_copy, _foreach_copy_) over 512 MiB and a fused AdamW step over 256 MiB of
    # parameters write no host memory.
    before = resident_mib()
    flat = torch.empty(128 << 20, device="cuda")
    parts = [torch.empty(64 << 20, device="cuda") for _ in range(2)]
    torch.ops.aten.split_with_sizes_copy.out(flat, [64 << 20, 64 << 20], 0, out=parts)
    torch._foreach_copy_(parts, [torch.empty_like(p) for p in parts])
    weights = [torch.nn.Parameter(torch.empty(32 << 20, device="cuda")) for _ in range(2)]
    for w in weights:
        w.grad = torch.empty_like(w)
    torch.optim.AdamW(weights, fused=True).step()
    torch.cuda.synchronize()
    seen["void_operators_growth_mib"] = resident_mib() - before

    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main()
