# Sourced by the hybrid checks: skip() ends the script with exit 77, which ctest counts as
# skipped, after saying why; a machine without a working GPU skips at once. $check names the
# script in its messages.
skip() { echo "$check: skipped: $*"; exit 77; }
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  skip "hybrid mode needs a real GPU and this machine has none (nvidia-smi -L)"
fi
