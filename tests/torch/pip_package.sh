#!/usr/bin/env bash
# The pip package as a PyTorch user gets it (docs/install.md#pip): a virtual
# environment over PYTHON's torch, `pip install --no-build-isolation --no-deps
# --no-index ./python` against BUILD_DIR (HETCCL_HOME: libhetccl is not
# rebuilt), then, from a scratch folder with a clean environment (no HETCCL_*
# variable, nothing of the checkout or the build tree on any path):
# hetccl_torch imports, a 2-process job on the "hetccl" backend, and
# `hetccl-torch-run python ...` preloading the package's drop-in, which finds
# its plugins in the package (pip_package_check.py says what each step shows).
# Usage: pip_package.sh PYTHON BUILD_DIR SOURCE_DIR
set -euo pipefail
py=$1
build=$(cd "$2" && pwd)
src=$(cd "$3" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "pip_package: $*" >&2; exit 1; }
start=$SECONDS

"$py" -m venv --system-site-packages "$work/venv" || fail "cannot make a virtual environment (Debian: python3-venv)"
venv=$work/venv
if ! HETCCL_HOME=$build PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/python" -m pip install --no-index \
     --no-build-isolation --no-deps "$src/python" > "$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  fail "pip install failed"
fi
echo "pip_package: installed in $((SECONDS - start)) s"

# What the package holds: the extension, libhetccl.so.0, every plugin the
# build made beside libhetccl, both drop-ins, and the console command; no
# RUNPATH into the build tree.
pkg=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')/hetccl_torch
want=(lib/libhetccl.so.0 lib/hetccl-dropin/libnccl.so.2 lib/hetccl-dropin/librccl.so.1)
for p in "$build"/libhetccl-*.so; do want+=("lib/$(basename "$p")"); done
for f in "${want[@]}"; do
  [ -f "$pkg/$f" ] || fail "the package has no $f"
done
ls "$pkg"/_C*.so > /dev/null || fail "the package has no extension"
[ -x "$venv/bin/hetccl-torch-run" ] || fail "no hetccl-torch-run in $venv/bin"
for f in "$pkg"/_C*.so "$pkg"/lib/*.so* "$pkg"/lib/hetccl-dropin/*; do
  if readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -qF -e "$build" -e "$src"; then
    fail "$f: $(readelf -d "$f" | grep -E 'R(UN)?PATH')"
  fi
done
echo "pip_package: $pkg holds $(cd "$pkg" && find . -name '*.so*' | sort | tr '\n' ' ')"

# From here on: the scratch folder, a clean environment with the virtual
# environment first on PATH (as `activate` makes it), nothing else.
cp "$src/tests/torch/pip_package_check.py" "$work/check.py"
cd "$work"
run() { timeout 180 env -i HOME="$work" PATH="$venv/bin:/usr/bin:/bin" LANG=C.UTF-8 "$@"; }
run python check.py import "$pkg" "$src" "$build"
run python check.py job "$pkg" "$src" "$build"
run hetccl-torch-run python check.py dropin "$pkg" "$src" "$build" one_group
run hetccl-torch-run python check.py dropin "$pkg" "$src" "$build" two_groups
set +e
run hetccl-torch-run 2> "$work/usage"
rc=$?
set -e
[ $rc -eq 2 ] && grep -q usage "$work/usage" || fail "hetccl-torch-run without a command: exit $rc, $(cat "$work/usage")"
echo "pip_package: ok in $((SECONDS - start)) s"
