#!/usr/bin/env bash
# Hybrid mode with torch: `torchrun --nproc_per_node=N` DDP training under fgpu, the ranks sharing
# this machine's GPU(s) and DDP averaging gradients through the simulator, must give the losses
# and weights of a single-process reference (verification/ddp_reference_check.py). Without a GPU
# or a CUDA-enabled torch with NCCL it skips (exit 77) and says why.
# Usage: test/run_hybrid_ddp.sh N
set -euo pipefail
ranks=${1:?usage: $0 RANKS}
cd "$(dirname "$0")/.."
check=run_hybrid_ddp
. test/require_gpu.sh
require_cuda_torch
work=$(mktemp -d "${TMPDIR:-/tmp}/fakegpu-hybrid-ddp-XXXXXX")
trap 'rm -rf "$work"' EXIT
./fgpu --mode hybrid --report "$work/report.json" \
  "$python" -m torch.distributed.run --standalone --nproc_per_node="$ranks" \
  verification/ddp_reference_check.py --out "$work/result.json"
python3 - "$work/report.json" "$ranks" <<'PY'
import json, sys
report, ranks = json.load(open(sys.argv[1])), int(sys.argv[2])
assert report["world_size"] == ranks, report["world_size"]
assert report["collectives"]["AllReduce"]["calls"] > 0, "DDP's gradient AllReduces did not reach the simulator"
PY
echo "run_hybrid_ddp: $ranks ranks on $(nvidia-smi -L | wc -l) GPU(s) match the single-process reference: $(tr -d '\n ' < "$work/result.json")"
