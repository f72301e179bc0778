#!/bin/bash
# Fault 3: a network partition between two "hosts".
#
# Two network namespaces joined by one veth pair (10.123.77.0/24, nothing
# else: no route, bridge or address outside them), ranks 0-1 in namespace A
# and 2-3 in B, launched torchrun-style (RANK, WORLD_SIZE, MASTER_ADDR = A's
# address, MASTER_PORT) into hetcclCommInitFromEnv with HETCCL_TRANSPORT=tcp,
# HETCCL_SOCKET_IFNAME=<the namespace's veth>, HETCCL_TIMEOUT_S=5, groups
# 0-1:a,2-3:b. Once every rank is looping over AllReduce, A's veth is set
# down. Every rank must then fail its AllReduce with a remote or system error
# within HETCCL_TIMEOUT_S + 5 s of the cut, naming the operation and a peer,
# abort and exit 0.
#
# With "ofi" as second argument the ranks run HETCCL_TRANSPORT=ofi on
# libfabric's tcp provider bound to the namespace's veth (FI_PROVIDER=tcp,
# FI_TCP_IFACE) instead.
#
# usage: netns_partition.sh <path of fault_netns_rank> [tcp|ofi]
# Exit 0: passed; 1: failed; 77: skipped (not root, no `ip`, or network
# namespaces cannot be created here: the reason is printed).
set -u
RANK_BIN=${1:?usage: $0 <fault_netns_rank> [tcp|ofi]}
TRANSPORT=${2:-tcp}
TIMEOUT_S=5
LIMIT_S=$((TIMEOUT_S + 5))
SKIP=77

skip() { echo "SKIP: $*"; exit $SKIP; }
[ "$(id -u)" = 0 ] || skip "not root: creating network namespaces needs CAP_SYS_ADMIN"
command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is missing"
[ -x "$RANK_BIN" ] || { echo "FAIL: $RANK_BIN is not executable"; exit 1; }

NS_A="hcf-a-$$"
NS_B="hcf-b-$$"
IF_A=hcfa
IF_B=hcfb
ADDR_A=10.123.77.1
ADDR_B=10.123.77.2
PORT=29500  # the namespaces are new: every port in them is free
WORK=$(mktemp -d /tmp/hetccl-netns.XXXXXX)
PIDS=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  ip netns del "$NS_A" 2>/dev/null
  ip netns del "$NS_B" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! ip netns add "$NS_A" 2>"$WORK/err"; then
  skip "cannot create a network namespace: $(cat "$WORK/err")"
fi
ip netns add "$NS_B" || { echo "FAIL: ip netns add $NS_B"; exit 1; }
set -e
ip -n "$NS_A" link add "$IF_A" type veth peer name "$IF_B" netns "$NS_B"
ip -n "$NS_A" addr add "$ADDR_A/24" dev "$IF_A"
ip -n "$NS_B" addr add "$ADDR_B/24" dev "$IF_B"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "$IF_A" up
ip -n "$NS_B" link set "$IF_B" up
set +e
# libfabric's tcp provider lists an interface only once it is running
# (carrier on both ends); before that FI_TCP_IFACE falls back to another.
for i in $(seq 50); do
  ip -n "$NS_A" link show "$IF_A" | grep -q LOWER_UP && ip -n "$NS_B" link show "$IF_B" | grep -q LOWER_UP && break
  sleep 0.1
done
echo "transport $TRANSPORT; namespaces $NS_A ($IF_A $ADDR_A, ranks 0-1) and $NS_B ($IF_B $ADDR_B, ranks 2-3)"

