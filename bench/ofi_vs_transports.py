#!/usr/bin/env python3
"""The ofi transport (libfabric's tcp provider) against hetccl's own tcp, and
ucx (UCX's tcp) where built, between two emulated hosts
(tests/multihost/emu_hosts.py): 4 ranks a,a,b,b, 2 on each host, float32
sum AllReduce (or --op allgather) of SIZE bytes, shm inside a host and the
transport under test between them (HETCCL_TRANSPORT=inter=T), the
transports alternating ROUNDS times, best busbw of each. ofi runs twice:
tagged parts only ("ofi") and with RMA writes from --rma-min up
("ofi-rma", HETCCL_OFI_RMA_MIN), on the same layout. Prints the busbw of
each and one line:
  ratio ofi <bytes> tcp_gbps=.. ofi_gbps=.. ofi-rma_gbps=.. ucx_gbps=.. ofi/tcp=.. ofi-rma/ofi=.. ucx/tcp=..
Needs root (network namespaces).

  sudo /usr/bin/python3 bench/ofi_vs_transports.py [BUILD] [--size 64M] [--rounds 3] [--op allreduce]
"""
import argparse
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "multihost"))
from emu_hosts import Cluster  # noqa: E402

ENV = {
    "tcp": {},
    # libfabric's tcp provider (RDM through ofi_rxm) on the emulated host's interface.
    "ofi": {"FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"},
    "ofi-rma": {"FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"},
    "ucx": {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0", "UCX_WARN_UNUSED_ENV_VARS": "n"},
}


def busbw(cl, perf, op, size, transport, iters, port, rma_min):
    env = {"HETCCL_GROUP_MAP": "0-1:a,2-3:b", "HETCCL_TRANSPORT": "inter=" + transport.split("-")[0],
           "HETCCL_TIMEOUT_S": "120", **ENV[transport]}
    if transport == "ofi-rma":
        env["HETCCL_OFI_RMA_MIN"] = rma_min
    job = cl.launch([0, 0, 1, 1], [perf, "-o", op, "-b", size, "-e", size, "-n", str(iters), "-w", "2",
                                   "-c", "1"], env=env, master_port=port)
    if job.wait(600) != [0] * 4:
        sys.exit(f"{transport}: hetccl-perf failed:\n{job.show()}")
    for line in job.out(0).splitlines():
        f = line.split()
        if f and f[0].isdigit():
            if f[8] != "0":
                sys.exit(f"{transport}: {f[8]} wrong results:\n{job.out(0)}")
            return float(f[7])  # out-of-place busbw, GB/s
    sys.exit(f"{transport}: no result row:\n{job.out(0)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--size", default="64M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--op", default="allreduce")
    ap.add_argument("--rma-min", default="64K")
    a = ap.parse_args()
    perf = os.path.join(a.build, "tools", "hetccl-perf")
    cache = open(os.path.join(a.build, "CMakeCache.txt")).read()
    names = ["tcp", "ofi", "ofi-rma"] + (["ucx"] if re.search(r"^UCX_INCLUDE_DIR:PATH=/", cache, re.M) else [])
    if not re.search(r"^OFI_INCLUDE_DIR:PATH=/", cache, re.M):
        sys.exit("this build has no ofi transport (libfabric-dev was missing at configure)")
    best = {n: 0.0 for n in names}
    port = 29700
    with Cluster(2) as cl:
        for i in range(a.rounds):
            for n in names if i % 2 == 0 else reversed(names):
                port += 2
                best[n] = max(best[n], busbw(cl, perf, a.op, a.size, n, a.iters, port, a.rma_min))
                print(f"round {i}: {n} {best[n]:.3f} GB/s (best so far)", flush=True)
    nbytes = int(re.match(r"(\d+)", a.size).group(1)) << {"K": 10, "M": 20, "G": 30}.get(a.size[-1], 0)
    line = f"ratio ofi {nbytes} " + " ".join(f"{n}_gbps={best[n]:.3f}" for n in names)
    line += f" ofi/tcp={best['ofi'] / best['tcp']:.2f} ofi-rma/ofi={best['ofi-rma'] / best['ofi']:.2f}"
    if "ucx" in best:
        line += f" ucx/tcp={best['ucx'] / best['tcp']:.2f}"
    print(line)


if __name__ == "__main__":
    main()
