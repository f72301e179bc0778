#!/usr/bin/env bash
# train_gpt.py on CPU ranks, small: one process (gloo) as the reference, two
# ranks on hetccl's native backend in two groups, two ranks on gloo; the
# losses must agree within 1e-3 at every step.
#   bash tests/train/run_cpu.sh PYTHON PYSITE OUT_DIR
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${1:?usage: run_cpu.sh PYTHON PYSITE OUT_DIR}
site=${2:?}
out=${3:?}
mkdir -p "$out"
small=(--steps 12 --batch 8 --seq 32 --dim 64 --layers 2 --heads 2 --threads 1)
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
"$py" "$here/train_gpt.py" --backend gloo --devices host "${small[@]}" --out "$out/ref.csv"
"$py" "$here/train_gpt.py" --backend hetccl --devices host,host --groups a,b "${small[@]}" --out "$out/hetccl.csv"
"$py" "$here/train_gpt.py" --backend gloo --devices host,host "${small[@]}" --out "$out/gloo.csv"
"$py" "$here/compare.py" --ref "ref=$out/ref.csv" --run "hetccl=$out/hetccl.csv" --run "gloo=$out/gloo.csv" \
  --ratio hetccl/gloo --csv "$out/losses.csv"