for rank in 0 1 2 3; do
  if [ "$rank" -lt 2 ]; then ns=$NS_A; ifname=$IF_A; else ns=$NS_B; ifname=$IF_B; fi
  ip netns exec "$ns" env RANK=$rank LOCAL_RANK=$((rank % 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR=$ADDR_A MASTER_PORT=$PORT HETCCL_TRANSPORT=$TRANSPORT HETCCL_SOCKET_IFNAME=$ifname \
    FI_PROVIDER=tcp FI_TCP_IFACE=$ifname \
    HETCCL_TIMEOUT_S=$TIMEOUT_S HETCCL_GROUP_MAP=0-1:a,2-3:b \
    "$RANK_BIN" --max-seconds 60 >"$WORK/rank$rank.out" 2>"$WORK/rank$rank.err" &
  PIDS+=($!)
done

show() {
  for rank in 0 1 2 3; do
    echo "--- rank $rank stdout:"; tail -n 5 "$WORK/rank$rank.out"
    echo "--- rank $rank stderr:"; tail -n 5 "$WORK/rank$rank.err"
  done
}

# All four in steady state: 20 AllReduces done on each.
deadline=$((SECONDS + 40))
while :; do
  ready=0
  for rank in 0 1 2 3; do grep -q '^ITER 20 ' "$WORK/rank$rank.out" && ready=$((ready + 1)); done
  [ $ready -eq 4 ] && break
  for i in 0 1 2 3; do
    if ! kill -0 "${PIDS[$i]}" 2>/dev/null; then echo "FAIL: rank $i ended before the partition"; show; exit 1; fi
  done
  if [ $SECONDS -ge $deadline ]; then echo "FAIL: the ranks never reached 20 AllReduces"; show; exit 1; fi
  sleep 0.1
done

T_CUT=$("$RANK_BIN" --now)
ip -n "$NS_A" link set "$IF_A" down
echo "partition: $IF_A set down at t=$T_CUT"

# Every rank must end by itself; after LIMIT_S + 10 s it counts as a hang.
deadline=$((SECONDS + LIMIT_S + 10))
codes=()
for i in 0 1 2 3; do
  while kill -0 "${PIDS[$i]}" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if kill -0 "${PIDS[$i]}" 2>/dev/null; then codes[$i]=hung; kill -9 "${PIDS[$i]}"; wait "${PIDS[$i]}" 2>/dev/null
  else wait "${PIDS[$i]}"; codes[$i]=$?; fi
done
PIDS=()

fail=0
for rank in 0 1 2 3; do
  out="$WORK/rank$rank.out"
  line=$(grep '^FAIL ' "$out" | head -n 1)
  iters=$(grep '^ITER ' "$out" | tail -n 1 | cut -d' ' -f2)
  if [ "${codes[$rank]}" != 0 ]; then
    echo "FAIL: rank $rank exit status ${codes[$rank]}"; fail=1
  fi
  if [ -z "$line" ]; then echo "FAIL: rank $rank reported no failed AllReduce"; fail=1; continue; fi
  read -r _ it code t text <<<"$line"
  after=$(awk -v a="$t" -v b="$T_CUT" 'BEGIN { printf "%.3f", a - b }')
  echo "rank $rank: AllReduce #$it (after $iters done) returned $code ${after} s after the cut: $text"
  if [ "$code" != 2 ] && [ "$code" != 6 ]; then echo "FAIL: rank $rank: code $code is not a system or remote error"; fail=1; fi
  if ! awk -v x="$after" -v lim="$LIMIT_S" 'BEGIN { exit !(x >= 0 && x <= lim) }'; then
    echo "FAIL: rank $rank: the error came $after s after the cut (limit $LIMIT_S s)"; fail=1
  fi
  case "$text" in *hetcclAllReduce*) ;; *) echo "FAIL: rank $rank: the error does not name the operation"; fail=1;; esac
  peer=$(grep -o 'rank [0-9]*' <<<"$text" | grep -vx "rank $rank" | head -n 1)
  [ -n "$peer" ] || { echo "FAIL: rank $rank: the error names no peer rank"; fail=1; }
  grep -q '^WRONG ' "$out" && { echo "FAIL: rank $rank: wrong result before the cut"; fail=1; }
  abort=$(grep '^ABORT ' "$out")
  [ "$(cut -d' ' -f2 <<<"$abort")" = 0 ] || { echo "FAIL: rank $rank: abort: $abort"; fail=1; }
done
if [ $fail -ne 0 ]; then show; echo "FAILED"; exit 1; fi
echo "PASSED: all 4 ranks failed within $LIMIT_S s of the partition and exited"
exit 0
