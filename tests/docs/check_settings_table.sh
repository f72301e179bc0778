#!/usr/bin/env bash
# docs/settings.md's table is the registry's own (hetccl-info --markdown):
# fails, showing the difference, when one changed without the other.
#   check_settings_table.sh HETCCL_INFO docs/settings.md
set -euo pipefail
info=$1 page=$2
want=$(mktemp)
got=$(mktemp)
trap 'rm -f "$want" "$got"' EXIT
"$info" --markdown > "$want"
# The table: from its header line to the first line that is not a table row.
awk '/^\| variable \| default \| allowed \| meaning \|$/ {on=1} on && !/^\|/ {exit} on {print}' "$page" > "$got"
if ! diff -u "$got" "$want"; then
  echo "$page's settings table differs from the registry: replace it with the output of" >&2
  echo "  hetccl-info --markdown" >&2
  exit 1
fi
echo "$page's settings table matches the registry ($(($(wc -l < "$want") - 2)) settings)"
