#!/usr/bin/env python3
"""The host-aware AllReduce of a host group spread over hosts, against the
one-level one, on emulated hosts (tests/multihost/emu_hosts.py) whose links
are rate-limited (tc tbf on each host's egress): one group of 8 host ranks,
4 on each of 2 hosts, AllReduce float32 of SIZE bytes over shm+tcp,
HETCCL_HOST_LEVELS=1 and =0 alternating ROUNDS times, best time of each.

  sudo /usr/bin/python3 bench/multihost_levels.py [BUILD] [--rate 2gbit] [--size 16M] [--rounds 2]

Bytes leaving each host per AllReduce of N bytes (m ranks per host, k in
all): one level, ReduceScatter and AllGather each send m (k - m) / k N;
two levels, (H - 1) / H N each. With m = 4, k = 8, H = 2: 4N against N, so
where the links are the bottleneck the two-level AllReduce is up to 4x
faster. Prints:
  ratio host_levels <bytes> rate=<tc rate> one_level_us=.. two_level_us=.. speedup=.. predicted=4.00
Needs root (network namespaces, tc).
"""
import argparse
import os
import re
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "multihost"))
from emu_hosts import Cluster, sh  # noqa: E402


def run(cl, perf, size, levels, port):
    hosts = [0] * 4 + [1] * 4
    job = cl.launch(hosts, [perf, "-o", "allreduce", "-b", size, "-e", size, "-n", "5", "-w", "2", "-c", "1"],
                    env={"HETCCL_GROUP_MAP": "0-7:a", "HETCCL_HOST_LEVELS": str(levels), "HETCCL_TIMEOUT_S": "120"},
                    master_port=port)
    if job.wait(600) != [0] * 8:
        sys.exit(f"hetccl-perf failed:\n{job.show()}")
    for line in job.out(0).splitlines():
        f = line.split()
        if f and f[0].isdigit():
            return float(f[5])  # out-of-place time, us
    sys.exit(f"no result row:\n{job.out(0)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rate", default="2gbit")
    ap.add_argument("--size", default="16M")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    perf = os.path.join(a.build, "tools", "hetccl-perf")
    with Cluster(2) as cl:
        for ns in cl.ns:
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", a.rate,
               "burst", "256kb", "latency", "100ms")
        best = {0: None, 1: None}
        port = 29600
        for i in range(a.rounds):
            for levels in ((1, 0) if i % 2 == 0 else (0, 1)):
                port += 1
                t = run(cl, perf, a.size, levels, port)
                best[levels] = t if best[levels] is None else min(best[levels], t)
        nbytes = int(re.match(r"(\d+)", a.size).group(1)) << {"K": 10, "M": 20, "G": 30}.get(a.size[-1], 0)
        print(f"ratio host_levels {nbytes} rate={a.rate} one_level_us={best[0]:.0f} two_level_us={best[1]:.0f} "
              f"speedup={best[0] / best[1]:.2f} predicted=4.00")


if __name__ == "__main__":
    main()
