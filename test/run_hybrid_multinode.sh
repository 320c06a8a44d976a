#!/usr/bin/env bash
# The seed's hybrid check: N ranks compute on this machine's real GPU and communicate through
# the simulator. Without a GPU it skips (exit 77) and says why. Usage: test/run_hybrid_multinode.sh N
set -euo pipefail
nodes=${1:?usage: $0 NODES}
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  echo "run_hybrid_multinode: skipped: hybrid mode needs a real GPU and this machine has none (nvidia-smi -L)"
  exit 77
fi
build=${FAKEGPU_BUILD_DIR:-build}
work=$(mktemp -d "${TMPDIR:-/tmp}/fakegpu-hybrid-XXXXXX")
trap 'rm -rf "$work"' EXIT
./fgpu --mode hybrid --nproc "$((2 * nodes))" "$build/nccl_check" "$work/id" --tp 2 --iters 3
