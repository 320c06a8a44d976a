#!/usr/bin/env bash
# Hybrid mode beyond DDP: on 2 virtual nodes of N/2 ranks sharing this machine's GPU(s),
# - every ProcessGroupNCCL collective (test/torch/collectives.py) and a 2-D DeviceMesh's
#   collectives (test/torch/device_mesh.py) give exact results;
# - FSDP2, tensor x data parallel, and DDP then FSDP2 training (test/torch/train_parallel.py),
#   computed on the GPU, give the losses and weights of one process training on the CPU (rtol 1e-5);
#   as PyTorch's examples do, each rank requires a device per rank of its node and trains on
#   cuda:LOCAL_RANK, and each sees its node's devices, all running on the GPU(s) here.
# Without a GPU or a CUDA-enabled torch with NCCL it skips (exit 77) and says why.
# Usage: test/run_hybrid_parallel.sh N   (N even, at least 4)
set -euo pipefail
ranks=${1:?usage: $0 RANKS}
[[ $ranks =~ ^[0-9]+$ && $ranks -ge 4 && $((ranks % 2)) -eq 0 ]] ||
  { echo "run_hybrid_parallel: RANKS must be an even integer >= 4, got '$ranks'" >&2; exit 2; }
cd "$(dirname "$0")/.."
check=run_hybrid_parallel
. test/require_gpu.sh
require_cuda_torch
work=$(mktemp -d "${TMPDIR:-/tmp}/fakegpu-hybrid-parallel-XXXXXX")
trap 'rm -rf "$work"' EXIT
export PYTHONWARNINGS=ignore::FutureWarning TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING=false

per_node=$((ranks / 2))
# fgpu's own cluster of 2 nodes of H100s, per_node GPUs each.
hybrid() { ./fgpu --mode hybrid --nodes 2 --gpus-per-node "$per_node" --gpu h100 --report "$work/$1.json" "${@:2}"; }
torchrun=("$python" -m torch.distributed.run --nproc_per_node="$per_node")

hybrid collectives --nproc "$ranks" "$python" test/torch/collectives.py > "$work/collectives.out"
exact=$(grep -o "collectives exact" "$work/collectives.out" | wc -l)  # ranks print concurrently: count, not lines
[[ $exact -eq $ranks ]] || { cat "$work/collectives.out"; echo "$check: collectives exact on $exact of $ranks ranks" >&2; exit 1; }

hybrid mesh "${torchrun[@]}" test/torch/device_mesh.py > "$work/mesh.out"
exact=$(grep -o "mesh collectives exact" "$work/mesh.out" | wc -l)
[[ $exact -eq $ranks ]] || { cat "$work/mesh.out"; echo "$check: mesh collectives exact on $exact of $ranks ranks" >&2; exit 1; }

train=(test/torch/train_parallel.py --device-per-rank)
hybrid fsdp --nproc "$ranks" "$python" "${train[@]}" --style fsdp --out "$work/fsdp-result.json"
hybrid tp_dp "${torchrun[@]}" "${train[@]}" --style tp_dp --out "$work/tp_dp-result.json"
hybrid ddp_fsdp --nproc "$ranks" "$python" "${train[@]}" --style ddp_fsdp --out "$work/ddp_fsdp-result.json"

python3 - "$work" "$ranks" <<'PY'
import json, sys
from pathlib import Path
work, ranks = Path(sys.argv[1]), int(sys.argv[2])
for name in ("collectives", "mesh", "fsdp", "tp_dp", "ddp_fsdp"):
    report = json.loads((work / f"{name}.json").read_text())
    assert report["world_size"] == ranks, (name, report["world_size"])
    assert not report["errors"], (name, report["errors"])
    # Staged in page-locked host blocks the coordinator maps: no data over the socket.
    plane = report["data_plane"]
    assert plane["socket_bytes"] == 0 and plane["shared_memory_bytes"] > 0, (name, plane)
for style in ("fsdp", "tp_dp", "ddp_fsdp"):
    result = json.loads((work / f"{style}-result.json").read_text())
    assert result["losses_agree"] and result["weights_agree"] and result.get("ddp_losses_agree", True), result
    # Each rank saw its node's devices and trained on cuda:LOCAL_RANK.
    per_node = ranks // 2
    assert result["devices"] == [[per_node, r % per_node, r % per_node] for r in range(ranks)], result["devices"]
    print(f"run_hybrid_parallel: {style} on {ranks} ranks matches the CPU reference "
          f"(largest weight difference {result['max_weight_difference']:.1e})")
PY
echo "$check: $ranks ranks on 2 virtual nodes sharing $(nvidia-smi -L | wc -l) GPU(s): collectives and DeviceMesh exact, FSDP2, TP x DP and DDP then FSDP2 on cuda:LOCAL_RANK match the CPU reference"
