#!/usr/bin/env bash
# Every tracked C and C++ source is laid out as .clang-format says:
#   bash tests/style/check_format.sh REPO
# Lists the files that differ (with `clang-format -i FILE` to fix them) and
# fails; exits 77 (skipped) where clang-format is not installed.
set -uo pipefail
repo=${1:-.}
cd "$repo" || exit 2
command -v clang-format > /dev/null || { echo "clang-format is not installed: skipped"; exit 77; }
bad=()
while IFS= read -r f; do
  clang-format --dry-run --Werror "$f" > /dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null)
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted (clang-format -i FILE): %s\n' "${bad[@]}"
  exit 1
fi
echo "$(git ls-files '*.c' '*.cc' '*.h' '*.cu' '*.cuh' | wc -l) sources formatted as .clang-format says ($(clang-format --version))"
