#!/usr/bin/env bash
# The seed's DDP check: N ranks of a small DDP job under fgpu, ProcessGroupNCCL over the
# simulator, gradients checked against their average. It needs a torch build with NCCL
# support; without one it skips (exit 77) and says why. Usage: test/run_ddp_multinode.sh N
set -euo pipefail
nodes=${1:?usage: $0 NODES}
cd "$(dirname "$0")/.."
if ! python3 -c "import torch, torch.distributed as d, sys; sys.exit(0 if d.is_available() and d.is_nccl_available() else 1)" 2>/dev/null; then
  echo "run_ddp_multinode: skipped: needs torch with NCCL support (torch.distributed.is_nccl_available()); this Python has none"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fakegpu-ddp-XXXXXX")
trap 'rm -rf "$work"' EXIT
cat > "$work/ddp.py" <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 1).cuda())
loss = model(torch.full((4, 8), float(rank + 1), device="cuda")).sum()
loss.backward()
grad = model.module.weight.grad.clone()
dist.all_reduce(grad)
assert torch.allclose(grad / world, model.module.weight.grad), "DDP gradients are not the average"
print(f"rank {rank}/{world}: DDP OK")
dist.destroy_process_group()
PY
export MASTER_ADDR=127.0.0.1 MASTER_PORT=$((29500 + $$ % 1000))  # torch's own rendezvous
./fgpu --nproc "$nodes" python3 "$work/ddp.py"
