"""A loop of operators too small to keep a GPU busy, timed with CUDA events: the host's modeled
time to launch them, as on a GPU. Run as one rank under fgpu; prints {"rank": r, "us": t} per rank."""

import json
import os

import torch


def main():
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    x = torch.ones(16, device="cuda")
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(100):
        x.add_(1)
    end.record()
    end.synchronize()
    print(json.dumps({"rank": int(os.environ["RANK"]), "us": start.elapsed_time(end) * 1000}), flush=True)


if __name__ == "__main__":
    main()
