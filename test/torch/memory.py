"""GPU memory as each rank sees it, for checking fakegpu's report against the ranks' own figures.
--case ddp / fsdp: three training steps of a small MLP under DDP or FSDP2; each rank writes, to
--out/rank<N>.json, PyTorch's peaks and what torch.cuda.mem_get_info says after the steps.
--case oom: rank 1 asks for more memory than its GPU has in the second step; the others wait for it
in an all-reduce.
--case meta: one rank builds a 21 B-parameter model (43 GB in bf16, more than this machine's memory)
on the meta device, moves it with to_empty and runs a forward pass: run it in shapes mode
(FAKEGPU_TORCH_COMPUTE=shapes), where nothing is written; it also writes the host's peak RSS.
--case conv: one rank's bf16 convolution forward in NCHW and in channels_last, and for each what
the allocator's peak rose by over what was allocated before it (cuDNN's workspace on a GPU)."""

import argparse
import json
import os
import resource
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn


def model(device):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 2048), nn.GELU(),
                         nn.Linear(2048, 512)).to(device)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--case", choices=("ddp", "fsdp", "oom", "meta", "conv"), required=True)
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.case == "meta":
        return meta_model(a.out)
    if a.case == "conv":
        return convolutions(a.out)
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    rank = dist.get_rank()
    net = model(device)
    if a.case == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for layer in net:
            if isinstance(layer, nn.Linear):
                fully_shard(layer)
        fully_shard(net)
    else:
        net = nn.parallel.DistributedDataParallel(net, device_ids=[local])
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    for step in range(3):
        x = torch.randn(64, 512, device=device)
        loss = net(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.case == "oom" and step == 1:
            if rank == 1:
                torch.empty(100 << 30, dtype=torch.uint8, device=device)
            dist.all_reduce(torch.ones(1, device=device))
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    figures = {"max_reserved": torch.cuda.max_memory_reserved(), "max_allocated": torch.cuda.max_memory_allocated(),
               "reserved": torch.cuda.memory_reserved(), "in_use": total - free, "capacity": total}
    if a.out:
        (a.out / f"rank{rank}.json").write_text(json.dumps(figures))
    dist.destroy_process_group()


def meta_model(out):
    with torch.device("meta"):
        net = nn.Sequential(*[nn.Linear(16384, 16384, bias=False) for _ in range(80)]).to(torch.bfloat16)
    net = net.to_empty(device="cuda")
    with torch.inference_mode():
        net(torch.randn(8, 16384, device="cuda", dtype=torch.bfloat16))
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    figures = {"params": sum(p.numel() for p in net.parameters()), "max_reserved": torch.cuda.max_memory_reserved(),
               "max_allocated": torch.cuda.max_memory_allocated(), "in_use": total - free,
               "host_max_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    (out / "rank0.json").write_text(json.dumps(figures))


def convolutions(out):
    conv = nn.Conv2d(64, 64, 3, padding=1, bias=False).to("cuda", torch.bfloat16)
    figures = {"weight": conv.weight.numel() * 2}
    for layout in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(8, 64, 56, 56, device="cuda", dtype=torch.bfloat16).to(memory_format=layout)
        conv = conv.to(memory_format=layout)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        with torch.no_grad():
            y = conv(x)
        name = "nchw" if layout == torch.contiguous_format else "nhwc"
        figures[name] = {"input": x.numel() * 2, "output": y.numel() * 2,
                         "peak_rise": torch.cuda.max_memory_allocated() - before}
    (out / "rank0.json").write_text(json.dumps(figures))


if __name__ == "__main__":
    main()
