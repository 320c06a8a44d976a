"""CUDA graphs of PyTorch operators on a fake GPU, as PyTorch's documentation captures them: a
whole training step (forward, backward, a capturable Adam) warmed up on a side stream, captured
once and replayed on new data must train exactly as the same steps run eagerly; flash and
memory-efficient attention replay on new inputs; random operators draw afresh at each replay, as
the same operators run eagerly from the same generator state; a replay uses the memory its
operators had at capture, though their tensors' storage was freed since; an all-reduce captured between
operators sums each replay's data across the ranks; a replay takes modeled time, the same each
time; and an operator whose result's shape depends on its data cannot be captured, and says so.
Run under fgpu with two ranks or more; each prints one line, or raises naming what differs."""

import os

import torch
import torch.distributed as dist
import torch.nn.functional as F


def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 4)).cuda()


def step(model, opt, x, y):
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


def replay_ms(graph):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model, eager = make(), make()
    opt, eager_opt = (torch.optim.Adam(m.parameters(), lr=0.01, capturable=True) for m in (model, eager))
    static_x, static_y = torch.randn(8, 16, device="cuda"), torch.randn(8, 4, device="cuda")
    # Warm-up on a side stream creates the optimizer's state, as capture requires; both models
    # take the same steps.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            for m, o in ((model, opt), (eager, eager_opt)):
                o.zero_grad(set_to_none=True)
                step(m, o, static_x, static_y)
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step(model, opt, static_x, static_y)

    bad = []
    data = torch.Generator().manual_seed(3)
    for i in range(4):
        x, y = torch.randn(8, 16, generator=data).cuda(), torch.randn(8, 4, generator=data).cuda()
        static_x.copy_(x)
        static_y.copy_(y)
        graph.replay()
        eager_opt.zero_grad(set_to_none=True)
        loss = step(eager, eager_opt, x, y)
        if not torch.equal(static_loss, loss):
            bad.append(f"loss of replay {i}: {static_loss.item()} against {loss.item()}")
    if not all(torch.equal(a, b) for a, b in zip(model.parameters(), eager.parameters())):
        bad.append("weights after the replays")

    # bf16 without a mask runs flash attention; fp32 with a mask, memory-efficient attention.
    for kind, dtype, mask in [("flash", torch.bfloat16, None), ("efficient", torch.float32, torch.randn(8, 8))]:
        q = torch.randn(2, 4, 8, 16, device="cuda", dtype=dtype)
        mask = mask if mask is None else mask.cuda()
        attention = torch.cuda.CUDAGraph()
        with torch.cuda.graph(attention):
            out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        q.copy_(torch.randn_like(q))
        attention.replay()
        if not torch.equal(out, F.scaled_dot_product_attention(q, q, q, attn_mask=mask)):
            bad.append(f"{kind} attention replayed on new inputs")

    # Random operators draw at every replay from the CUDA generator's state then, and move it on,
    # as the same operators run eagerly do: dropout, and attention's dropout (whose backward drops
    # the weights its forward dropped).
    x = torch.ones(64, 64, device="cuda", requires_grad=True)
    mask = torch.zeros(64, 64, device="cuda")

    def random_step():
        kept = F.dropout(x, 0.5)
        attended = F.scaled_dot_product_attention(x[None, None], x[None, None], x[None, None], mask, 0.5)
        (kept.sum() + attended.sum()).backward()
        return kept, attended

    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up, as graphs of autograd need
        random_step()
    torch.cuda.current_stream().wait_stream(side)
    x.grad = None
    dropout = torch.cuda.CUDAGraph()
    with torch.cuda.graph(dropout):
        kept, attended = random_step()
    replays = []
    for seed in (5, None, 6):
        if seed is not None:
            torch.cuda.manual_seed(seed)
        dropout.replay()
        replays.append([kept.clone(), attended.clone(), x.grad.clone()])
    torch.cuda.manual_seed(5)
    x.grad = None
    eager = list(random_step()) + [x.grad]
    if not all(torch.equal(a, b) for a, b in zip(replays[0], eager)):
        bad.append("random operators replayed against the same run eagerly from the same seed")
    for i in (1, 2):
        if any(torch.equal(a, b) for a, b in zip(replays[0], replays[i])):
            bad.append(f"random operators of replay {i}, which must draw afresh")

    # A replay works in the memory its operators had at capture, as a graph's kernels do, though
    # the tensor objects have moved on: FSDP2 frees an unsharded parameter's storage after use
    # and allocates it again for the next pass.
    weight, x = torch.randn(32, device="cuda"), torch.randn(32, device="cuda")
    resized = torch.cuda.CUDAGraph()
    with torch.cuda.graph(resized):
        unsharded = torch.empty(32, device="cuda")
        unsharded.copy_(weight)
        product = x * unsharded
        unsharded.untyped_storage().resize_(0)
    for i in range(2):
        weight.add_(1)
        x.copy_(torch.randn(32, device="cuda"))
        resized.replay()
        if not torch.equal(product, x * weight):
            bad.append(f"replay {i} of operators whose tensor's storage was freed after capture")

    # Captured on a side stream, as ProcessGroupNCCL requires for an all-reduce inside a graph.
    rank, world = dist.get_rank(), dist.get_world_size()
    shard = torch.zeros(16, device="cuda")
    dist.all_reduce(shard)  # the communicator exists before capture
    side.wait_stream(torch.cuda.current_stream())
    collective = torch.cuda.CUDAGraph()
    with torch.cuda.graph(collective, stream=side):
        summed = shard * 2
        dist.all_reduce(summed)
    for i in range(3):
        shard.fill_(rank + i)
        collective.replay()
        if summed[0].item() != 2 * sum(r + i for r in range(world)):
            bad.append(f"all-reduce of replay {i}: {summed[0].item()}")

    first, second = replay_ms(graph), replay_ms(graph)
    if not (first > 0.01 and abs(first - second) <= 1e-3 * first):
        bad.append(f"modeled replay times {first} and {second} ms")

    try:
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            (static_x > 0).nonzero()
        bad.append("nonzero was captured")
    except RuntimeError as e:
        if "cannot be captured in a CUDA graph" not in str(e):
            bad.append(f"nonzero under capture raised {str(e)[:200]!r}")
    if bad:
        raise AssertionError("CUDA graphs on a fake GPU: " + "; ".join(bad))
    print(f"cuda graphs, rank {rank}: 4 replays train as eager steps, 3 replay an all-reduce; a step's replay "
          f"models {first:.3f} ms", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
