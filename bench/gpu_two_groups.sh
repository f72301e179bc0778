#!/usr/bin/env bash
# Two GPU groups on one host (needs one NVIDIA GPU and PyTorch with CUDA):
# two processes on the GPU, groups g0 and g1, standing for two vendors (the
# border takes the cross-vendor path through host memory, never CUDA IPC).
# float32 sum AllReduce from MIN to MAX bytes through hetccl (out of place
# and in place), torch.distributed's gloo on the same layout at MAX bytes,
# and the pinned copy bandwidth, all in this one command.
#
#   bash bench/gpu_two_groups.sh [BUILD_DIR] [MIN] [MAX]
# The bound: each rank moves N bytes each way over the GPU's one link, which
# both processes share, so 2N each way at the rate copies get when both
# directions run at once (bidir): busbw bound = bidir / 2.
# Prints the tables and, per size:
#   ratio gpu_2groups_allreduce <bytes> out_busbw=.. in_busbw=.. time_us=.. bound=.. out/bound=.. in/bound=..
# and at MAX: hetccl/gloo=<busbw ratio>; then AllGather, ReduceScatter,
# AlltoAll, Broadcast, Reduce, Gather, Scatter and SendRecv at OTHER bytes
# (default 64 MiB) against their bounds.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
min=${2:-8}
max=${3:-268435456}
python=${PYTHON:-python3}
transport=${TRANSPORT:-shm}
perf_out=$("$build/tools/hetccl-perf" --np 2 --devices cuda,cuda --groups g0,g1 --transport "$transport" \
  -o allreduce -d float -b "$min" -e "$max" -f 2 -n "${ITERS:-20}" -w 5 -c 1)
echo "$perf_out"
other_out=""
for op in allgather reducescatter alltoall broadcast reduce gather scatter sendrecv; do
  other_out+=$("$build/tools/hetccl-perf" --np 2 --devices cuda,cuda --groups g0,g1 --transport "$transport" \
    -o "$op" -d float -b "${OTHER:-67108864}" -e "${OTHER:-67108864}" -n 10 -w 3 -c 1 | sed "s/^/$op /")
  other_out+=$'\n'
done
echo "$other_out"
gloo_out=$("$python" "$here/gpu_gloo_allreduce.py" --np 2 --cuda-ranks 2 --bytes "$max" --iters 5 --warmup 2)
echo "$gloo_out"
"$python" - "$max" <<PY
import re, sys
perf = """$perf_out"""
gloo = """$gloo_out"""
top = int(sys.argv[1])
bidir = float(re.search(r"bidir_GBps=([0-9.]+)", gloo).group(1))
bound = bidir / 2
g_bus = float(re.search(r"busbw=([0-9.]+)", gloo).group(1))
# nccl-tests columns: size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
for r in (l.split() for l in perf.splitlines() if l.strip() and l.split()[0].isdigit()):
    size, t_out, out_bus, in_bus = int(r[0]), float(r[5]), float(r[7]), float(r[11])
    line = (f"ratio gpu_2groups_allreduce {size} out_busbw={out_bus:.2f} in_busbw={in_bus:.2f} time_us={t_out:.1f} "
            f"bound={bound:.1f} out/bound={out_bus / bound:.3f} in/bound={in_bus / bound:.3f}")
    if size == top:
        line += f" gloo_busbw={g_bus:.2f} hetccl/gloo={out_bus / g_bus:.2f}"
    print(line)
other = """$other_out"""
# Bounds on the one shared link: AllGather, ReduceScatter and AlltoAll move
# half of the data each way per rank, as AllReduce (bidir / 2); SendRecv
# moves all of it out of and into each rank (bidir / 2); Broadcast, Reduce,
# Gather and Scatter move it once out of one rank and once into the other,
# both at once (bidir).
for r in (l.split() for l in other.splitlines() if len(l.split()) > 1 and l.split()[1].isdigit()):
    op, size, t, bus = r[0], int(r[1]), float(r[6]), float(r[8])
    b = bidir if op in ("broadcast", "reduce", "gather", "scatter") else bidir / 2
    print(f"ratio gpu_2groups_{op} {size} busbw={bus:.2f} time_us={t:.1f} bound={b:.1f} busbw/bound={bus / b:.3f}")
PY
