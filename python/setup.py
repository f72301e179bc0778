"""Builds hetccl_torch, hetccl's torch.distributed backend, on a machine with torch:

    python3 -m pip install --no-build-isolation ./python

It links the hetccl found at HETCCL_HOME (an install prefix, or a CMake build
tree holding libhetccl.so); without it, it builds libhetccl from this checkout
with CMake into build-python/. libhetccl.so.0 is copied next to the extension,
which finds it through RPATH $ORIGIN.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def find_hetccl():
    """(include dir, lib dir) of the hetccl to link against."""
    home = os.environ.get("HETCCL_HOME")
    if home:
        home = Path(home).resolve()
        for lib in (home / "lib", home):
            if (lib / "libhetccl.so").exists():
                inc = home / "include" if (home / "include/hetccl/hetccl.h").exists() else ROOT / "include"
                return inc, lib
        sys.exit(f"hetccl_torch: no libhetccl.so in HETCCL_HOME={home} or its lib/")
    if not (ROOT / "include/hetccl/hetccl.h").exists():
        sys.exit("hetccl_torch: set HETCCL_HOME to a hetccl install (this tree is not inside the hetccl checkout)")
    build = ROOT / "build-python"
    if not (build / "libhetccl.so").exists():
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                               "-DHETCCL_BUILD_TESTS=OFF"])
        subprocess.check_call(["cmake", "--build", str(build), "--target", "hetccl", "-j", str(os.cpu_count() or 2)])
    return ROOT / "include", build


INC, LIB = find_hetccl()


class Build(BuildExtension):
    def run(self):
        super().run()
        dest = HERE / "hetccl_torch" if self.inplace else Path(self.build_lib) / "hetccl_torch"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2((LIB / "libhetccl.so").resolve(), dest / "libhetccl.so.0")


def c10d_header_has(header, text):
    """Whether torch's c10d header declares `text` (virtuals differ between torch releases)."""
    from torch.utils.cpp_extension import include_paths
    for inc in include_paths():
        p = Path(inc) / "torch/csrc/distributed/c10d" / header
        if p.exists():
            return text in p.read_text()
    return False


compile_args = ["-O2", "-Wall", "-Wno-unused-parameter", "-Wno-deprecated-declarations"]
if int(torch.__version__.split(".")[0]) < 2:
    compile_args.append("-std=c++17")
if c10d_header_has("Backend.hpp", "supportsCoalescing"):
    compile_args.append("-DHETCCL_TORCH_SUPPORTS_COALESCING=1")

setup(
    name="hetccl-torch",
    version="0.1.0",
    description="hetccl as a torch.distributed backend (CPU and CUDA ranks in one group)",
    packages=["hetccl_torch", "hetccl_torch.balance"],
    package_data={"hetccl_torch": ["libhetccl.so.0"]},
    ext_modules=[
        CppExtension(
            "hetccl_torch._C",
            sources=[str(p.relative_to(HERE)) for p in sorted((HERE / "csrc").glob("*.cc"))],
            include_dirs=[str(INC), str(HERE / "csrc")],
            library_dirs=[str(LIB)],
            libraries=["hetccl"],
            extra_compile_args=compile_args,
            extra_link_args=["-Wl,-rpath,$ORIGIN"],
        )
    ],
    cmdclass={"build_ext": Build},
    python_requires=">=3.8",
    zip_safe=False,
)
