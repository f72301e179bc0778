"""Checks of the installed pip package, run by pip_package.sh from a scratch folder in a virtual environment.

    check.py import PKG SRC BUILD       hetccl_torch imports, with libhetccl from PKG/lib
    check.py job PKG SRC BUILD          a 2-process job on the "hetccl" backend: CPU ranks in groups a and b
    check.py dropin PKG SRC BUILD LAYOUT
        under hetccl-torch-run: the package's libnccl.so.2 is preloaded; torch's nccl backend without a GPU
        fails with an exception (Debian's torch has no NCCL at all); the drop-in itself, called through its
        NCCL ABI (ctypes), runs an AllReduce on two emulated GPUs (LAYOUT one_group: straight through to the
        emulated GPU's group library; two_groups: hetccl crosses the groups with the emulated kernels), which
        shows it finds its plugins in the package
PKG is the installed hetccl_torch folder; nothing loaded may come from SRC (the checkout) or BUILD.
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import threading


def fail(msg):
    sys.exit(f"pip_package_check: {msg}")


def mapped():
    """The files this process maps whose names say hetccl or nccl."""
    with open("/proc/self/maps") as f:
        names = {line.split()[-1] for line in f if "/" in line}
    return sorted(n for n in names if "hetccl" in n or "nccl" in n)


def check_nothing_from(src, build, own=()):
    """Neither the checkout nor the build tree on a path or loaded; no HETCCL_* variable but the job's own."""
    for where in (src, build):
        for p in sys.path + os.environ.get("LD_LIBRARY_PATH", "").split(":"):
            if p and os.path.realpath(p).startswith(where + "/"):
                fail(f"{p} (of {where}) is on a path")
        for m in mapped():
            if m.startswith(where + "/"):
                fail(f"{m} is loaded from {where}")
    leaked = [k for k in os.environ if k.startswith("HETCCL_") and k not in own]
    if leaked:
        fail(f"HETCCL_* variables set: {leaked}")


def check_import(pkg, src, build):
    import hetccl_torch
    if os.path.dirname(os.path.realpath(hetccl_torch.__file__)) != pkg:
        fail(f"hetccl_torch imported from {hetccl_torch.__file__}, not {pkg}")
    lib = [m for m in mapped() if os.path.basename(m).startswith("libhetccl.so")]
    if lib != [os.path.join(pkg, "lib", "libhetccl.so.0")]:
        fail(f"libhetccl loaded from {lib}, not {pkg}/lib")
    check_nothing_from(src, build)
    print(f"import: hetccl_torch (hetccl {hetccl_torch.hetccl_version()}) with {lib[0]}")


def job_rank(rank, store, pkg, src, build):
    import torch
    import torch.distributed as dist
    import hetccl_torch  # noqa: F401 (registers the backend)
    os.environ["HETCCL_GROUP"] = "ab"[rank]  # the job's layout: one CPU rank in each group
    dist.init_process_group("hetccl", init_method=f"file://{store}", rank=rank, world_size=2)
    x = torch.arange(100000, dtype=torch.float32) * (rank + 1)
    dist.all_reduce(x)
    if not torch.equal(x, torch.arange(100000, dtype=torch.float32) * 3):
        fail(f"rank {rank}: the float sum is wrong (first {x[:4].tolist()})")
    y = torch.tensor([rank * 7, -rank], dtype=torch.int64)
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    if y.tolist() != [7, 0]:
        fail(f"rank {rank}: the int64 max is {y.tolist()}")
    dist.barrier()
    check_nothing_from(src, build, own=("HETCCL_GROUP",))
    lib = [m for m in mapped() if os.path.basename(m).startswith("libhetccl.so")]
    if lib != [os.path.join(pkg, "lib", "libhetccl.so.0")]:
        fail(f"rank {rank}: libhetccl loaded from {lib}")
    dist.destroy_process_group()


def check_job(pkg, src, build):
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "store")
        ranks = [subprocess.Popen([sys.executable, __file__, "rank", pkg, src, build, str(r), store]) for r in range(2)]
        codes = []
        for p in ranks:
            try:
                codes.append(p.wait(timeout=120))
            except subprocess.TimeoutExpired:
                for q in ranks:
                    q.kill()
                fail("the 2-rank job did not finish in 120 s")
    if codes != [0, 0]:
        fail(f"the 2-rank job's ranks exited {codes}")
    print("job: 2 CPU ranks in groups a and b on the hetccl backend: float32 sum and int64 max all_reduce right")


