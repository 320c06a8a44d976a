# Sourced by the hybrid checks: skip() ends the script with exit 77, which ctest counts as
# skipped, after saying why; a machine without a working GPU skips at once. $check names the
# script in its messages. require_cuda_torch sets $python to a PyTorch that can use the GPU
# with NCCL, or skips.
skip() { echo "$check: skipped: $*"; exit 77; }
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  skip "hybrid mode needs a real GPU and this machine has none (nvidia-smi -L)"
fi

require_cuda_torch() {
  # The PyTorch that scripts/setup installs, else the machine's.
  python=build/torch-venv/bin/python
  [ -x "$python" ] || python=python3
  "$python" -c "import torch, torch.distributed as d, sys; sys.exit(0 if torch.cuda.is_available() and d.is_nccl_available() else 1)" \
    2> /dev/null || skip "needs torch with CUDA and NCCL (torch.cuda.is_available(), torch.distributed.is_nccl_available())"
}
