#!/usr/bin/env bash
# Fuzzes the wire decoder and the cluster config loader with libFuzzer for SECONDS each
# (default 60), starting from the seed corpora. Builds the fuzzers with clang in build-fuzz
# (-DFAKEGPU_FUZZ=ON). A crashing input is saved under build-fuzz/fuzz-artifacts/; once the
# bug is fixed, add the input to test/fuzz/corpus/wire or config as a regression seed.
#   verification/fuzz.sh [SECONDS]
# FUZZ_BUILD_JOBS sets the build's parallelism (default 2).
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=$here/build-fuzz
artifacts=$build/fuzz-artifacts

CC=clang CXX=clang++ cmake -S "$here" -B "$build" -DFAKEGPU_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null ||
  exit 1
cmake --build "$build" -j"${FUZZ_BUILD_JOBS:-2}" --target fuzz_wire fuzz_config make_wire_seeds >/dev/null || exit 1

# libFuzzer writes what it finds into the first directory and only reads the others, so the
# checked-in seeds stay as they are; the work directories start empty on each run.
work=$build/fuzz-work
rm -rf "$work"
mkdir -p "$work/wire" "$work/config" "$artifacts"
# Seeds from the current encoder, in case the checked-in ones predate a protocol change.
"$build/make_wire_seeds" "$work/wire-seeds" || exit 1

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
failed=0
fuzz() {  # name, corpus directories...
  local name=$1 log=$build/fuzz-$1.log
  shift
  echo "fuzz_$name: ${seconds}s"
  "$build/fuzz_$name" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$name-" "$@" >"$log" 2>&1 </dev/null  # a topology_xml may name /dev/stdin
  local rc=$?
  local execs rate
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "  execs: ${execs:-?}  execs/s: ${rate:-?}  corpus: $(ls "$1" | wc -l) new inputs"
  if [ $rc != 0 ]; then
    failed=1
    echo "  FAILED (exit $rc); the report, from $log:"
    grep -E -m1 -B2 -A25 '==[0-9]+== ?ERROR|runtime error:' "$log"
    grep 'Test unit written' "$log"
  fi
}
fuzz wire "$work/wire" "$here/test/fuzz/corpus/wire" "$work/wire-seeds"
fuzz config "$work/config" "$here/test/fuzz/corpus/config" "$here/configs" -dict="$here/test/fuzz/config.dict"
exit $failed
