#!/usr/bin/env bash
# Installs the Debian packages hetccl's build, tests and benchmarks use, when
# they are missing, and any packages named as arguments (make perf-doc:
# python3-matplotlib). Run as root (or with sudo available). Idempotent.
set -euo pipefail
pkgs=(cmake make g++ pkg-config libgtest-dev openmpi-bin libopenmpi-dev iproute2 procps "$@")
# make fuzz: clang with the libFuzzer, ASan and UBSan runtimes (only recommended by clang-14).
pkgs+=(clang libclang-rt-14-dev)
# The source layout check (.clang-format, ctest style.SourcesAreFormatted).
pkgs+=(clang-format)
# HIP compile check of the device kernels (src/kernels): ROCm 5.2's hipcc with
# clang-15 and rocm-device-libs (pulled in as dependencies).
pkgs+=(hipcc libamdhip64-dev)
# hetccl_torch (python/) tests and the Gloo peer of the benchmarks: Debian's torch,
# its headers and pybind11 (the extension builds against them).
pkgs+=(python3-torch libtorch-dev pybind11-dev python3-setuptools)
# The pip package's test (torch_pip_package): a virtual environment over that
# torch, where pip builds a wheel (python3-wheel) of python/.
pkgs+=(python3-venv python3-wheel)
# The ucx transport: UCX's headers to build it, libucp to run it.
pkgs+=(libucx-dev)
# The ofi transport: libfabric's headers to build it, libfabric1 to run it, and
# fi_info (libfabric-bin) to list the providers a machine offers.
pkgs+=(libfabric-dev libfabric-bin)
# The metrics endpoint: civetweb's header to build it, libcivetweb1 to run
# it; its tests drive a real Prometheus server and headless chromium.
pkgs+=(libcivetweb-dev prometheus chromium)
# Encrypted links: OpenSSL's headers to build, libssl3's libcrypto to run; the
# wire-capture test reads the loopback with tcpdump.
pkgs+=(libssl-dev tcpdump)
# hetccl-plan reads its cluster files with yaml-cpp.
pkgs+=(libyaml-cpp-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
