"""Measured kernel times (fgpu --measure-kernels, --kernel-times) under fgpu.

--part train: a small DDP job (an MLP with layer norm, attention and AdamW, 4 steps) on as many
ranks as fgpu starts; rank 0 writes its losses to --out.
--part carry: one product priced through the runtime's table at a measured time, carried from
the GPUs named, on the current device; writes what each call cost to --out."""

import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F


def train(out):
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.LayerNorm(256),
                                torch.nn.Linear(256, 128)).cuda()
    model = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1 + rank)
    losses = []
    for _ in range(4):
        x = torch.randn(32, 128, generator=generator).cuda()
        q = x.view(2, 4, 4, 128).to(torch.bfloat16)
        attended = F.scaled_dot_product_attention(q, q, q, is_causal=True).reshape(32, 128).float()
        loss = (model(x) + attended).square().mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"losses": losses}, f)
    dist.destroy_process_group()


def carry(out, profiles):
    from fakegpu.torch_hook import cost, kernels

    runtime = kernels.runtime()
    stream = torch.cuda.current_stream().cuda_stream
    a = torch.empty(1024, 1024, device="cuda", dtype=torch.bfloat16)
    facts = cost.op_facts("aten::mm", (a, a), torch.empty_like(a))
    figures = {"model": runtime.record(stream, facts, "carry").gpu_us,
               "unscaled": runtime.record_measured(stream, facts, "carry", 100.0, None).gpu_us}
    for profile in profiles:
        figures[profile] = runtime.record_measured(stream, facts, "carry", 100.0, profile).gpu_us
    try:
        runtime.record_measured(stream, facts, "carry", 100.0, "no-such-gpu")
        figures["unknown"] = "accepted"
    except RuntimeError as e:
        figures["unknown"] = str(e)
    with open(out, "w") as f:
        json.dump(figures, f)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--part", choices=("train", "carry"), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--profiles", default="", help="carry: GPU profiles to carry a measured time from")
    args = parser.parse_args()
    if args.part == "train":
        train(args.out)
    else:
        carry(args.out, [p for p in args.profiles.split(",") if p])


if __name__ == "__main__":
    main()
