#!/usr/bin/env bash
# Small AllReduce calls between two GPU groups on one GPU (needs one NVIDIA
# GPU; MPS where the machine has nvidia-cuda-mps-control), in one command:
#   two_contexts  two processes on the GPU as they are: two contexts that the
#                 GPU time-slices (the stand-in for two vendors' GPUs);
#   mps           the same two processes under CUDA MPS, which runs both in
#                 one shared context: no time slicing between them, as with
#                 two GPUs of their own;
#   cuda_host     one CUDA rank and one host rank (no second context).
#
#   bash bench/gpu_small_calls.sh [BUILD_DIR] [MIN] [MAX]
# Prints per size, float32 sum, out of place, microseconds per call:
#   ratio gpu_small_allreduce <bytes> two_contexts_us=.. mps_us=.. cuda_host_us=.. two_contexts/mps=..
# Extra hetccl settings pass through the environment (e.g.
# HETCCL_GPU_BORDER_MIN=0 puts every size on the device border).
set -uo pipefail
build=${1:-build}
min=${2:-8}
max=${3:-1048576}
transport=${TRANSPORT:-shm}
perf() {  # devices groups
  "$build/tools/hetccl-perf" --np 2 --devices "$1" --groups "$2" --transport "$transport" \
    -o allreduce -d float -b "$min" -e "$max" -f 2 -n "${ITERS:-200}" -w 20 -c 1
}
# nccl-tests columns: size count type redop root | time algbw busbw #wrong | ...
times() { awk '$1 ~ /^[0-9]+$/ && NF >= 12 {print $1, $6}'; }

two=$(perf cuda,cuda g0,g1)
echo "$two" | sed 's/^/two_contexts /'
host=$(perf cuda,host g0,g1)
echo "$host" | sed 's/^/cuda_host /'

mps=""
if command -v nvidia-cuda-mps-control > /dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/hetccl-mps-pipe}
  export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/tmp/hetccl-mps-log}
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d; then
    mps=$(perf cuda,cuda g0,g1)
    echo "$mps" | sed 's/^/mps /'
    # The control daemon's log names the clients it served: the runs above went through it.
    echo "mps: $(grep -c 'NEW CLIENT' "$CUDA_MPS_LOG_DIRECTORY/control.log" 2> /dev/null) client connections"
    echo quit | nvidia-cuda-mps-control
  else
    echo "mps: nvidia-cuda-mps-control -d failed: no MPS run"
  fi
else
  echo "mps: no nvidia-cuda-mps-control on this machine: no MPS run"
fi

awk 'FNR == 1 {f++} f == 1 && NF {two[$1] = $2; order[++n] = $1} f == 2 && NF {host[$1] = $2} f == 3 && NF {mps[$1] = $2}
     END {for (i = 1; i <= n; ++i) {s = order[i]; m = (s in mps) ? mps[s] : "na"; h = (s in host) ? host[s] : "na";
            r = (m == "na" || m == 0) ? "na" : sprintf("%.2f", two[s] / m);
            printf "ratio gpu_small_allreduce %s two_contexts_us=%s mps_us=%s cuda_host_us=%s two_contexts/mps=%s\n",
                   s, two[s], m, h, r}}' \
  <(echo "$two" | times; echo) <(echo "$host" | times; echo) <(echo "$mps" | times; echo)
