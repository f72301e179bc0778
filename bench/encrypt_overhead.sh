#!/usr/bin/env bash
# What encrypted links cost: AllReduce (float) over tcp (TRANSPORT=ucx: the
# ucx transport, on UCX's own choice of transports; UCX_TLS narrows it) with 4 ranks in
# groups a,a,b,b (NP, GROUPS_LAYOUT and SITE_MAP override; PERF_ARGS adds
# hetccl-perf options, e.g. "--devices cuda,host,host,host"), plaintext vs HETCCL_ENCRYPT=cross-site
# with the groups on two sites (only border links encrypted) vs
# HETCCL_ENCRYPT=all, ROUNDS (default 3) rounds in alternating order in this
# one command, the best of each per size (64 MiB: LARGE_ITERS calls a run, default 5;
# ENC_MODES="cross-site" leaves out all). Also libcrypto's AES-256-GCM speed
# on this machine (openssl speed), which bounds what encryption can keep:
# every encrypted byte is sealed once and opened once on these same cores.
#   bash bench/encrypt_overhead.sh [BUILD_DIR] [JSON_OUT]
# Prints per size and mode:
#   ratio encrypt <mode> <bytes> plain_busbw=.. enc_busbw=.. enc/plain=.. plain_us=.. enc_us=.. added_us=..
set -euo pipefail
build=${1:-build}
json=${2:-}
rounds=${ROUNDS:-3}
np=${NP:-4}
groups=${GROUPS_LAYOUT:-a,a,b,b}
sites=${SITE_MAP:-0-$((np / 2 - 1)):site1,$((np / 2))-$((np - 1)):site2}
run() {  # mode bytes iters -> "time_us busbw"
  local env=(HETCCL_ENCRYPT=off)
  case $1 in
    cross-site) env=(HETCCL_ENCRYPT=cross-site HETCCL_SITE_MAP="$sites") ;;
    all) env=(HETCCL_ENCRYPT=all) ;;
  esac
  env "${env[@]}" "$build/tools/hetccl-perf" --np "$np" --groups "$groups" --transport "${TRANSPORT:-tcp}" -o allreduce -d float \
    -b "$2" -e "$2" -n "$3" -w $(( $3 / 5 + 1 )) -c 0 ${PERF_ARGS:-} | awk '$1 ~ /^[0-9]+$/ {print $6, $8}'
}
enc=${ENC_MODES:-cross-site all}  # the encrypted modes measured (each against off)
declare -A best_t best_bw
for size in 8 67108864; do
  iters=$([ "$size" -gt 1000000 ] && echo "${LARGE_ITERS:-5}" || echo 2000)
  for i in $(seq "$rounds"); do
    modes=(off $enc)
    [ $((i % 2)) -eq 0 ] && modes=($(printf '%s\n' $enc | tac) off)
    for m in "${modes[@]}"; do
      read -r t bw < <(run "$m" "$size" "$iters")
      k="$m/$size"
      if [ -z "${best_t[$k]:-}" ] || awk "BEGIN{exit !($t < ${best_t[$k]})}"; then best_t[$k]=$t; best_bw[$k]=$bw; fi
    done
  done
done
aes=$(openssl speed -evp aes-256-gcm -seconds 1 2>/dev/null | awk '/^AES-256-GCM/ {print $NF}' | tr -d k)
out=""
for size in 8 67108864; do
  for m in $enc; do
    line=$(awk -v m="$m" -v s="$size" -v pt="${best_t[off/$size]}" -v et="${best_t[$m/$size]}" \
      -v pb="${best_bw[off/$size]}" -v eb="${best_bw[$m/$size]}" 'BEGIN {
      printf "ratio encrypt %s %s plain_busbw=%.3f enc_busbw=%.3f enc/plain=%.3f plain_us=%.1f enc_us=%.1f added_us=%.1f\n",
             m, s, pb, eb, pt / et, pt, et, et - pt }')
    echo "$line"
    out+="$line"$'\n'
  done
done
[ -n "$aes" ] && echo "libcrypto AES-256-GCM, one core, 16 KiB blocks: $(awk -v k="$aes" 'BEGIN{printf "%.2f", k * 1000 / 1e9}') GB/s ($(nproc) cores here)"
if [ -n "$json" ]; then
  /usr/bin/python3 - "$json" "$np" "$groups" "${aes:-0}" <<PY
import json, sys
rows = []
for line in """$out""".strip().splitlines():
    f = line.split()
    kv = dict(x.split("=") for x in f[4:])
    rows.append({"mode": f[2], "bytes": int(f[3]), **{k: float(v) for k, v in kv.items()}})
json.dump({"np": int(sys.argv[2]), "groups": sys.argv[3], "aes_gcm_kBps_16k": float(sys.argv[4]), "rows": rows},
          open(sys.argv[1], "w"), indent=1)
PY
fi
