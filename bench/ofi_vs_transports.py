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

--one-host: the same comparison on this host, no namespaces, over
libfabric's shm provider (FI_PROVIDER=shm): 4 ranks a,a,b,b forked by
hetccl-perf --np, every link on the transport under test (HETCCL_TRANSPORT=T):
ofi tagged ("ofi-shm"), ofi with RMA writes ("ofi-shm-rma"), hetccl's own shm
and tcp (the loopback), at each size of --sizes (a hetccl-perf run each),
the transports alternating ROUNDS times, best busbw of each per size.
One line per size:
  ratio ofi-shm <bytes> shm_gbps=.. tcp_gbps=.. ofi-shm_gbps=.. ofi-shm-rma_gbps=.. ofi/shm=.. ofi-rma/ofi=.. ofi/tcp=..

  sudo /usr/bin/python3 bench/ofi_vs_transports.py [BUILD] [--size 64M] [--rounds 3] [--op allreduce]
  /usr/bin/python3 bench/ofi_vs_transports.py [BUILD] --one-host [--sizes 256K,4M,64M] [--rounds 3]
"""
import argparse
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))

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


# --one-host: every link of the 4 ranks on the transport under test.
ONE_HOST = {
    "shm": {"HETCCL_TRANSPORT": "shm"},
    "tcp": {"HETCCL_TRANSPORT": "tcp"},
    "ofi-shm": {"HETCCL_TRANSPORT": "ofi", "FI_PROVIDER": "shm"},
    "ofi-shm-rma": {"HETCCL_TRANSPORT": "ofi", "FI_PROVIDER": "shm"},
}


def size_bytes(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    if not m:
        sys.exit(f"bad size '{text}' (a number of bytes, K, M or G)")
    return int(m.group(1)) << {"K": 10, "M": 20, "G": 30, "": 0}[m.group(2)]


def one_host_busbw(perf, op, sizes, transport, iters, rma_min):
    """Out-of-place busbw (GB/s) by size of one hetccl-perf run over `transport`."""
    env = {**os.environ, "HETCCL_TIMEOUT_S": "120", **ONE_HOST[transport]}
    env.pop("HETCCL_OFI_RMA_MIN", None)
    if transport == "ofi-shm-rma":
        env["HETCCL_OFI_RMA_MIN"] = rma_min
    steps = [str(b) for b in sizes]
    cmd = [perf, "--np", "4", "--groups", "a,a,b,b", "-o", op, "-n", str(iters), "-w", "2", "-c", "1"]
    got = {}
    for b in steps:  # one size a run: sizes need not be a geometric series
        p = subprocess.run(cmd + ["-b", b, "-e", b], env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            sys.exit(f"{transport}: hetccl-perf exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        for line in p.stdout.splitlines():
            f = line.split()
            if f and f[0].isdigit():
                if f[8] != "0":
                    sys.exit(f"{transport}: {f[8]} wrong results:\n{p.stdout}")
                got[int(f[0])] = float(f[7])
    if sorted(got) != sorted(sizes):
        sys.exit(f"{transport}: rows for {sorted(got)}, asked for {sorted(sizes)}")
    return got


def one_host(a, perf):
    sizes = [size_bytes(s) for s in a.sizes.split(",")]
    names = list(ONE_HOST)
    best = {n: {b: 0.0 for b in sizes} for n in names}
    for i in range(a.rounds):
        for n in names if i % 2 == 0 else reversed(names):
            for b, gbps in one_host_busbw(perf, a.op, sizes, n, a.iters, a.rma_min).items():
                best[n][b] = max(best[n][b], gbps)
            print(f"round {i}: {n} " + " ".join(f"{b}:{best[n][b]:.3f}" for b in sizes) + " GB/s (best so far)",
                  flush=True)
    for b in sizes:
        g = {n: best[n][b] for n in names}
        print(f"ratio ofi-shm {b} " + " ".join(f"{n}_gbps={g[n]:.3f}" for n in names) +
              f" ofi/shm={g['ofi-shm'] / g['shm']:.2f} ofi-rma/ofi={g['ofi-shm-rma'] / g['ofi-shm']:.2f}" +
              f" ofi/tcp={g['ofi-shm'] / g['tcp']:.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--size", default="64M")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--op", default="allreduce")
    ap.add_argument("--rma-min", default="64K")
    ap.add_argument("--one-host", action="store_true", help="on this host, over libfabric's shm provider")
    ap.add_argument("--sizes", default="256K,4M,64M", help="with --one-host: comma list")
    a = ap.parse_args()
    perf = os.path.join(a.build, "tools", "hetccl-perf")
    cache = open(os.path.join(a.build, "CMakeCache.txt")).read()
    if a.one_host:
        if not re.search(r"^OFI_INCLUDE_DIR:PATH=/", cache, re.M):
            sys.exit("this build has no ofi transport (libfabric-dev was missing at configure)")
        return one_host(a, perf)
    sys.path.insert(0, os.path.join(here, "..", "tests", "multihost"))
    from emu_hosts import Cluster
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
    nbytes = size_bytes(a.size)
    line = f"ratio ofi {nbytes} " + " ".join(f"{n}_gbps={best[n]:.3f}" for n in names)
    line += f" ofi/tcp={best['ofi'] / best['tcp']:.2f} ofi-rma/ofi={best['ofi-rma'] / best['ofi']:.2f}"
    if "ucx" in best:
        line += f" ucx/tcp={best['ucx'] / best['tcp']:.2f}"
    print(line)


if __name__ == "__main__":
    main()
