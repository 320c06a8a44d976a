"""Context parallelism (torch.distributed.tensor.experimental.context_parallel) on fake GPUs: the
ranks split the sequence of query, key and value, and PyTorch's ring attention passes key and
value blocks around the ranks, merging each block's partial result through the log-sum-exps the
attention kernels return. Its output and gradients, gathered back, must match attention over the
whole sequence computed on one rank: causal and not, through flash attention (bf16) and
memory-efficient attention (fp32), forward and backward. Run with torchrun under fgpu; each rank
prints one line, or exits 1 naming what differs."""

import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.experimental import context_parallel
from torch.distributed.tensor.experimental._attention import _cp_options, context_parallel_unshard
from torch.nn.attention import SDPBackend, sdpa_kernel

# (kernel, dtype, tolerance): bf16 results agree to bf16's rounding, fp32 ones to fp32's.
KERNELS = [(SDPBackend.FLASH_ATTENTION, torch.bfloat16, 2e-2), (SDPBackend.EFFICIENT_ATTENTION, torch.float32, 1e-5)]
LENGTH = 256  # split in 2 x world chunks for causal load balancing; each a multiple of 32


def attention(backend, q, k, v, is_causal):
    """Output and gradients of query, key and value for a loss that weighs every output."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    (out * torch.linspace(-1, 1, out.shape[-1], device=out.device, dtype=out.dtype)).sum().backward()
    return [out.detach(), q.grad, k.grad, v.grad]


def main():
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    mesh = init_device_mesh("cuda", (dist.get_world_size(),))
    bad = []
    for backend, dtype, tolerance in KERNELS:
        for is_causal in (True, False):
            torch.manual_seed(0)  # the same inputs on every rank
            inputs = [torch.randn(2, 4, LENGTH, 32, device="cuda", dtype=dtype) for _ in range(3)]
            whole = attention(backend, *inputs, is_causal)
            buffers = [t.clone() for t in inputs]
            _cp_options.enable_load_balance = is_causal  # balancing the causal mask's work needs the mask
            with context_parallel(mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2]):
                shards = attention(backend, *buffers, is_causal)
                gathered = context_parallel_unshard(mesh, shards, [2] * 4)
            for name, got, want in zip(("output", "query gradient", "key gradient", "value gradient"), gathered, whole):
                if not torch.allclose(got.float(), want.float(), rtol=tolerance, atol=tolerance):
                    difference = (got.float() - want.float()).abs().max().item()
                    bad.append(f"{backend.name} {'causal ' if is_causal else ''}{name} (off by {difference:.3g})")
    dist.destroy_process_group()
    if bad:
        print(f"rank {rank}: context parallel attention differs from whole-sequence attention: {', '.join(bad)}",
              flush=True)
        sys.exit(1)
    print(f"rank {rank}: context parallel attention matches whole-sequence attention", flush=True)


if __name__ == "__main__":
    main()
