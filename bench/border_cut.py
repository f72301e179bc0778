#!/usr/bin/env python3
"""The border cut by bandwidth against the cut by size, on emulated hosts
(tests/multihost/emu_hosts.py) whose border links are rate-limited
unequally (tc tbf per destination): 4 host ranks on 3 hosts, groups a | a |
b,b (ranks 0 and 1 of group a on hosts 0 and 1, group b's ranks 2 and 3 on
host 2). Under the size cut the border pairs are (0, 2) and (1, 3), each
carrying half the vector; the link host 0 - host 2 runs at SLOW Mbit/s,
host 1 - host 2 at FAST. AllReduce float32 of SIZE bytes, ROUNDS rounds of
four runs: unshaped links (size cut), then shaped with the size cut, the
bandwidth cut from HETCCL_LINK_GBPS (the shaped rates), and the bandwidth
cut from the probe at init; best time of each.

  sudo /usr/bin/python3 bench/border_cut.py [BUILD] [--slow 100] [--fast 400] [--size 16M] [--rounds 2]

Prediction: a pair whose piece is p bytes moves p each way (half in the
border's reduce-scatter, half in its allgather), so the border takes
max(p_i / rate_i). Size cut: p = N/2 on both links; bandwidth cut: p_i in
proportion to the weights the library computes (sixteenths of the faster
rank). The rest of the call (group steps on unshaped links) is taken from
the unshaped run: predicted = (rest + border_size) / (rest + border_bw).
Prints:
  ratio border_cut <bytes> slow=.. fast=.. size_us=.. bandwidth_us=.. probe_us=.. bandwidth/size=.. probe/size=..
    predicted=.. weights=..
Needs root (network namespaces, tc).
"""
import argparse
import os
import re
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tests", "multihost"))
from emu_hosts import Cluster  # noqa: E402

HOSTS = [0, 1, 2, 2]
GROUPS = "0-1:a,2-3:b"


def run(cl, perf, size, env, port):
    e = {"HETCCL_GROUP_MAP": GROUPS, "HETCCL_TIMEOUT_S": "120", "HETCCL_DEBUG": "INFO", "HETCCL_DEBUG_SUBSYS": "TOPO"}
    e.update(env)
    job = cl.launch(HOSTS, [perf, "-o", "allreduce", "-b", size, "-e", size, "-n", "4", "-w", "1", "-c", "1"],
                    env=e, master_port=port)
    if job.wait(600) != [0] * len(HOSTS) or "# Out of bounds values : 0 OK" not in job.out(0):
        sys.exit(f"hetccl-perf failed ({env}):\n{job.show()}")
    m = re.search(r"border cut: (.*)", job.err(0))
    cut = m.group(1) if m else "size"
    for line in job.out(0).splitlines():
        f = line.split()
        if f and f[0].isdigit():
            return float(f[5]), cut  # out-of-place time, us
    sys.exit(f"no result row:\n{job.out(0)}")


def weights(cut):
    return [float(w) for w in re.findall(r"weight (\d+)/16", cut)]


def border_s(nbytes, w, rate_bps):
    """The border's time with pieces in proportion to w (by pair), rates by pair."""
    total = sum(w)
    return max(nbytes * wi / total / r for wi, r in zip(w, rate_bps))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--slow", type=int, default=100, help="Mbit/s between hosts 0 and 2")
    ap.add_argument("--fast", type=int, default=400, help="Mbit/s between hosts 1 and 2")
    ap.add_argument("--size", default="16M")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    perf = os.path.join(a.build, "tools", "hetccl-perf")
    nbytes = int(re.match(r"(\d+)", a.size).group(1)) << {"K": 10, "M": 20, "G": 30}.get(a.size[-1], 0)
    hints = f"0:{a.slow / 1000},1:{a.fast / 1000},2:{a.slow / 1000},3:{a.fast / 1000}"
    runs = {
        "size": {},
        "bandwidth": {"HETCCL_BORDER_CUT": "bandwidth", "HETCCL_LINK_GBPS": hints},
        "probe": {"HETCCL_BORDER_CUT": "bandwidth"},
    }
    best, cuts = {}, {}
    port = 29700
    with Cluster(3, subnet=81) as cl:
        port += 1
        unshaped, _ = run(cl, perf, a.size, {}, port)
        for i in range(a.rounds):
            port += 1
            t, _ = run(cl, perf, a.size, {}, port)
            unshaped = min(unshaped, t)
        cl.limit_link(0, 2, a.slow)
        cl.limit_link(1, 2, a.fast)
        for i in range(a.rounds):
            for name in (list(runs) if i % 2 == 0 else list(reversed(runs))):
                port += 1
                t, cut = run(cl, perf, a.size, runs[name], port)
                best[name] = min(best.get(name, t), t)
                cuts[name] = cut
    rates = [a.slow * 1e6 / 8, a.fast * 1e6 / 8]
    w = weights(cuts["bandwidth"])
    pair_w = [w[0], w[1]] if len(w) == 4 else [1, 1]
    b_size = border_s(nbytes, [1, 1], rates)
    b_bw = border_s(nbytes, pair_w, rates)
    rest = unshaped / 1e6
    predicted = (rest + b_size) / (rest + b_bw)
    print(f"# unshaped {unshaped:.0f} us; weights: bandwidth {cuts['bandwidth']}; probe {cuts['probe']}")
    print(f"ratio border_cut {nbytes} slow={a.slow}mbit fast={a.fast}mbit size_us={best['size']:.0f} "
          f"bandwidth_us={best['bandwidth']:.0f} probe_us={best['probe']:.0f} "
          f"bandwidth/size={best['size'] / best['bandwidth']:.2f} probe/size={best['size'] / best['probe']:.2f} "
          f"predicted={predicted:.2f} border_only={b_size / b_bw:.2f} "
          f"weights={'/'.join(f'{x:.0f}' for x in w)} probe_weights={'/'.join(f'{x:.0f}' for x in weights(cuts['probe']))}")


if __name__ == "__main__":
    main()
