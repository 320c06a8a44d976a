"""What torch.cuda reports on fake GPUs: the rank's node in the cluster YAML (NVML agreeing), its memory
accounting, out-of-memory, streams and events with modeled time, and matrix products on the
device against the CPU. Run as a rank of `fgpu --cluster-config configs/cluster_valid.yaml
--nproc 4` (node0: two A100-80GB, node1: two H100-SXM); prints one line per rank."""

import os

import torch
import torch.distributed as dist

# The profiles of configs/cluster_valid.yaml's nodes (common/cluster/gpu_profiles.cpp): name, compute
# capability, SMs, MiB, FP32, TF32 and BF16 TFLOP/s, memory GB/s.
A100 = ("NVIDIA A100-SXM4-80GB", (8, 0), 108, 81920, 19.5, 156, 312, 2.0 * 1593 * 5120 / 8 / 1000)
H100 = ("NVIDIA H100 80GB HBM3", (9, 0), 132, 81559, 67.0, 494.5, 989.5, 2.0 * 2619 * 5120 / 8 / 1000)
# The share of the memory bandwidth the kernel model gives large memory-bound kernels
# (common/cluster/gpu_rates.cpp).
MEMORY_SHARE = 0.9


def rss_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) >> 10


def check(what, ok):
    if not ok:
        raise AssertionError(f"rank {os.environ['RANK']}: {what}")


def elapsed_us(run):
    """Modeled microseconds of run(), from a GPU that has caught up with the host."""
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000


def check_modeled_operators(capability, fp32_tflops, memory_gbs):
    """Computed operators take their modeled time (planner/kernel_model.cpp): the host launches each,
    then its kernels run on the node's GPU. A tiny operator of the same kind measures the launch
    and a kernel's fixed cost; what a large one takes beyond that is its work on that GPU."""
    tiny, big = torch.ones(4, device="cuda"), torch.empty(16 << 20, device="cuda")
    floor = elapsed_us(lambda: tiny.mul_(2))
    check(f"a tiny operator took {floor} us, not a launch", 2 < floor < 40)
    # Memory-bound: read and write each of 64 MiB (beyond L2) at the bandwidth's share.
    got, want = elapsed_us(lambda: big.mul_(2)) - floor, 2 * big.numel() * 4 / (memory_gbs * MEMORY_SHARE * 1e3)
    check(f"modeled mul_ of 64 MiB: {got} us beyond a tiny one, expected {want}", abs(got - want) <= 0.01 * want)

    small, square = torch.randn(8, 8, device="cuda"), torch.randn(2048, 2048, device="cuda")
    product_floor = elapsed_us(lambda: small @ small)
    rate = 2 * 2048**3 / (elapsed_us(lambda: square @ square) - product_floor) / 1e6  # TFLOP/s
    check(f"an fp32 product of 2048^3 at {rate} TFLOP/s, not 60-85% of the FP32 peak",
          0.6 * fp32_tflops < rate < 0.85 * fp32_tflops)

    def tf32_product():
        # PyTorch's newer per-backend setting; the older allow_tf32 then refuses to be read.
        torch.backends.cuda.matmul.fp32_precision = "tf32"
        square @ square
        torch.backends.cuda.matmul.fp32_precision = "ieee"

    rate = 2 * 2048**3 / (elapsed_us(tf32_product) - product_floor) / 1e6
    check(f"a product with fp32_precision tf32 at {rate} TFLOP/s, not on TF32 tensor cores", rate > 2 * fp32_tflops)

    # bf16 products whose rows are not 16-byte aligned run slower on Hopper (TMA), at the full rate on Ampere:
    # 2047 columns (2-byte rows), also when a transposed view reads them.
    bf16 = dict(dtype=torch.bfloat16, device="cuda")
    left, aligned, odd = torch.randn(512, 2048, **bf16), torch.randn(2048, 2048, **bf16), torch.randn(2048, 2047, **bf16)
    small_half = small.bfloat16()
    half_floor = elapsed_us(lambda: small_half @ small_half)
    base = elapsed_us(lambda: left @ aligned) - half_floor
    for what, run in (("2047 columns", lambda: left @ odd), ("a transposed 2047-column matrix", lambda: odd.t() @ left.t())):
        slowdown = (elapsed_us(run) - half_floor) / base
        if capability >= (9, 0):
            check(f"bf16 product of {what}: {slowdown:.2f} x the aligned one's time on Hopper", slowdown > 2)
        else:
            check(f"bf16 product of {what}: {slowdown:.2f} x the aligned one's time on Ampere", slowdown < 1.1)


