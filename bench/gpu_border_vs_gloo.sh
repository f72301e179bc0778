#!/usr/bin/env bash
# GPU border benchmark (needs one NVIDIA GPU and PyTorch with CUDA): float32
# sum AllReduce of BYTES (default 256 MiB) on 4 ranks, rank 0 a CUDA rank
# (group cuda, NCCL backend) and ranks 1-3 host ranks (group host), border
# through shm. hetccl and torch.distributed's gloo run on the same layout in
# this one command; the pinned copy bandwidth is measured here too.
#
#   bash bench/gpu_border_vs_gloo.sh [BUILD_DIR] [BYTES]
# Prints the two tables and:
#   ratio gpu_allreduce <bytes> hetccl/gloo=<busbw ratio> border/pinned=<hetccl busbw / min(h2d, d2h)>
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
bytes=${2:-268435456}
python=${PYTHON:-python3}
perf_out=$("$build/tools/hetccl-perf" --np 4 -g 1 -o allreduce -d float -b "$bytes" -e "$bytes" -n 5 -w 2 -c 1)
echo "$perf_out"
gloo_out=$("$python" "$here/gpu_gloo_allreduce.py" --np 4 --bytes "$bytes" --iters 5 --warmup 2)
echo "$gloo_out"
"$python" - "$bytes" <<PY
import re, sys
perf = """$perf_out"""
gloo = """$gloo_out"""
size = int(sys.argv[1])
rows = [l.split() for l in perf.splitlines() if l.strip() and l.split()[0].isdigit()]
# nccl-tests columns: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
row = [r for r in rows if int(r[0]) == size][0]
h_bus = float(row[7])
g_bus = float(re.search(r"busbw=([0-9.]+)", gloo).group(1))
h2d = float(re.search(r"h2d_GBps=([0-9.]+)", gloo).group(1))
d2h = float(re.search(r"d2h_GBps=([0-9.]+)", gloo).group(1))
print(f"ratio gpu_allreduce {size} hetccl/gloo={h_bus / g_bus:.2f} hetccl_busbw={h_bus:.2f} gloo_busbw={g_bus:.2f} "
      f"pinned_h2d={h2d:.1f} pinned_d2h={d2h:.1f} border/pinned={h_bus / min(h2d, d2h):.3f}")
PY
