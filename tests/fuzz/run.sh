#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/CMakeLists.txt) with clang in
# build-fuzz and runs each one for a bounded time, starting from its seed
# corpus (tests/fuzz/corpus/<target>, read only; new inputs go to
# build-fuzz/fuzz-out/<target>/corpus). Exits non-zero if any target
# crashed, leaked, timed out, ran out of memory, or printed a sanitizer
# report; the input that did it is saved as build-fuzz/fuzz-out/<target>/crash-*
# (or leak-*, timeout-*, oom-*) and the command to replay it is printed.
#
#   tests/fuzz/run.sh                      # every target, FUZZ_SECONDS (15) each
#   FUZZ_SECONDS=60 tests/fuzz/run.sh root tcp_recv
#
# Environment: FUZZ_SECONDS (per target), FUZZ_BUILD (build dir, default
# build-fuzz), JOBS (build parallelism, default 1).
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${FUZZ_BUILD:-build-fuzz}
SECS=${FUZZ_SECONDS:-15}
JOBS=${JOBS:-1}
ALL=(unique_id server_handshake client_handshake root peer_info tcp_recv shm_slots record message)
if [ $# -gt 0 ]; then TARGETS=("$@"); else TARGETS=("${ALL[@]}"); fi

command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHETCCL_FUZZ=ON >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log" >&2; exit 1; }
rm -f "$BUILD.configure.log"
cmake --build "$BUILD" --target hetccl_fuzzers -j "$JOBS"

OUT=$BUILD/fuzz-out
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
total_start=$(date +%s)
printf '%-18s %10s %9s %8s %7s  %s\n' target executions exec/s cov units result
for t in "${TARGETS[@]}"; do
  bin=$BUILD/tests/fuzz/fuzz_$t
  seeds=tests/fuzz/corpus/$t
  [ -x "$bin" ] || { echo "fuzz: no target $t" >&2; exit 1; }
  [ -d "$seeds" ] || { echo "fuzz: no seed corpus $seeds" >&2; exit 1; }
  rm -rf "${OUT:?}/$t"
  mkdir -p "$OUT/$t/corpus"
  maxlen=4096
  [ "$t" = unique_id ] && maxlen=128
  log=$OUT/$t/log
  rc=0
  "$bin" -max_total_time="$SECS" -timeout=5 -rss_limit_mb=2048 -max_len="$maxlen" -print_final_stats=1 \
    -artifact_prefix="$OUT/$t/" "$OUT/$t/corpus" "$seeds" >"$log" 2>&1 || rc=$?
  reports=$(grep -cE 'runtime error:|ERROR: [A-Za-z]+Sanitizer|WARNING: [A-Za-z]+Sanitizer|FUZZ CHECK FAILED' "$log" || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1 || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1 || true)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
  units=$(find "$OUT/$t/corpus" -type f | wc -l)
  result=ok
  if [ "$rc" -ne 0 ] || [ "$reports" -ne 0 ]; then
    result="FAILED (exit $rc, $reports sanitizer/check reports)"
    failed+=("$t")
  fi
  printf '%-18s %10s %9s %8s %7s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$units" "$result"
  if [ "$result" != ok ]; then
    grep -E -A25 'runtime error:|ERROR: [A-Za-z]+Sanitizer|FUZZ CHECK FAILED|deadly signal|ERROR: libFuzzer' "$log" | head -60 >&2 || true
    for a in "$OUT/$t"/crash-* "$OUT/$t"/leak-* "$OUT/$t"/timeout-* "$OUT/$t"/oom-*; do
      [ -e "$a" ] && echo "  reproduce: $bin $a" >&2
    done
    echo "  full log: $log" >&2
  fi
done
echo "fuzz: $(( $(date +%s) - total_start )) s for ${#TARGETS[@]} targets (${SECS} s each)"
if [ ${#failed[@]} -ne 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all targets passed"
