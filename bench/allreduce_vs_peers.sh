#!/usr/bin/env bash
# hetccl AllReduce against Open MPI and Gloo, measured one after another in one
# run, with the same ranks, sizes, iteration counts and data type (float32 sum).
# Prints busbw ratios per size; see bench/README.md for how to read them.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/allreduce_vs_peers.sh [--np 4] [--groups a,a,b,b] [-b 8] [-e 64M] [-f 8]
                                   [-n iters] [-w warmup] [-x 4M,64M] [-o OUT_DIR]

  --np N        ranks (local processes) for every library            (default 4)
  --groups G    hetccl-perf --groups, one label per rank    (default a,a,b,b if N=4)
  -b, -e, -f    sizes in bytes: b, b*f, b*f^2, ... <= e, plus e itself
                (K/M/G suffixes are powers of 1024)          (default 8, 64M, 8)
  -x LIST       extra sizes, kept when within [b, e]         (default 4M,64M)
  -n ITERS      timed calls per size for small sizes; fewer for big ones (default 20)
  -w WARMUP     untimed calls per size for small sizes; fewer for big ones (default 5)
  -o DIR        results folder (default $OUT_DIR, else /tmp/hetccl-bench)

environment: HETCCL_PERF (default <repo>/build/tools/hetccl-perf),
             GLOO_PYTHON (default /usr/bin/python3, the interpreter Debian's python3-torch is for)
EOF
}

die() { echo "allreduce_vs_peers: error: $*" >&2; exit 1; }

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")

NP=4
RANK_GROUPS=""
BEGIN=8
END=64M
FACTOR=8
ITERS=20
WARMUP=5
EXTRA=4M,64M
OUT_DIR=${OUT_DIR:-/tmp/hetccl-bench}
HETCCL_PERF=${HETCCL_PERF:-$REPO_DIR/build/tools/hetccl-perf}
GLOO_PYTHON=${GLOO_PYTHON:-/usr/bin/python3}

# Per size, timed calls are cut to about ITER_BYTES of data (never fewer than
# MIN_ITERS) and warmup calls to about ITER_BYTES/4: keeps a default run at a
# few minutes on a 2-core machine while small sizes get the full -n.
ITER_BYTES=$((1024 * 1024 * 1024))
MIN_ITERS=3

while (($#)); do
  case "$1" in
    --np) NP=${2:?}; shift 2 ;;
    --groups) RANK_GROUPS=${2:?}; shift 2 ;;
    -b) BEGIN=${2:?}; shift 2 ;;
    -e) END=${2:?}; shift 2 ;;
    -f) FACTOR=${2:?}; shift 2 ;;
    -n) ITERS=${2:?}; shift 2 ;;
    -w) WARMUP=${2:?}; shift 2 ;;
    -x) EXTRA=${2-}; shift 2 ;;
    -o) OUT_DIR=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

