#!/usr/bin/env bash
# The README's settings table is the registry's own (hetccl-info --markdown):
# fails, showing the difference, when one changed without the other.
#   check_readme_settings.sh HETCCL_INFO README.md
set -euo pipefail
info=$1 readme=$2
want=$(mktemp)
"$info" --markdown > "$want"
got=$(mktemp)
# The table: from its header line to the first line that is not a table row.
awk '/^\| variable \| default \| allowed \| meaning \|$/ {on=1} on && !/^\|/ {exit} on {print}' "$readme" > "$got"
if ! diff -u "$got" "$want"; then
  echo "README.md's settings table differs from the registry: replace it with the output of" >&2
  echo "  hetccl-info --markdown" >&2
  exit 1
fi
echo "README settings table matches the registry ($(($(wc -l < "$want") - 2)) settings)"
