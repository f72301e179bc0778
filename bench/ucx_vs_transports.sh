#!/usr/bin/env bash
# The ucx transport against hetccl's own tcp and shm transports, one run:
# 4 ranks in two groups (a,a,b,b), float32 sum AllReduce 1 MiB to 256 MiB,
# the same sizes and iterations for each, one after another. Prints the
# busbw table and one ratio line per size:
#   ratio ucx <bytes> ucx/tcp=.. ucx/shm=.. ucx_tcp/tcp=..
# (ucx: UCX's own choice of transports, shared memory here; ucx_tcp: UCX_TLS=tcp).
#   bash bench/ucx_vs_transports.sh [-n ITERS] [-w WARMUP]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
perf=${HETCCL_PERF:-$here/build/tools/hetccl-perf}
iters=20 warm=5
while getopts "n:w:" o; do case $o in n) iters=$OPTARG ;; w) warm=$OPTARG ;; *) exit 2 ;; esac; done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # name transport [env...]
  local name=$1 t=$2
  shift 2
  env "$@" "$perf" --np 4 --groups a,a,b,b --transport "$t" -b 1M -e 256M -f 4 -n "$iters" -w "$warm" -c 1 \
    --json "$out/$name.json" > "$out/$name.txt" 2>&1 || { cat "$out/$name.txt"; echo "ucx_vs_transports: $name failed" >&2; exit 1; }
}
run tcp tcp
run shm shm
run ucx ucx
run ucx_tcp ucx UCX_TLS=tcp
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
names = ["tcp", "shm", "ucx", "ucx_tcp"]
rows = {n: {r["bytes"]: r["oop"]["busbw"] for r in json.load(open(f"{d}/{n}.json"))["rows"]} for n in names}
wrong = {n: json.load(open(f"{d}/{n}.json"))["wrong_total"] for n in names}
print("# busbw GB/s (out-of-place), 4 ranks a,a,b,b, float32 sum AllReduce")
print("%12s " % "bytes" + " ".join("%9s" % n for n in names))
for b in sorted(rows["tcp"]):
    print("%12d " % b + " ".join("%9.2f" % rows[n][b] for n in names))
for b in sorted(rows["tcp"]):
    r = {n: rows[n][b] for n in names}
    print(f"ratio ucx {b} ucx/tcp={r['ucx'] / r['tcp']:.2f} ucx/shm={r['ucx'] / r['shm']:.2f} "
          f"ucx_tcp/tcp={r['ucx_tcp'] / r['tcp']:.2f}")
print("wrong results:", wrong)
sys.exit(1 if any(wrong.values()) else 0)
PY
