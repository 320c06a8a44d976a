"""Predicts the training step of GPT-2 small (124M parameters) under DDP on the cluster fgpu
simulates, as llm.c's public GPT-2 replication trains it: 524,288 tokens per step (sequences of
1024), bf16 autocast, AdamW. Written in plain PyTorch, run unchanged under fgpu; with
FAKEGPU_TORCH_COMPUTE=shapes only shapes and modeled time are computed, so it takes under a
minute on two cores rather than hours (docs/pytorch.md compares the prediction with the same
script on an H100).

  FAKEGPU_TORCH_COMPUTE=shapes ./fgpu --cluster-config configs/presets/dgx-h100-1node.yaml \\
    --nproc 8 build/torch-venv/bin/python verification/predict/gpt2_ddp.py

Rank 0 prints the time of one optimizer step (modeled under fgpu, measured on a GPU) and the
tokens per second it implies."""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

CONTEXT, DIM, LAYERS, HEADS = 1024, 768, 12, 12
TOKENS_PER_STEP = 524288


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(DIM), torch.nn.LayerNorm(DIM)
        self.qkv, self.proj = torch.nn.Linear(DIM, 3 * DIM), torch.nn.Linear(DIM, DIM)
        self.up, self.down = torch.nn.Linear(DIM, 4 * DIM), torch.nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, HEADS, DIM // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, DIM))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.tokens, self.positions = torch.nn.Embedding(vocab, DIM), torch.nn.Embedding(CONTEXT, DIM)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = torch.nn.LayerNorm(DIM)
        self.head = torch.nn.Linear(DIM, vocab, bias=False)
        self.head.weight = self.tokens.weight  # tied, as in GPT-2

    def forward(self, idx, targets):
        x = self.tokens(idx) + self.positions(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--micro-batch", type=int, default=16, help="sequences per rank per forward pass")
    p.add_argument("--vocab", type=int, default=50257,
                   help="vocabulary size: GPT-2's 50257, or 50304 padded to a multiple of 64 as llm.c does")
    a = p.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    world = dist.get_world_size()
    accumulate = TOKENS_PER_STEP // (world * a.micro_batch * CONTEXT)
    model = torch.nn.parallel.DistributedDataParallel(GPT(a.vocab).cuda(), device_ids=[local])
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=False)
    idx = torch.randint(0, a.vocab, (a.micro_batch, CONTEXT)).cuda()

    def step():
        for micro in range(accumulate):
            sync = micro == accumulate - 1
            with model.no_sync() if not sync else torch.enable_grad():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(idx, idx) / accumulate
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # the first step also builds DDP's buckets and the optimizer's state
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    if dist.get_rank() == 0:
        parameters = sum(p.numel() for p in model.parameters())
        print(f"GPT-2 {parameters / 1e6:.0f}M, {world} GPUs x {accumulate} micro-batches of {a.micro_batch} x {CONTEXT}: "
              f"step {ms:.1f} ms, {TOKENS_PER_STEP / ms * 1e3 / 1e6:.2f} M tokens/s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
