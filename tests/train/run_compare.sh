#!/usr/bin/env bash
# The four training runs of docs/training on one GPU, then their comparison:
#   bash tests/train/run_compare.sh BUILD_DIR OUT_DIR
# (a) plain NCCL, one process; (b) two processes in groups g0,g1 through
# hetccl's libnccl.so.2 (LD_PRELOAD); (c) torch's gloo, two processes;
# (d) hetccl's native backend, a CUDA rank and a CPU rank. Needs hetccl_torch
# installed into BUILD_DIR/pysite (scripts/gpu-check.sh c10d does that).
# STEPS (default 200) and TRAIN_ARGS pass through to train_gpt.py; RUN_TIMEOUT_S
# (default 240) bounds each run; RUNS (default "a b c d") picks the runs.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: run_compare.sh BUILD_DIR OUT_DIR}
out=${2:?usage: run_compare.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
train=(python3 "$here/train_gpt.py" --steps "${STEPS:-200}" ${TRAIN_ARGS:-})
status=0
want=" ${RUNS:-a b c d} "  # which of the four to run (the others' CSVs may be in OUT_DIR already)
run() {  # name command...
  local name=$1 t0=$SECONDS
  shift
  [[ $want == *" ${name%%_*} "* ]] || return 0
  echo "--- $name: $*"
  timeout "${RUN_TIMEOUT_S:-240}" "$@" || { echo "--- $name FAILED"; status=1; }
  echo "--- $name: $((SECONDS - t0)) s"
}
run a_nccl_1proc "${train[@]}" --backend nccl --devices cuda --out "$out/a.csv"
run b_dropin_2groups env HETCCL_DROPIN_LIB="$build/dropin/libnccl.so.2" "$root/tools/hetccl-torch-run" \
  "${train[@]}" --backend nccl --devices cuda,cuda --groups g0,g1 --out "$out/b.csv"
run c_gloo_2proc "${train[@]}" --backend gloo --devices cuda,cuda --out "$out/c.csv"
run d_native_cuda_cpu env PYTHONPATH="$build/pysite${PYTHONPATH:+:$PYTHONPATH}" "${train[@]}" --backend hetccl \
  --devices cuda,host --threads 12 --out "$out/d.csv"
runs=()
for r in b c d; do [ -s "$out/$r.csv" ] && runs+=(--run "$r=$out/$r.csv"); done
ratio=()
[ -s "$out/b.csv" ] && [ -s "$out/c.csv" ] && ratio=(--ratio b/c)
python3 "$here/compare.py" --ref "a=$out/a.csv" "${runs[@]}" "${ratio[@]}" --csv "$out/losses.csv" \
  --png "$out/losses.png" --title "train_gpt.py, 200 steps: (a) NCCL 1 proc, (b) hetccl drop-in 2 groups, (c) gloo, (d) hetccl native CUDA+CPU" \
  || status=1
exit $status