# "64M" -> 67108864 (K, M, G are powers of 1024, as in nccl-tests).
to_bytes() {
  local v=${1%[bB]}
  case "$v" in
    *[kK]) echo $((${v%?} * 1024)) ;;
    *[mM]) echo $((${v%?} * 1024 * 1024)) ;;
    *[gG]) echo $((${v%?} * 1024 * 1024 * 1024)) ;;
    *) echo $((v)) ;;
  esac
}
is_int() { [[ "$1" =~ ^[0-9]+$ ]]; }
for v in "$BEGIN" "$END" ${EXTRA//,/ }; do
  [[ "$v" =~ ^[0-9]+[kKmMgG]?[bB]?$ ]] || die "bad size '$v' (want e.g. 8, 4K, 64M)"
done
{ is_int "$NP" && ((NP >= 2)); } || die "--np must be an integer >= 2"
{ is_int "$FACTOR" && ((FACTOR >= 2)); } || die "-f must be an integer >= 2"
{ is_int "$ITERS" && ((ITERS >= 1)); } || die "-n must be an integer >= 1"
is_int "$WARMUP" || die "-w must be an integer >= 0"
BEGIN=$(to_bytes "$BEGIN")
END=$(to_bytes "$END")
((BEGIN >= 4 && END >= BEGIN)) || die "need 4 <= -b <= -e"
if [[ -z "$RANK_GROUPS" && "$NP" == 4 ]]; then RANK_GROUPS=a,a,b,b; fi
if [[ -n "$RANK_GROUPS" ]]; then
  IFS=, read -r -a _g <<<"$RANK_GROUPS"
  ((${#_g[@]} == NP)) || die "--groups '$RANK_GROUPS' has ${#_g[@]} labels for $NP ranks"
fi

# Sizes: whole float32 elements, sorted, no duplicates.
SIZES=()
for ((s = BEGIN; s <= END; s *= FACTOR)); do SIZES+=("$s"); done
SIZES+=("$END")
for x in ${EXTRA//,/ }; do
  x=$(to_bytes "$x")
  if ((x >= BEGIN && x <= END)); then SIZES+=("$x"); fi
done
mapfile -t SIZES < <(for s in "${SIZES[@]}"; do echo $((s / 4 * 4)); done | sort -n -u)

iters_for() { local i=$((ITER_BYTES / $1)); ((i < MIN_ITERS)) && i=$MIN_ITERS; ((i > ITERS)) && i=$ITERS; echo "$i"; }
warmup_for() { local w=$((ITER_BYTES / 4 / $1)); ((w < 1)) && w=1; ((w > WARMUP)) && w=$WARMUP; echo "$w"; }
SPEC=""  # BYTES:ITERS:WARMUP,... for the two peer programs
for s in "${SIZES[@]}"; do SPEC+="${SPEC:+,}$s:$(iters_for "$s"):$(warmup_for "$s")"; done

# --- what has to be there ---------------------------------------------------
[[ -x "$HETCCL_PERF" ]] || die "hetccl-perf not found at '$HETCCL_PERF'.
  Build it:  cmake -S $REPO_DIR -B $REPO_DIR/build && make -C $REPO_DIR/build hetccl-perf
  or point HETCCL_PERF at a built binary."

PACKAGES=(openmpi-bin libopenmpi-dev python3-torch gcc)
MISSING=()
for p in "${PACKAGES[@]}"; do
  # dpkg -s also succeeds for a removed package whose config files remain.
  dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed' || MISSING+=("$p")
done
if ((${#MISSING[@]})); then
  ((EUID == 0)) || die "missing Debian packages: ${MISSING[*]}; run as root (the script installs them) or: sudo apt-get install -y ${MISSING[*]}"
  echo "# installing ${MISSING[*]}"
  apt-get update || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${MISSING[@]}" || die "apt-get install ${MISSING[*]} failed"
fi
command -v mpicc >/dev/null || die "mpicc not on PATH (package libopenmpi-dev)"
command -v mpirun >/dev/null || die "mpirun not on PATH (package openmpi-bin)"
"$GLOO_PYTHON" -c 'import torch.distributed as d, sys; sys.exit(0 if d.is_available() and d.is_gloo_available() else 1)' \
  2>/dev/null || die "$GLOO_PYTHON cannot import torch.distributed with gloo (package python3-torch; set GLOO_PYTHON to the interpreter it is installed for)"

STAMP=$(date +%Y%m%d-%H%M%S)
RUN_DIR="$OUT_DIR/allreduce-$STAMP"
mkdir -p "$RUN_DIR" || die "cannot create $RUN_DIR"
BUILD_DIR=$(mktemp -d)
trap 'rm -rf "$BUILD_DIR"' EXIT
mpicc -O2 -o "$BUILD_DIR/mpi_allreduce" "$BENCH_DIR/mpi_allreduce.c" || die "mpicc could not build bench/mpi_allreduce.c"

echo "# allreduce float32 sum, $NP ranks${RANK_GROUPS:+ (hetccl groups $RANK_GROUPS)}, sizes ${SIZES[*]}"
echo "# per size BYTES:ITERS:WARMUP = $SPEC"
echo "# $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); results in $RUN_DIR"

elapsed() { echo $((SECONDS - $1))s; }

# --- 1. hetccl: one hetccl-perf run per size, so each gets the same iteration
# counts as the peers.
t=$SECONDS
echo "## hetccl ($HETCCL_PERF)"
HETCCL_JSONS=()
for s in "${SIZES[@]}"; do
  json="$RUN_DIR/hetccl-$s.json"
  cmd=("$HETCCL_PERF" --np "$NP" ${RANK_GROUPS:+--groups "$RANK_GROUPS"} -b "$s" -e "$s" -f 2
       -n "$(iters_for "$s")" -w "$(warmup_for "$s")" -c 0 --json "$json")
  echo "${cmd[*]}" >>"$RUN_DIR/hetccl.log"
  if ! "${cmd[@]}" >>"$RUN_DIR/hetccl.log" 2>&1; then
    tail -n 20 "$RUN_DIR/hetccl.log" >&2
    die "hetccl-perf failed at $s bytes: ${cmd[*]} (log: $RUN_DIR/hetccl.log)"
  fi
  [[ -s "$json" ]] || die "hetccl-perf wrote no JSON to $json (log: $RUN_DIR/hetccl.log)"
  HETCCL_JSONS+=("$json")
  echo "  $s bytes done"
done
echo "## hetccl done in $(elapsed $t) (output: $RUN_DIR/hetccl.log)"

# --- 2. Open MPI (shared-memory BTL; "plm isolated" launches locally without ssh).
t=$SECONDS
echo "## Open MPI"
if ! mpirun --allow-run-as-root --oversubscribe --bind-to none --mca plm isolated -np "$NP" \
    "$BUILD_DIR/mpi_allreduce" --sizes "$SPEC" --json "$RUN_DIR/openmpi.json" 2>&1 | tee "$RUN_DIR/openmpi.log"; then
  die "Open MPI run failed (log: $RUN_DIR/openmpi.log). In a container without ptrace rights, try OMPI_MCA_btl_vader_single_copy_mechanism=none"
fi
[[ -s "$RUN_DIR/openmpi.json" ]] || die "mpi_allreduce wrote no JSON (log: $RUN_DIR/openmpi.log)"
echo "## Open MPI done in $(elapsed $t)"

# --- 3. Gloo through torch.distributed, TCP over loopback.
t=$SECONDS
echo "## Gloo"
if ! "$GLOO_PYTHON" "$BENCH_DIR/gloo_allreduce.py" --np "$NP" --sizes "$SPEC" --json "$RUN_DIR/gloo.json" 2>&1 | tee "$RUN_DIR/gloo.log"; then
  die "Gloo run failed (log: $RUN_DIR/gloo.log)"
fi
[[ -s "$RUN_DIR/gloo.json" ]] || die "gloo_allreduce.py wrote no JSON (log: $RUN_DIR/gloo.log)"
echo "## Gloo done in $(elapsed $t)"

# --- report -----------------------------------------------------------------
echo
"$GLOO_PYTHON" "$BENCH_DIR/allreduce_report.py" --sizes "${SIZES[*]}" --out "$RUN_DIR/summary" \
  --meta "np=$NP" "groups=$RANK_GROUPS" "spec=$SPEC" "host=$(hostname)" "cores=$(nproc)" \
         "git=$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
         "hetccl_perf=$HETCCL_PERF" \
  --hetccl "${HETCCL_JSONS[@]}" --openmpi "$RUN_DIR/openmpi.json" --gloo "$RUN_DIR/gloo.json" \
  || die "report failed (raw results are in $RUN_DIR)"
ln -sfn "$RUN_DIR" "$OUT_DIR/latest"
