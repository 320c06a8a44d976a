"""Mixed precision on fake GPUs: a small model trains under bf16 autocast with
torch.amp.GradScaler("cuda"); the scaler skips a step whose gradients overflow and halves its
scale, as on a GPU. Run as one rank under fgpu; prints one line."""

import torch
import torch.nn.functional as F


def main():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 1)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
    x, y = torch.randn(64, 16).cuda(), torch.randn(64, 1).cuda()
    losses = []
    for _ in range(30):
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(x)
            if out.dtype != torch.bfloat16:
                raise AssertionError(f"autocast gave {out.dtype}, not bfloat16")
            loss = F.mse_loss(out.float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    if not losses[-1] < 0.8 * losses[0]:
        raise AssertionError(f"bf16 training did not reduce the loss: {losses[0]} -> {losses[-1]}")

    # An overflowing gradient: the step is skipped and the scale halves.
    before = [p.detach().clone() for p in model.parameters()]
    scale = scaler.get_scale()
    opt.zero_grad()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = F.mse_loss(model(x).float(), y)
    scaler.scale(loss * float("inf")).backward()
    scaler.step(opt)
    scaler.update()
    if scaler.get_scale() != scale / 2:
        raise AssertionError(f"scale {scale} -> {scaler.get_scale()} after an overflow, expected {scale / 2}")
    if not all(torch.equal(a, b) for a, b in zip(before, model.parameters())):
        raise AssertionError("the optimizer stepped on overflowing gradients")
    print(f"mixed precision: loss {losses[0]:.4f} -> {losses[-1]:.4f}, overflow skipped, scale {scale} -> "
          f"{scaler.get_scale()}", flush=True)


if __name__ == "__main__":
    main()
