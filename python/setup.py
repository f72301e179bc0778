"""Builds hetccl_torch, hetccl's torch.distributed backend, on a machine with torch:

    python3 -m pip install --no-build-isolation ./python

The package is self-contained. hetccl_torch/lib/ holds what a hetccl install
holds in its lib/: libhetccl.so.0 (the extension finds it through RPATH
$ORIGIN/lib), the plugins libhetccl loads from beside itself (the device
kernels plugins where they were built, the emulated GPU's libraries) and the
NCCL-ABI drop-ins in lib/hetccl-dropin/ (libnccl.so.2, librccl.so.1; a
drop-in finds the plugins in the folder above its own). The console command
hetccl-torch-run (hetccl_torch_run.py) preloads that libnccl.so.2.

Which hetccl: HETCCL_HOME, an install prefix or a CMake build tree (not
rebuilt: build it first; the extension's build files then go to its
pip-build/ folder). Without it, libhetccl, the drop-ins and the plugins are
built from this checkout with CMake into build-python/ (tests off).
"""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# Built alongside libhetccl (src/emu, src/kernels), loaded from beside it.
OPTIONAL_TARGETS = ["nccl_dropin", "rccl_dropin", "hetccl-emu", "hetccl-emu-nccl", "hetccl-emu-kernels",
                    "hetccl-cuda-kernels", "hetccl-hip-kernels"]
DROPINS = ["libnccl.so.2", "librccl.so.1"]


def fail(msg):
    sys.exit(f"hetccl_torch: {msg}")


def build_checkout():
    """Builds libhetccl, its drop-ins and plugins from this checkout into build-python/."""
    if not (ROOT / "include/hetccl/hetccl.h").exists():
        fail("set HETCCL_HOME to a hetccl install or build tree (this tree is not inside the hetccl checkout)")
    build = ROOT / "build-python"
    if not (build / "CMakeCache.txt").exists():
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                               "-DHETCCL_BUILD_TESTS=OFF"])
    known = subprocess.run(["cmake", "--build", str(build), "--target", "help"], capture_output=True,
                           text=True).stdout.split()
    targets = ["hetccl"] + [t for t in OPTIONAL_TARGETS if t in known]
    subprocess.check_call(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2), "--target"] + targets)
    return build


def find_hetccl():
    """(include dir, folder of libhetccl and its plugins, folder of the drop-ins, the build tree or None)."""
    home = os.environ.get("HETCCL_HOME")
    home = Path(home).resolve() if home else build_checkout()
    if (home / "CMakeCache.txt").exists():  # a build tree: libhetccl at its top, the drop-ins in dropin/
        if not (home / "libhetccl.so").exists():
            fail(f"no libhetccl.so in the build tree {home} (build it: cmake --build {home})")
        source = ROOT
        for line in (home / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                source = Path(line.split("=", 1)[1])
        return source / "include", home, home / "dropin", home
    for lib in (home / "lib", home / "lib64", *sorted(home.glob("lib/*-linux-gnu"))):  # an install prefix
        if (lib / "libhetccl.so").exists():
            return home / "include", lib, lib / "hetccl-dropin", None
    fail(f"no libhetccl.so in HETCCL_HOME={home} (an install prefix's lib/, or a CMake build tree)")


INC, LIB, DROPIN_DIR, BUILD_TREE = find_hetccl()


def set_origin_rpath(files):
    """Points the RUNPATH of those that have one (a build tree's) at their own folder, as an install does.

    CMake edits the ELF files in place (file(READ_ELF), file(RPATH_CHANGE)): no patchelf needed.
    """
    script = ("foreach(f IN LISTS FILES)\n"
              "  unset(rp)\n  unset(r)\n"
              "  file(READ_ELF \"${f}\" RUNPATH rp RPATH r)\n"
              "  if(NOT rp)\n    set(rp \"${r}\")\n  endif()\n"
              "  string(REPLACE \";\" \":\" rp \"${rp}\")\n"  # READ_ELF gives the entry as a list
              "  if(rp AND NOT rp STREQUAL \"$ORIGIN\")\n"
              "    file(RPATH_CHANGE FILE \"${f}\" OLD_RPATH \"${rp}\" NEW_RPATH \"$ORIGIN\")\n"
              "  endif()\n"
              "endforeach()\n")
    with tempfile.NamedTemporaryFile("w", suffix=".cmake", delete=False) as f:
        f.write(script)
    try:
        subprocess.check_call(["cmake", "-DFILES=" + ";".join(str(p) for p in files), "-P", f.name],
                              stdout=subprocess.DEVNULL)
    finally:
        os.unlink(f.name)


def pack_hetccl(dest):
    """Copies libhetccl.so.0, its plugins and the drop-ins into dest (the package's lib/)."""
    shutil.rmtree(dest, ignore_errors=True)
    (dest / "hetccl-dropin").mkdir(parents=True)
    copied = [Path(shutil.copy2((LIB / "libhetccl.so").resolve(), dest / "libhetccl.so.0"))]
    for plugin in sorted(LIB.glob("libhetccl-*.so")):
        copied.append(Path(shutil.copy2(plugin.resolve(), dest / plugin.name)))
    for name in DROPINS:
        if (DROPIN_DIR / name).exists():
            copied.append(Path(shutil.copy2((DROPIN_DIR / name).resolve(), dest / "hetccl-dropin" / name)))
        else:
            print(f"hetccl_torch: warning: no {DROPIN_DIR / name}: the package has no drop-in {name}"
                  + (" (build the targets nccl_dropin and rccl_dropin)" if BUILD_TREE else ""), file=sys.stderr)
    for p in copied:
        p.chmod(0o755)  # an installed tree's files may be read-only; they are edited in place
    strip = shutil.which("strip")
    if strip:  # a RelWithDebInfo build's debug info is most of its size; the symbol tables stay
        subprocess.check_call([strip, "--strip-debug"] + [str(p) for p in copied])
    set_origin_rpath(copied)
    print("hetccl_torch: packed " + ", ".join(str(p.relative_to(dest)) for p in copied) + f" from {LIB}")


class Build(BuildExtension):
    def run(self):
        super().run()
        pkg = HERE / "hetccl_torch" if self.inplace else Path(self.build_lib) / "hetccl_torch"
        (pkg / "libhetccl.so.0").unlink(missing_ok=True)  # where it was before lib/: not into the wheel
        pack_hetccl(pkg / "lib")


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
    description="hetccl as a torch.distributed backend (CPU and CUDA ranks in one group), with its NCCL drop-in",
    packages=["hetccl_torch", "hetccl_torch.balance"],
    py_modules=["hetccl_torch_run"],
    entry_points={"console_scripts": ["hetccl-torch-run = hetccl_torch_run:main"]},
    ext_modules=[
        CppExtension(
            "hetccl_torch._C",
            sources=[str(p.relative_to(HERE)) for p in sorted((HERE / "csrc").glob("*.cc"))],
            include_dirs=[str(INC), str(HERE / "csrc")],
            library_dirs=[str(LIB)],
            libraries=["hetccl"],
            extra_compile_args=compile_args,
            extra_link_args=["-Wl,-rpath,$ORIGIN/lib"],
        )
    ],
    cmdclass={"build_ext": Build},
    # Against a build tree, pip's intermediate files go into it, not into this checkout.
    options={"build": {"build_base": str(BUILD_TREE / "pip-build")}} if BUILD_TREE else {},
    python_requires=">=3.8",
    zip_safe=False,
)
