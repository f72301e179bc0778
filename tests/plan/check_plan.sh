#!/usr/bin/env bash
# hetccl-plan on the example cluster: a row per collective and size, the
# hetccl plan faster than the flat ring for large AllReduce across sites;
# a malformed file and an unknown vendor are refused naming what is wrong;
# docs/clusters.md's example file reads.
#   check_plan.sh HETCCL_PLAN SOURCE_DIR
set -euo pipefail
plan=$1 src=$2
out=$("$plan" "$src/bench/clusters/two-vendor-two-site.yaml")
echo "$out" | head -3
rows=$(echo "$out" | grep -cE '^(allreduce|allgather|reducescatter|broadcast) ')
[ "$rows" -eq 24 ] || { echo "check_plan: $rows rows, expected 24"; exit 1; }
echo "$out" | awk '$1 == "allreduce" && $2 == 1073741824 { if ($10 + 0 <= 1.5) { print "check_plan: the flat ring is not slower: " $0; exit 1 } }'
echo "$out" | grep -q "bandwidth plan from" || { echo "check_plan: no threshold line"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'vendors:\n  a: {device: false, intra_gbps: 10}\nhosts:\n  - {name: h, ranks: {b: 2}}\n' > "$tmp/unknown.yaml"
printf 'vendors: [\n' > "$tmp/broken.yaml"
for f in unknown broken; do
  if msg=$("$plan" "$tmp/$f.yaml" 2>&1); then echo "check_plan: $f.yaml was accepted"; exit 1; fi
  echo "refused $f.yaml: $msg"
  case $f in
    unknown) [[ $msg == *"vendor 'b' is not described"* ]] || { echo "check_plan: the vendor is not named"; exit 1; } ;;
    broken) [[ $msg == *"line 2"* ]] || { echo "check_plan: the line is not named"; exit 1; } ;;
  esac
done
# docs/clusters.md's example file is one hetccl-plan reads.
awk '/^## Planning a cluster/{on=1} on && /^```yaml/{p=1; next} p && /^```/{exit} p{print}' "$src/docs/clusters.md" > "$tmp/doc.yaml"
[ -s "$tmp/doc.yaml" ] || { echo "check_plan: no yaml example under docs/clusters.md's 'Planning a cluster'"; exit 1; }
"$plan" "$tmp/doc.yaml" > "$tmp/doc.out" || { echo "check_plan: docs/clusters.md's example is refused"; exit 1; }
grep -q "^allreduce " "$tmp/doc.out" || { echo "check_plan: docs/clusters.md's example gives no rows"; exit 1; }
echo "check_plan: passed"
