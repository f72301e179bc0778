#!/usr/bin/env python3
"""Small send/recv between GPU ranks of different groups on two emulated hosts
(tests/multihost/emu_hosts.py), through the pair relay (border/pair_relay.h),
while other ranks of the job idle: tests/multihost/pair_relay_rank's
pingpong (4 KiB there and back between rank 0 and the last rank, 500 times
after 50 warm-up trips), against the same two processes as host-memory
ranks over the same link (the peer measured in the same run), and the same
GPU ranks on one host (the pair links, no relay).

  sudo python3 bench/pair_relay_pingpong.py [BUILD_DIR] [--kind emu|cuda] [--rounds N]

Layouts: a,a|b,b (ranks 1 and 2 idle; emu) or a,b|c (rank 1 idle; cuda, one
GPU for all). Each round runs the modes in turn; the best of each is kept.
Prints per layout:
  ratio pair_relay_pingpong <layout> relay_us=.. host_us=.. onehost_us=.. relay/host=.. relay/onehost=..
"""
import argparse
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "multihost"))
from emu_hosts import Unavailable, any_cluster  # noqa: E402


def run(cl, rankbin, kind, hosts, gmap, port):
    env = {"HETCCL_DEVICE": kind, "HETCCL_GROUP_MAP": gmap, "HETCCL_TIMEOUT_S": "60", "HETCCL_GPU_BORDER_MIN": "0",
           "NCCL_NVLS_ENABLE": "0"}
    job = cl.launch(hosts, [rankbin, "pingpong"], env=env, master_port=port)
    codes = job.wait(300)
    m = re.search(r"^PINGPONG ([\d.]+)$", job.out(0), re.M)
    if codes != [0] * len(hosts) or not m:
        sys.exit(f"pair_relay_pingpong: {kind} {hosts}: exit codes {codes}\n{job.show()}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--kind", default="emu")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    rankbin = os.path.abspath(os.path.join(a.build, "tests", "multihost", "pair_relay_rank"))
    if a.kind == "emu":
        name, hosts, gmap = "aa|bb", [0, 0, 1, 1], "0-1:a,2-3:b"
    else:
        name, hosts, gmap = "ab|c", [0, 0, 1], "0:a,1:b,2:c"
    modes = [("relay", a.kind, hosts), ("host", "host", hosts), ("onehost", a.kind, [0] * len(hosts))]
    try:
        cl = any_cluster(2, "pair_relay_pingpong")
    except Unavailable as e:
        sys.exit(f"pair_relay_pingpong: cannot make emulated hosts: {e}")
    best = {}
    port = 29800
    with cl:
        for rnd in range(a.rounds):
            for mode, kind, where in (modes if rnd % 2 == 0 else modes[::-1]):
                port += 1
                us = run(cl, rankbin, kind, where, gmap, port)
                print(f"# round {rnd + 1}, {mode}: {us:.1f} us a round trip", flush=True)
                best[mode] = min(best.get(mode, us), us)
    r, h, o = best["relay"], best["host"], best["onehost"]
    print(f"ratio pair_relay_pingpong {name} relay_us={r:.1f} host_us={h:.1f} onehost_us={o:.1f} "
          f"relay/host={r / h:.2f} relay/onehost={r / o:.2f}")


if __name__ == "__main__":
    main()
