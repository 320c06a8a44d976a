#!/usr/bin/env bash
# Runs NVIDIA's nccl-tests, built unmodified, on fakegpu: every *_perf binary under
# mpirun -np 2, 4 and 8 (MPI=1 build), and with -g 2, -t 2 and -g 2 -G 2 (CUDA graphs) in one
# process (plain build).
# Build them as docs/nccl-tests.md shows, then:
#   verification/nccl_tests_matrix.sh PLAIN_BUILD_DIR MPI_BUILD_DIR
# Either directory may be "-" to skip that half. Prints one line per run and exits nonzero
# if any run fails. Extra nccl-tests flags can be given in NCCL_TESTS_ARGS.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
plain=${1:?usage: nccl_tests_matrix.sh PLAIN_BUILD_DIR MPI_BUILD_DIR}
mpi=${2:?usage: nccl_tests_matrix.sh PLAIN_BUILD_DIR MPI_BUILD_DIR}
args=${NCCL_TESTS_ARGS:-"-b 8 -e 128K -f 16 -c 0 -n 2 -w 1"}
tests="all_reduce all_gather broadcast reduce_scatter reduce alltoall alltoallv scatter gather sendrecv hypercube"
log=$(mktemp -d)
failed=0

run() {  # name, then the command
  local name=$1
  shift
  local out="$log/$name.log"
  if timeout 300 "$here/fgpu" --report "$log/$name.json" "$@" >"$out" 2>&1 &&
    grep -q "Out of bounds values : 0 OK" "$out" && grep -q "errors: 0" "$out"; then
    printf '%-34s ok\n' "$name"
  else
    printf '%-34s FAILED (log: %s)\n' "$name" "$out"
    failed=1
  fi
}

if [ "$plain" != - ]; then
  for t in $tests; do
    # shellcheck disable=SC2086
    run "${t}_g2" "$plain/${t}_perf" -g 2 $args
    # shellcheck disable=SC2086
    run "${t}_t2" "$plain/${t}_perf" -t 2 $args
    # shellcheck disable=SC2086
    run "${t}_g2_graph" "$plain/${t}_perf" -g 2 -G 2 $args
  done
fi
if [ "$mpi" != - ]; then
  root_flags=()
  [ "$(id -u)" = 0 ] && root_flags=(--allow-run-as-root)
  for np in 2 4 8; do
    for t in $tests; do
      # shellcheck disable=SC2086
      run "${t}_np${np}" mpirun -np "$np" "${root_flags[@]}" --oversubscribe "$mpi/${t}_perf" $args
    done
  done
fi
[ "$failed" = 0 ] && rm -rf "$log"
exit "$failed"
