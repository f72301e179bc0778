#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, moves it (both package files
# find the prefix from where they lie), and builds and runs a small C program
# against it twice: through find_package(hetccl) (the exported target
# hetccl::hetccl) and through pkg-config.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/staged" >/dev/null
mv "$work/staged" "$work/prefix"
prefix=$work/prefix
for f in include/hetccl/hetccl.h bin/hetccl-info bin/hetccl-perf bin/hetccl-torch-run bin/hetccl-doctor bin/hetccl-trace; do
  [ -e "$prefix/$f" ] || { echo "check_install: $f was not installed" >&2; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name 'libhetccl.so.0' | head -1)")
[ -n "$libdir" ] || { echo "check_install: libhetccl.so.0 was not installed" >&2; exit 1; }
[ -e "$libdir/hetccl-dropin/libnccl.so.2" ] || { echo "check_install: the NCCL drop-in was not installed" >&2; exit 1; }
[ -e "$libdir/libhetccl-emu.so" ] || { echo "check_install: the emulated GPU was not installed beside libhetccl" >&2; exit 1; }
# The installed tools find the installed library (their rpath), not the build tree's.
env -u LD_LIBRARY_PATH "$prefix/bin/hetccl-info" >/dev/null
# So do the plugins that need it (a drop-in, which is not libhetccl, loads them).
for f in "$libdir"/libhetccl-emu-*.so; do
  if env -u LD_LIBRARY_PATH ldd "$f" | grep -q 'not found'; then
    echo "check_install: $f does not find what it needs in $libdir:" >&2
    env -u LD_LIBRARY_PATH ldd "$f" >&2
    exit 1
  fi
done
# The installed doctor finds its node checks (share/hetccl/doctor) and the
# installed hetccl-info; exit 0 or 1 is the node's state, 2 would be its own failure.
rc=0
doctor_out=$(cd "$work" && env -u LD_LIBRARY_PATH -u HETCCL_TRANSPORT PATH=/usr/bin:/bin "$prefix/bin/hetccl-doctor" --node) || rc=$?
if [ "$rc" -gt 1 ] || ! grep -q 'transport-choice  intra -> shm' <<<"$doctor_out" || grep -q 'hetccl-info not found' <<<"$doctor_out"; then
  echo "check_install: the installed hetccl-doctor --node exited $rc:" >&2
  echo "$doctor_out" >&2
  exit 1
fi

# The CMake package: hetccl::hetccl exported by install(EXPORT), its include
# directory the moved prefix's (never the source or build tree).
pkgdir="$libdir/cmake/hetccl"
[ -e "$pkgdir/hetcclTargets.cmake" ] || { echo "check_install: hetcclTargets.cmake was not installed" >&2; exit 1; }
if grep -rqF -e "$(cd "$src" && pwd)" -e "$(cd "$build" && pwd)" "$pkgdir"; then
  echo "check_install: the CMake package names the source or build tree:" >&2
  grep -rnF -e "$(cd "$src" && pwd)" -e "$(cd "$build" && pwd)" "$pkgdir" >&2
  exit 1
fi
cmake -S "$src/tests/install/consumer" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cm" >/dev/null
grep -qF "$prefix/include" "$work/cm/CMakeFiles/consumer.dir/flags.make" ||
  { echo "check_install: the consumer was not compiled with $prefix/include" >&2; exit 1; }
"$work/cm/consumer"

flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs hetccl)
cc "$src/tests/install/consumer/consumer.c" $flags -o "$work/pc_consumer"
LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"
echo "check_install: ok ($prefix: find_package and pkg-config)"
