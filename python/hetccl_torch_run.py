"""hetccl-torch-run: runs a command with hetccl's libnccl.so.2 in place of NCCL.

    hetccl-torch-run torchrun --nproc-per-node 8 train.py

The pip package's console command, the twin of tools/hetccl-torch-run (source
builds and `cmake --install` trees). The drop-in is the one the installed
hetccl_torch package holds (hetccl_torch/lib/hetccl-dropin/libnccl.so.2),
found without importing the package or torch; HETCCL_DROPIN_LIB names
another. It goes first in LD_PRELOAD, which torchrun's workers inherit
(PyTorch's wheel finds libnccl.so.2 through an RPATH that LD_LIBRARY_PATH
cannot override); NCCL_NVLS_ENABLE defaults to 0; then the command replaces
this process. The drop-in drives the real NCCL (found beside PyTorch's CUDA
runtime, or HETCCL_NCCL_LIB) inside each GPU group and finds hetccl's
plugins in the package's lib/ folder.
"""
import importlib.util
import os
import sys


def dropin_path():
    """hetccl's libnccl.so.2: HETCCL_DROPIN_LIB, else the installed package's, else None."""
    given = os.environ.get("HETCCL_DROPIN_LIB")
    if given:
        return os.path.abspath(given)
    spec = importlib.util.find_spec("hetccl_torch")  # finds the package without running its __init__
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "lib", "hetccl-dropin", "libnccl.so.2")
        if os.path.exists(path):
            return os.path.abspath(path)
    return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    lib = dropin_path()
    if not lib or not os.path.exists(lib):
        print("hetccl-torch-run: cannot find hetccl's libnccl.so.2 (reinstall hetccl_torch, or set "
              "HETCCL_DROPIN_LIB)", file=sys.stderr)
        return 2
    if not argv:
        print("usage: hetccl-torch-run COMMAND [ARGS...]", file=sys.stderr)
        return 2
    preload = os.environ.get("LD_PRELOAD")
    os.environ["LD_PRELOAD"] = lib + (":" + preload if preload else "")
    os.environ["NCCL_NVLS_ENABLE"] = os.environ.get("NCCL_NVLS_ENABLE") or "0"
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print(f"hetccl-torch-run: {argv[0]}: {e.strerror}", file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main())
