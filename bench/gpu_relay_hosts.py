#!/usr/bin/env python3
"""GPU ranks on two emulated hosts (tests/multihost/emu_hosts.py: network,
UTS, IPC and mount namespaces; needs root, iproute2 and util-linux; where
those are missing, hosts of their own UTS, IPC and mount namespaces that
share the machine's network, on loopback): one rank a host, groups g0 and
g1, so the border crosses hosts over tcp (a veth pair, or loopback). float32 sum AllReduce (--op: another
hetccl-perf collective), out of place, in one command:
  relay   the device border through its relay (border/border_relay.h; send/recv:
          the pair relay, border/pair_relay.h): the GPUs' copy engines fill
          pinned slots, the relay carries them
  staged  HETCCL_GPU_BORDER=0: the whole buffer to pinned memory, the host
          plan across, back to the device
  host    the same two processes as host-memory ranks: what the link
          carries between two hosts (the peer measured in the same run)

  sudo python3 bench/gpu_relay_hosts.py [BUILD_DIR] [--kind cuda|emu] [--min B] [--max B] [--rounds N]

Each round runs the three in turn (the order reversed every other round);
the best busbw of each is kept. Prints hetccl-perf's tables and per size:
  ratio gpu_relay_hosts <op> <bytes> relay_busbw=.. staged_busbw=.. host_busbw=.. relay/staged=.. relay/host=..
"""
import argparse
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "multihost"))
from emu_hosts import Unavailable, any_cluster  # noqa: E402


def run(cl, perf, op, kind, env, lo, hi, iters, port):
    e = {"HETCCL_GROUP_MAP": "0:g0,1:g1", "HETCCL_TIMEOUT_S": "120", "NCCL_NVLS_ENABLE": "0"}
    if kind != "host":
        e["HETCCL_DEVICE"] = kind
    e.update(env)
    job = cl.launch([0, 1], [perf, "-o", op, "-d", "float", "-b", str(lo), "-e", str(hi), "-f", "4",
                             "-n", str(iters), "-w", "3", "-c", "1"], env=e, master_port=port)
    codes = job.wait(900)
    out = job.out(0)
    if codes != [0, 0] or "# Out of bounds values : 0 OK" not in out:
        sys.exit(f"gpu_relay_hosts: {kind} {env}: exit codes {codes}\n{job.show()}")
    rows = {}
    for r in (l.split() for l in out.splitlines() if l.strip() and l.split()[0].isdigit()):
        rows[int(r[0])] = float(r[7])  # out-of-place busbw
    return out, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--kind", default="cuda")
    ap.add_argument("--op", default="allreduce", help="hetccl-perf's -o (sendrecv: the pair between the hosts, "
                    "through the pair relay)")
    ap.add_argument("--min", type=int, default=1 << 20)
    ap.add_argument("--max", type=int, default=256 << 20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--shared-network", action="store_true", help="hosts on one network (loopback) even where "
                    "network namespaces can be made")
    a = ap.parse_args()
    perf = os.path.abspath(os.path.join(a.build, "tools", "hetccl-perf"))
    try:
        cl = any_cluster(2, "gpu_relay_hosts", shared=a.shared_network)
    except Unavailable as e:
        sys.exit(f"gpu_relay_hosts: cannot make emulated hosts: {e}")
    modes = [("relay", a.kind, {}), ("staged", a.kind, {"HETCCL_GPU_BORDER": "0"}), ("host", "host", {})]
    best = {m[0]: {} for m in modes}
    port = 29900
    with cl:
        for rnd in range(a.rounds):
            for name, kind, env in (modes if rnd % 2 == 0 else modes[::-1]):
                port += 1
                out, rows = run(cl, perf, a.op, kind, env, a.min, a.max, a.iters, port)
                print(f"# round {rnd + 1}, {name}\n{out}")
                for size, bus in rows.items():
                    best[name][size] = max(best[name].get(size, 0.0), bus)
    for size in sorted(best["relay"]):
        r, s, h = best["relay"][size], best["staged"].get(size, 0.0), best["host"].get(size, 0.0)
        print(f"ratio gpu_relay_hosts {a.op} {size} relay_busbw={r:.2f} staged_busbw={s:.2f} host_busbw={h:.2f} "
              f"relay/staged={r / s if s else 0:.2f} relay/host={r / h if h else 0:.2f}")


if __name__ == "__main__":
    main()
