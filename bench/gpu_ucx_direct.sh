#!/usr/bin/env bash
# GPU ranks' AllReduce across groups with the border over UCX, one run:
# device memory handed to UCX (direct: HETCCL_GPU_DIRECT=1) against the same
# through pinned staging (HETCCL_GPU_DIRECT=0), against staging over
# hetccl's shm transport, and the default (auto: direct from
# HETCCL_GPU_DIRECT_MIN where every group is a GPU group, else staged). float32 sum, 1 MiB to 256 MiB, same sizes and
# iterations for each, one after another. Needs a GPU and a UCX built with
# CUDA (UCX_PREFIX=<install>; `ucx_info -d` lists cuda_copy, cuda_ipc).
#   UCX_PREFIX=<ucx> bash bench/gpu_ucx_direct.sh BUILD [2gpu|1gpu3host] [-n ITERS] [-w WARMUP]
# 2gpu: two processes on GPU 0 in two groups (g0, g1); 1gpu3host: one CUDA
# rank and three host ranks (groups cuda, host). Prints the busbw table and
#   ratio <layout> <bytes> direct/staged=.. direct/shm=.. auto/staged=..
# UCX_TLS (default sm,self,cuda_copy,cuda_ipc) applies to staged and direct
# alike: left to itself UCX also puts tcp lanes under large messages on one
# host, which costs the staged run about half its bandwidth.
set -euo pipefail
build=${1:?build directory}
layout=${2:-2gpu}
shift $(( $# >= 2 ? 2 : 1 ))
iters=10 warm=3
while getopts "n:w:" o; do case $o in n) iters=$OPTARG ;; w) warm=$OPTARG ;; *) exit 2 ;; esac; done
perf=$build/tools/hetccl-perf
prefix=${UCX_PREFIX:?UCX_PREFIX: a UCX install built with CUDA}
lib=$(ls -d "$prefix"/lib/x86_64-linux-gnu 2>/dev/null || echo "$prefix/lib")
case $layout in
  2gpu) ranks=(--np 2 --devices cuda,cuda --groups g0,g1) ;;
  1gpu3host) ranks=(--np 4 --devices cuda,host,host,host) ;;
  *) echo "gpu_ucx_direct: unknown layout $layout" >&2; exit 2 ;;
esac
export NCCL_NVLS_ENABLE=0
export UCX_TLS=${UCX_TLS:-sm,self,cuda_copy,cuda_ipc}
echo "gpu_ucx_direct: $layout, UCX_TLS=$UCX_TLS, $iters iterations after $warm warm-up"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # name transport [env...]
  local name=$1 t=$2
  shift 2
  env HETCCL_UCX_LIB="$lib/libucp.so.0" LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    UCX_MODULE_DIR="$lib/ucx" HETCCL_DEBUG=INFO HETCCL_DEBUG_SUBSYS=INIT "$@" \
    "$perf" "${ranks[@]}" --transport "$t" -b 1M -e 256M -f 4 -n "$iters" -w "$warm" -c 1 \
    --json "$out/$name.json" > "$out/$name.txt" 2>&1 || { tail -30 "$out/$name.txt"; echo "gpu_ucx_direct: $name failed" >&2; exit 1; }
  echo "$name: $(grep -m1 -o 'border data path [a-z]*' "$out/$name.txt")"
}
run shm shm HETCCL_GPU_DIRECT=0
run staged ucx HETCCL_GPU_DIRECT=0
run direct ucx HETCCL_GPU_DIRECT=1
run auto ucx HETCCL_GPU_DIRECT=auto
python3 - "$out" "$layout" <<'PY'
import json, sys
d, layout = sys.argv[1], sys.argv[2]
names = ["shm", "staged", "direct", "auto"]
runs = {n: json.load(open(f"{d}/{n}.json")) for n in names}
rows = {n: {r["bytes"]: r["oop"]["busbw"] for r in runs[n]["rows"]} for n in names}
print(f"# busbw GB/s (out-of-place), {layout}, float32 sum AllReduce; shm and staged copy through pinned memory")
print("%12s " % "bytes" + " ".join("%9s" % n for n in names))
for b in sorted(rows["shm"]):
    print("%12d " % b + " ".join("%9.2f" % rows[n][b] for n in names))
for b in sorted(rows["shm"]):
    r = {n: rows[n][b] for n in names}
    print(f"ratio {layout} {b} direct/staged={r['direct'] / r['staged']:.2f} direct/shm={r['direct'] / r['shm']:.2f} "
          f"auto/staged={r['auto'] / r['staged']:.2f}")
wrong = {n: runs[n]["wrong_total"] for n in names}
print("wrong results:", wrong)
sys.exit(1 if any(wrong.values()) else 0)
PY
