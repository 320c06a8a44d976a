#!/usr/bin/env bash
# The seed's multi-node simulation check: N virtual nodes of 2 GPUs on this host, one rank per
# GPU, running the TP x DP job (TP inside a node, DP across nodes) through fgpu. Every rank
# checks every element; the report must show the nodes and traffic between them.
# Usage: test/run_multinode_sim.sh N   (N >= 2). run_hybrid_multinode.sh runs it in hybrid mode,
# with FAKEGPU_MODE=hybrid and RANK_PROGRAM naming a build of nccl_check on NVIDIA's runtime.
set -euo pipefail
nodes=${1:?usage: $0 NODES}
[[ $nodes =~ ^[0-9]+$ && $nodes -ge 2 ]] || { echo "run_multinode_sim: NODES must be an integer >= 2, got '$nodes'" >&2; exit 2; }
cd "$(dirname "$0")/.."
build=${FAKEGPU_BUILD_DIR:-build}
work=$(mktemp -d "${TMPDIR:-/tmp}/fakegpu-multinode-XXXXXX")
trap 'rm -rf "$work"' EXIT

config=$work/cluster.yaml
{
  echo "version: 1"
  echo "cluster: {name: sim-${nodes}x2}"
  echo "nodes:"
  for ((n = 0; n < nodes; n++)); do
    echo "  - {id: node$n, ranks: [$((2 * n)), $((2 * n + 1))], gpus: [{profile: h100}, {profile: h100}]}"
  done
  echo "fabric:"
  echo "  intra_node: {type: nvswitch, bandwidth_gbps: 3600, latency_us: 1}"
  echo "  inter_node: {type: infiniband, bandwidth_gbps: 800, latency_us: 2}"
} > "$config"

world=$((2 * nodes))
./fgpu --cluster-config "$config" --report "$work/report.json" --nproc "$world" \
  "${RANK_PROGRAM:-$build/nccl_check}" "$work/id" --tp 2 --iters 3 --count 4096 > "$work/out.txt"
oks=$(grep -c ": OK (" "$work/out.txt" || true)
[[ $oks -eq $world ]] || { cat "$work/out.txt"; echo "run_multinode_sim: $oks of $world ranks verified" >&2; exit 1; }

python3 - "$work/report.json" "$nodes" <<'PY'
import json, sys
report, nodes = json.load(open(sys.argv[1])), int(sys.argv[2])
assert report["world_size"] == 2 * nodes, report["world_size"]
assert len(report["cluster"]["nodes"]) == nodes
pairs = {(p["from"], p["to"]) for p in report["node_pairs"] if p["bytes"] > 0}
across = {p for p in pairs if p[0] != p[1]}
assert len(across) >= nodes, f"traffic crossed only {sorted(across)}"
assert not report["errors"], report["errors"]
PY
echo "run_multinode_sim (--mode ${FAKEGPU_MODE:-simulate}): $nodes nodes x 2 GPUs, all $world ranks verified, traffic crossed between the nodes"
