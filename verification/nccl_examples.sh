#!/usr/bin/env bash
# Runs NCCL's own host-side examples (the nccl repository's examples 01-05), built unmodified,
# on fakegpu and checks that each prints its own success message. Build them as
# docs/nccl-tests.md shows, then:
#   verification/nccl_examples.sh EXAMPLES_DIR [MPI_EXAMPLES_DIR]
# MPI_EXAMPLES_DIR, when given, is a MPI=1 build: its one-device-per-process example runs under
# mpirun -np 4.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: nccl_examples.sh EXAMPLES_DIR [MPI_EXAMPLES_DIR]}
mpi=${2:-}
failed=0
check() {  # name, success pattern, command...
  local name=$1 pattern=$2
  shift 2
  local out
  out=$(timeout 300 "$here/fgpu" --device-count 4 "$@" 2>&1)
  if [ $? = 0 ] && grep -qiE "$pattern" <<<"$out" && grep -q "errors: 0" <<<"$out"; then
    printf '%-40s ok\n' "$name"
  else
    printf '%-40s FAILED\n%s\n' "$name" "$out"
    failed=1
  fi
}
for bin in 01_communicators/01_multiple_devices_single_process/multiple_devices_single_process \
           01_communicators/02_one_device_per_pthread/one_device_per_pthread \
           02_point_to_point/01_ring_pattern/ring_pattern \
           03_collectives/01_allreduce/allreduce \
           04_user_buffer_registration/01_allreduce/allreduce_ub \
           05_symmetric_memory/01_allreduce/allreduce_sm; do
  check "$(basename "$bin")" "success" "$dir/$bin"
done
if [ -n "$mpi" ]; then
  root_flags=()
  [ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
  check "one_device_per_process_mpi (np 4)" "cleaned up properly" \
    mpirun -np 4 "${root_flags[@]}" --oversubscribe "$mpi/01_communicators/03_one_device_per_process_mpi/one_device_per_process_mpi"
fi
exit "$failed"
