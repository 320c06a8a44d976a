"""A model far larger than it need be costs no host memory while nothing writes its weights: 8
layers of 16384 x 16384 built on the meta device, moved to the fake GPU with to_empty, and
trained one step with FAKEGPU_TORCH_COMPUTE=shapes. Prints the device memory allocated and how
much the process's resident memory grew, both in MiB, as JSON."""

import json

import torch


def resident_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main():
    with torch.device("meta"):
        model = torch.nn.Sequential(*[torch.nn.Linear(16384, 16384) for _ in range(8)])  # 8 GiB of fp32
    before = resident_mib()
    model.to_empty(device="cuda")
    model(torch.randn(64, 16384, device="cuda")).sum().backward()  # the gradients: 8 GiB more
    torch.cuda.synchronize()
    print(json.dumps({"allocated_mib": torch.cuda.memory_allocated() / 2**20, "resident_growth_mib": resident_mib() - before}))


if __name__ == "__main__":
    main()
