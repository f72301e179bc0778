#!/usr/bin/env bash
# One-group overhead of hetccl's drop-in in torch: the same all_reduce
# script (bench/torch_nccl_allreduce.py, one process, one GPU) with the
# real NCCL alone and with hetccl's libnccl.so.2 preloaded in front of it.
# One discarded run of each first (the first processes on a fresh machine
# run slower), then ROUNDS (default 4) pairs in alternating order; per size
# the best median of each side. Prints the ratio (drop-in / NCCL) per size,
# the added microseconds, and whether the target holds: <= 1.05x at every
# size (about 0.25 us on NCCL's 5.2 us a call on an H100), and at most 0.25 us
# more host time per 8-byte call. With one rank, NCCL's in-place AllReduce
# moves no data: every size measures the host side of a call.
#   bench/torch_dropin_overhead.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
rounds=${ROUNDS:-4}
export NCCL_NVLS_ENABLE=0
tmp=$(mktemp -d)
run() {  # side index
  if [ "$1" = nccl ]; then
    python3 "$here/bench/torch_nccl_allreduce.py" "$3" > "$tmp/$1.$2.json"
  else
    HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" "$here/tools/hetccl-torch-run" \
      python3 "$here/bench/torch_nccl_allreduce.py" "$3" > "$tmp/$1.$2.json"
  fi
}
run nccl 0 29600
run hetccl 0 29601
for i in $(seq "$rounds"); do
  if [ $((i % 2)) -eq 1 ]; then
    run nccl "$i" $((29600 + 2 * i)); run hetccl "$i" $((29601 + 2 * i))
  else
    run hetccl "$i" $((29601 + 2 * i)); run nccl "$i" $((29600 + 2 * i))
  fi
done
python3 - "$tmp" "$rounds" <<'PY'
import json, sys
tmp, rounds = sys.argv[1], int(sys.argv[2])
def best(side):
    runs = [json.load(open(f"{tmp}/{side}.{i}.json")) for i in range(1, rounds + 1)]
    return {k: min(r[k] for r in runs) for k in runs[0]}
a, b = best("nccl"), best("hetccl")
ok = True
lines = []  # the same as ratio lines (docs/perf/make_performance.py reads them)
print(f"{'bytes':>12} {'nccl us':>10} {'drop-in us':>11} {'ratio':>7} {'added us':>9}")
for k in a:
    if k == "host_us_per_8B_call":
        continue
    ratio, added = b[k] / a[k], b[k] - a[k]
    target = ratio <= 1.05
    ok = ok and target
    print(f"{k:>12} {a[k]:>10.2f} {b[k]:>11.2f} {ratio:>7.3f} {added:>9.2f} {'' if target else '  above target'}")
    lines.append(f"ratio torch_dropin {k} nccl_us={a[k]:.2f} dropin_us={b[k]:.2f} dropin/nccl={ratio:.3f} added_us={added:.2f}")
h = b["host_us_per_8B_call"] - a["host_us_per_8B_call"]
print(f"host time per 8-byte call: nccl {a['host_us_per_8B_call']:.2f} us, drop-in {b['host_us_per_8B_call']:.2f} us "
      f"(+{h:.2f} us){'' if h <= 0.25 else '  above target'}")
ok = ok and h <= 0.25
print("\n".join(lines))
print("torch_dropin_overhead: within targets" if ok else "torch_dropin_overhead: ABOVE TARGET")
PY
rm -rf "$tmp"
