#!/usr/bin/env bash
# The seed's hybrid check: N virtual nodes of 2 ranks compute on this machine's real GPU(s) and
# communicate through the simulator. It is run_multinode_sim.sh in hybrid mode, its rank program
# nccl_check built against NVIDIA's headers and run on NVIDIA's runtime, so that its buffers are
# GPU memory. Without a GPU or the CUDA toolkit it skips (exit 77) and says why.
# Usage: test/run_hybrid_multinode.sh N
set -euo pipefail
nodes=${1:?usage: $0 NODES}
cd "$(dirname "$0")/.."
check=run_hybrid_multinode
. test/require_gpu.sh
build=${FAKEGPU_BUILD_DIR:-build}
program=$build/nccl_check_real_headers
[[ -x $program ]] || skip "$program was not built (the build found no CUDA toolkit headers)"
cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
export LD_LIBRARY_PATH=$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
runtime=$(ldd "$program" | awk '/libcudart/ {print $3}')
[[ $runtime == "$cuda_lib"/* ]] || skip "NVIDIA's libcudart is not in $cuda_lib (set CUDA_HOME); $program found '$runtime'"
echo "run_hybrid_multinode: ranks run $program on $runtime"
FAKEGPU_MODE=hybrid RANK_PROGRAM=$program exec test/run_multinode_sim.sh "$nodes"
