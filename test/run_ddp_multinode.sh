#!/usr/bin/env bash
# The seed's DDP check, on PyTorch's CUDA build with no GPU:
# - N ranks of an unmodified DDP training script (test/torch/train_ddp.py) under `fgpu --nproc N`
#   start from rank 0's weights, keep identical replicas after every step, and every gradient
#   bucket DDP reduced reaches the simulator as an AllReduce of its size;
# - DDP training (verification/ddp_reference_check.py) gives the per-step losses and final
#   weights of a single-process CPU reference (rtol 1e-5).
# Without PyTorch's CUDA build in build/torch-venv (./scripts/setup-torch) it skips (exit 77)
# and says why. Usage: test/run_ddp_multinode.sh N
set -euo pipefail
ranks=${1:?usage: $0 RANKS}
cd "$(dirname "$0")/.."
python=build/torch-venv/bin/python
if ! "$python" -c "import torch, torch.distributed as d, sys; sys.exit(0 if torch.version.cuda and d.is_nccl_available() else 1)" 2>/dev/null; then
  echo "run_ddp_multinode: skipped: needs PyTorch's CUDA build with NCCL in build/torch-venv (./scripts/setup-torch)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/fakegpu-ddp-XXXXXX")
trap 'rm -rf "$work"' EXIT
export PYTHONWARNINGS=ignore::FutureWarning
./fgpu --nproc "$ranks" --report "$work/report.json" "$python" test/torch/train_ddp.py --steps 3 --out "$work"
./fgpu --nproc "$ranks" --report "$work/reference-report.json" "$python" verification/ddp_reference_check.py \
  --rtol 1e-5 --reference-device cpu --out "$work/reference.json"
python3 - "$work" "$ranks" <<'PY'
import json, sys
from pathlib import Path
sys.path.insert(0, "test/torch")
from ddp_buckets import reducer_buckets, reported_allreduces
work, ranks = Path(sys.argv[1]), int(sys.argv[2])
results = [json.loads((work / f"rank{r}.json").read_text()) for r in range(ranks)]
report = json.loads((work / "report.json").read_text())
assert report["world_size"] == ranks, report["world_size"]
buckets, reduced = reducer_buckets(results[0]), reported_allreduces(report)
assert reduced == buckets, f"DDP's buckets {dict(buckets)} but the simulator saw AllReduces {dict(reduced)}"
for r in results:
    assert r["init_is_rank0s"], f"rank {r['rank']} did not start from rank 0's weights"
    assert all(r["replicas_identical"]), f"rank {r['rank']}: replicas differ after some step"
reference = json.loads((work / "reference.json").read_text())
assert reference["losses_agree"] and reference["weights_agree"], reference
print(f"run_ddp_multinode: {ranks} ranks trained {len(results[0]['buckets'])} steps with identical replicas; "
      f"{sum(buckets.values())} bucket all-reduces match DDP's buckets; losses match the CPU reference "
      f"(largest weight difference {reference['max_weight_difference']:.1e})")
PY