def check_torch_nccl():
    """torch's nccl backend on a machine without a GPU: an exception, no crash."""
    import torch
    import torch.distributed as dist
    with tempfile.TemporaryDirectory() as d:
        try:
            dist.init_process_group("nccl", init_method=f"file://{d}/store", rank=0, world_size=1)
            dist.all_reduce(torch.ones(4))
        except Exception as e:  # noqa: BLE001 (any exception is the expected outcome; a crash is not)
            what = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        else:
            fail("torch's nccl backend ran an all_reduce of a CPU tensor without a GPU")
    has = "has NCCL" if dist.is_nccl_available() else "has no NCCL"
    print(f"dropin: torch {torch.__version__} ({has}, cuda available: {torch.cuda.is_available()}): "
          f"the nccl backend raises {what}")


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check_dropin_emu(pkg, layout):
    os.environ["HETCCL_DEVICE"] = "emu"  # the job's settings (this process's own): emulated GPU ranks
    if layout == "two_groups":
        os.environ["HETCCL_GROUP_MAP"] = "0:a,1:b"
    nccl = ctypes.CDLL(None)  # the global lookup: the preloaded drop-in first
    emu = ctypes.CDLL(os.path.join(pkg, "lib", "libhetccl-emu.so"))  # device memory for the buffers
    nccl.ncclGetLastError.restype = ctypes.c_char_p
    version = ctypes.c_int()
    if nccl.ncclGetVersion(ctypes.byref(version)) != 0 or version.value < 20000:
        fail(f"ncclGetVersion: {version.value}")
    uid = UniqueId()
    if nccl.ncclGetUniqueId(ctypes.byref(uid)) != 0:
        fail("ncclGetUniqueId failed")
    n, count = 2, 1 << 16
    errors = [None] * n

    def rank(r):
        try:
            if emu.emuSetDevice(r) != 0:
                raise RuntimeError("emuSetDevice")
            comm = ctypes.c_void_p()
            if nccl.ncclCommInitRank(ctypes.byref(comm), n, uid, r) != 0:
                raise RuntimeError(f"ncclCommInitRank: {nccl.ncclGetLastError(None)}")
            buf = ctypes.c_void_p()
            if emu.emuMalloc(ctypes.byref(buf), count * 4) != 0:
                raise RuntimeError("emuMalloc")
            host = (ctypes.c_float * count)(*([float(r + 1)] * count))
            emu.emuMemcpy(buf, host, ctypes.c_size_t(count * 4), 1)
            # ncclFloat32 = 7, ncclSum = 0, the device's default stream
            if nccl.ncclAllReduce(buf, buf, ctypes.c_size_t(count), 7, 0, comm, None) != 0:
                raise RuntimeError(f"ncclAllReduce: {nccl.ncclGetLastError(comm)}")
            if emu.emuStreamSynchronize(None) != 0:
                raise RuntimeError("emuStreamSynchronize")
            emu.emuMemcpy(host, buf, ctypes.c_size_t(count * 4), 2)
            if any(v != 3.0 for v in host):
                raise RuntimeError(f"sum {host[0]}, not 3")
            emu.emuFree(buf)
            if nccl.ncclCommDestroy(comm) != 0:
                raise RuntimeError("ncclCommDestroy")
        except Exception as e:  # noqa: BLE001
            errors[r] = str(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if any(t.is_alive() for t in threads):
        fail(f"{layout}: the drop-in's AllReduce did not finish in 60 s")
    if any(errors):
        fail(f"{layout}: {errors}")
    libs = os.path.join(pkg, "lib")
    need = ["libhetccl-emu.so", "libhetccl-emu-nccl.so"] + (["libhetccl-emu-kernels.so"] if layout == "two_groups"
                                                              else [])
    loaded = {os.path.basename(m): os.path.dirname(m) for m in mapped()}
    for lib in need:
        if loaded.get(lib) != libs:
            fail(f"{layout}: {lib} loaded from {loaded.get(lib)}, not {libs} ({mapped()})")
    print(f"dropin: {layout}: ncclGetVersion {version.value}, AllReduce of 2 emulated GPUs right, with "
          f"{', '.join(need)} from the package")


def check_dropin(pkg, src, build, layout):
    dropin = os.path.join(pkg, "lib", "hetccl-dropin", "libnccl.so.2")
    first = os.environ.get("LD_PRELOAD", "").split(":")[0]
    if first != dropin:
        fail(f"LD_PRELOAD starts with {first!r}, not {dropin}")
    if not any(os.path.realpath(m) == dropin for m in mapped()):
        fail(f"{dropin} is not loaded: {mapped()}")
    if layout == "one_group":
        check_torch_nccl()
    check_dropin_emu(pkg, layout)
    check_nothing_from(src, build, own=("HETCCL_DEVICE", "HETCCL_GROUP_MAP"))


def main():
    what, pkg, src, build = sys.argv[1:5]
    pkg, src, build = (os.path.realpath(p) for p in (pkg, src, build))
    if what == "import":
        check_import(pkg, src, build)
    elif what == "job":
        check_job(pkg, src, build)
    elif what == "rank":
        job_rank(int(sys.argv[5]), sys.argv[6], pkg, src, build)
    elif what == "dropin":
        check_dropin(pkg, src, build, sys.argv[5])
    else:
        fail(f"unknown check {what}")


if __name__ == "__main__":
    main()