def main():
    rank, local = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    name, capability, sms, mib, fp32_tflops, _, _, memory_gbs = A100 if rank < 2 else H100
    check(f"device_count {torch.cuda.device_count()} != 2", torch.cuda.device_count() == 2)
    # NVML (fakegpu's libnvidia-ml.so.1) names the same devices as the runtime.
    check(f"NVML's device count {torch.cuda._device_count_nvml()}", torch.cuda._device_count_nvml() == 2)
    uuids = [f"GPU-{torch.cuda.get_device_properties(i).uuid}" for i in range(2)]
    check(f"NVML's UUIDs {torch.cuda._raw_device_uuid_nvml()} != {uuids}", torch.cuda._raw_device_uuid_nvml() == uuids)
    torch.cuda.set_device(local)
    props = torch.cuda.get_device_properties(local)
    check(f"name {torch.cuda.get_device_name()!r} != {name!r}", torch.cuda.get_device_name() == name)
    check(f"capability {torch.cuda.get_device_capability()} != {capability}", torch.cuda.get_device_capability() == capability)
    check(f"SM count {props.multi_processor_count} != {sms}", props.multi_processor_count == sms)
    check(f"total memory {props.total_memory} != {mib} MiB", props.total_memory == mib << 20)

    free0, total = torch.cuda.mem_get_info()
    check(f"mem_get_info total {total}", total == mib << 20)
    block = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    free1, _ = torch.cuda.mem_get_info()
    check(f"free memory did not drop by the allocation ({free0} -> {free1})", free0 - free1 >= 256 << 20)
    check(f"max_memory_allocated {torch.cuda.max_memory_allocated()}", torch.cuda.max_memory_allocated() >= 256 << 20)
    del block
    # Device memory nobody writes costs no host memory: a model's weights allocated on the
    # device and never initialised (meta-device init, then to_empty) take address space only.
    before = rss_mib()
    huge = torch.empty(8 << 30, dtype=torch.uint8, device="cuda")
    check(f"an untouched 8 GiB allocation grew the resident set by {rss_mib() - before} MiB", rss_mib() - before < 64)
    del huge
    try:
        torch.empty((mib + 1024) << 20, dtype=torch.uint8, device="cuda")
        raise AssertionError(f"rank {rank}: allocating more than the GPU's {mib} MiB succeeded")
    except torch.cuda.OutOfMemoryError:
        pass

    # Host data through the device and back, on a side stream ordered by an event.
    side = torch.cuda.Stream()
    host = torch.arange(1 << 16, dtype=torch.float32)
    with torch.cuda.stream(side):
        dev = host.to("cuda", non_blocking=True)
        done = torch.cuda.Event()
        done.record()
    torch.cuda.current_stream().wait_event(done)
    check("round trip through a side stream changed the data", torch.equal(dev.cpu(), host))

    # cuBLAS products on the device (fakegpu's cuBLAS computes them) against the CPU.
    a = torch.randn(33, 17, dtype=torch.float64)
    b = torch.randn(17, 9, dtype=torch.float64)
    check("float64 matmul", torch.allclose((a.cuda() @ b.cuda()).cpu(), a @ b, rtol=1e-12, atol=1e-12))
    lin = torch.nn.Linear(17, 9)
    x = a.float()
    check("nn.Linear (cuBLASLt with bias)", torch.allclose(lin.cuda()(x.cuda()).cpu(), lin.cpu()(x), rtol=1e-5, atol=1e-5))
    ab = torch.randn(4, 8, 5)
    bb = torch.randn(4, 5, 3)
    check("batched matmul", torch.allclose(torch.bmm(ab.cuda(), bb.cuda()).cpu(), torch.bmm(ab, bb), rtol=1e-5, atol=1e-5))

    if os.environ.get("FAKEGPU_TORCH_COMPUTE", "1") != "0" and local == 0:  # once per node: products cost CPU time
        check_modeled_operators(capability, fp32_tflops, memory_gbs)

    # Event timing is modeled: an all-reduce of 64 MiB takes the time the cluster model gives it.
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    payload = torch.ones(16 << 20).cuda()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    dist.all_reduce(payload)
    end.record()
    torch.cuda.synchronize()
    elapsed = start.elapsed_time(end)
    check(f"modeled all-reduce time {elapsed} ms is not positive", elapsed > 0)
    check("all-reduce of ones", torch.equal(payload[:8].cpu(), torch.full((8,), 4.0)))
    dist.destroy_process_group()
    print(f"rank {rank}: {name}, modeled 64 MiB all-reduce {elapsed:.3f} ms", flush=True)


if __name__ == "__main__":
    main()
