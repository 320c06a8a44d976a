"""Control values in shapes mode (FAKEGPU_TORCH_COMPUTE=shapes): what a program computes on the
GPU from data it copied in (positions, lengths, arange, objects it exchanges) is computed for real,
an init's rejection loop over values nobody computed ends, those values read as zero on every rank,
and an assertion on one stops with a message naming where it came from. Prints what it saw as JSON
(rank 0)."""

import json

import torch
import torch.distributed as dist


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

    torch.cuda.synchronize()
    dist.destroy_process_group()
    if rank == 0:
        print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main()
