#!/usr/bin/env python3
"""How long hetcclCommAbort takes on GPU ranks, against the vendor library's
own abort measured in the same command:
  under_send  tests/multihost/pair_relay_rank abort on two emulated hosts
              (tests/multihost/emu_hosts.py; groups a | b): rank 0's send
              waits on the pair relay for a rank 1 that never receives, and
              rank 0 aborts; how long the abort took, and how long the one-
              rank communicator it makes next takes to abort with nothing in
              flight (idle: a group of one, which passes straight to NCCL)
  nccl        NCCL alone through its C API (ctypes on libnccl.so.2, or
              --nccl PATH): a one-rank communicator made and aborted at once

  sudo python3 bench/abort_time.py [BUILD_DIR] [--kind cuda] [--rounds N] [--nccl PATH]

Each round runs both; the best (least) of each is kept. Prints:
  ratio abort_time under_send_s=.. idle_s=.. nccl_s=.. under_send/nccl=.. idle/nccl=..
"""
import argparse
import ctypes
import os
import re
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "multihost"))
from emu_hosts import Unavailable, any_cluster  # noqa: E402


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def nccl_abort_s(lib):
    uid, comm = UniqueId(), ctypes.c_void_p()
    if lib.ncclGetUniqueId(ctypes.byref(uid)) != 0 or lib.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) != 0:
        sys.exit("abort_time: NCCL could not make a one-rank communicator")
    t0 = time.monotonic()
    if lib.ncclCommAbort(comm) != 0:
        sys.exit("abort_time: ncclCommAbort failed")
    return time.monotonic() - t0


def hetccl_abort_s(cl, rankbin, kind, port):
    env = {"HETCCL_DEVICE": kind, "HETCCL_GROUP_MAP": "0:a,1:b", "HETCCL_TIMEOUT_S": "30", "HETCCL_GPU_BORDER_MIN": "0",
           "NCCL_NVLS_ENABLE": "0"}
    job = cl.launch([0, 1], [rankbin, "abort"], env=env, master_port=port)
    codes = job.wait(120)
    m = re.search(r"^ABORT ([\d.]+) ([\d.]+) (\S+) ([\d.]+)", job.out(0), re.M)
    if codes[0] != 0 or not m or m.group(3) != "ok":
        sys.exit(f"abort_time: the abort under a send failed: exit codes {codes}\n{job.show()}")
    return float(m.group(1)), float(m.group(4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--kind", default="cuda")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nccl", default="libnccl.so.2")
    a = ap.parse_args()
    rankbin = os.path.abspath(os.path.join(a.build, "tests", "multihost", "pair_relay_rank"))
    lib = ctypes.CDLL(a.nccl)
    try:
        cl = any_cluster(2, "abort_time")
    except Unavailable as e:
        sys.exit(f"abort_time: cannot make emulated hosts: {e}")
    send, idle, nccl = [], [], []
    with cl:
        for rnd in range(a.rounds):
            s, i = hetccl_abort_s(cl, rankbin, a.kind, 29950 + rnd)
            n = nccl_abort_s(lib)
            print(f"# round {rnd + 1}: under_send {s:.3f} s, idle {i:.3f} s, nccl {n:.3f} s", flush=True)
            send.append(s)
            idle.append(i)
            nccl.append(n)
    s, i, n = min(send), min(idle), min(nccl)
    print(f"ratio abort_time under_send_s={s:.3f} idle_s={i:.3f} nccl_s={n:.3f} under_send/nccl={s / n:.2f} "
          f"idle/nccl={i / n:.2f}")


if __name__ == "__main__":
    main()
