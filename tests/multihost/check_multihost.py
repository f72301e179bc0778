#!/usr/bin/env python3
"""Emulated hosts (emu_hosts.py): every collective checked across hosts,
then a whole host killed and a link cut mid-call.

  check_multihost.py HETCCL_PERF FAULT_NETNS_RANK METRICS_JOB [--quick]

1. Layouts on three emulated hosts (ranks per host, groups by rank):
     2 hosts x 2, groups a,a | b,b       (each group inside one host)
     2 hosts x 2, groups a,b | a,b       (each group across both hosts)
     3 hosts x 2, groups a,b | b,c | c,a (three groups, each across two hosts)
     2 hosts x 4, one group; and groups a,a,b,b | a,a,b,b (the host
       backend's two-level AllReduce: inside each host, then across)
   hetccl-perf runs each collective with results checked against its
   reference (8 B to 1 MiB; --quick: 8 B to 32 KiB), with the default
   transport choice (shm inside a host, tcp across: "shm+tcp"), plus
   AllReduce with HETCCL_TRANSPORT=intra=tcp,inter=tcp and with
   intra=shm,inter=tcp given explicitly; with intra=shm,inter=ofi on
   libfabric's tcp provider where the ofi transport is built; and auto's
   logged choice between hosts under two HETCCL_AUTO_INTER orders (tcp
   here, saying why not ucx and ofi).
   The metrics endpoint shows where the border went: with groups a,b | a,b
   each border pair shares a host (no border byte leaves a host), with
   a,a | b,b every border byte crosses.
2. kill -9 of every process of host 1 while 2 hosts x 2 ranks (a,a | b,b)
   loop over AllReduce: host 0's ranks fail within HETCCL_TIMEOUT_S + 5 s
   with an error naming the call and a peer, abort and exit.
3. Host 1's link set down mid-call (same layout): every rank fails within
   the same bound and exits.
4. The border cut by bandwidth: groups a | a | b,b on 3 hosts (ranks 0, 1
   of group a on hosts 0, 1; group b on host 2), the link host 0 - host 2
   rate-limited to 100 Mbit/s and host 1 - host 2 to 800 (tc): with
   HETCCL_BORDER_CUT=bandwidth the probe at init gives the ranks on the slow
   link the smaller weights, and AllReduce is right (8 B to 4 MiB). (How
   much faster it is: bench/border_cut.py.)
Exit status 0 pass, 1 fail, 77 skip (not root, or namespaces unavailable).
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_hosts import Cluster, Unavailable  # noqa: E402

COLLS = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv", "gather", "scatter"]
LAYOUTS = [
    ("2 hosts x 2, groups a,a|b,b", [0, 0, 1, 1], "0-1:a,2-3:b"),
    ("2 hosts x 2, groups a,b|a,b", [0, 0, 1, 1], "0:a,1:b,2:a,3:b"),
    ("3 hosts x 2, groups a,b|b,c|c,a", [0, 0, 1, 1, 2, 2], "0:a,1:b,2:b,3:c,4:c,5:a"),
    # Groups with two or more ranks on each of several hosts: the host
    # backend's AllReduce runs in two levels (inside each host, then across).
    ("2 hosts x 4, one group", [0, 0, 0, 0, 1, 1, 1, 1], "0-7:a"),
    ("2 hosts x 4, groups a,a,b,b|a,a,b,b", [0, 0, 0, 0, 1, 1, 1, 1], "0-1:a,2-3:b,4-5:a,6-7:b"),
]
TIMEOUT_S = 5
LIMIT_S = TIMEOUT_S + 5


def fail(msg):
    print(f"check_multihost: FAILED: {msg}")
    sys.exit(1)


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def run_perf(cl, perf, hosts, gmap, coll, maxb, env=None, port=29500):
    e = {"HETCCL_GROUP_MAP": gmap, "HETCCL_TIMEOUT_S": "30", "HETCCL_DEBUG": "WARN"}
    e.update(env or {})
    job = cl.launch(hosts, [perf, "-o", coll, "-b", "8", "-e", maxb, "-f", "32", "-n", "2", "-w", "1", "-c", "1"],
                    env=e, master_port=port)
    codes = job.wait(120)
    if codes != [0] * len(hosts) or "# Out of bounds values : 0 OK" not in job.out(0):
        fail(f"{coll} on hosts {hosts}, groups {gmap} {env or ''}: exit codes {codes}\n{job.show()}")
    m = re.search(r"transport (\S+)", job.out(0))
    return m.group(1) if m else "?"


def border_bytes(cl, metrics_job, gmap, port):
    """Sums over ranks of hetccl_step_bytes_total{link=border_host|border_remote} after 20 AllReduces."""
    job = cl.launch([0, 0, 1, 1], [metrics_job, "20", "65536"], master_port=port, stdin=subprocess.PIPE,
                    env={"HETCCL_GROUP_MAP": gmap, "HETCCL_METRICS_PORT": "9400", "HETCCL_TIMEOUT_S": "30"})
    deadline = now() + 60
    while not all(job.out(r).startswith("done") for r in range(4)):
        if now() > deadline or any(p.poll() is not None for p in job.procs):
            fail(f"metrics job, groups {gmap}: not done\n{job.show()}")
        time.sleep(0.1)
    local = remote = 0.0
    for r in range(4):
        host = [0, 0, 1, 1][r]
        text = cl.fetch(host, f"http://127.0.0.1:{9400 + r % 2}/metrics")
        for link in ("border_host", "border_remote"):
            m = re.search(r'^hetccl_step_bytes_total\{[^}]*rank="%d"[^}]*link="%s"\} (\S+)$' % (r, link), text, re.M)
            if not m:
                fail(f"rank {r}'s metrics have no {link} bytes:\n{text[:2000]}")
            if link == "border_host":
                local += float(m.group(1))
            else:
                remote += float(m.group(1))
    for p in job.procs:
        p.stdin.write("go\n")
        p.stdin.close()
    if job.wait(60) != [0] * 4:
        fail(f"metrics job, groups {gmap}: {job.show()}")
    return local, remote


def bandwidth_cut(cl, perf, port):
    try:
        cl.limit_link(0, 2, 100)
        cl.limit_link(1, 2, 800)
    except Unavailable as e:
        return f"skipped ({e})"
    job = cl.launch([0, 1, 2, 2], [perf, "-o", "allreduce", "-b", "8", "-e", "4M", "-f", "16", "-n", "2", "-w", "1"],
                    env={"HETCCL_GROUP_MAP": "0-1:a,2-3:b", "HETCCL_BORDER_CUT": "bandwidth", "HETCCL_TIMEOUT_S": "60",
                         "HETCCL_DEBUG": "INFO", "HETCCL_DEBUG_SUBSYS": "TOPO"}, master_port=port)
    codes = job.wait(120)
    cl.clear_limits()
    if codes != [0] * 4 or "# Out of bounds values : 0 OK" not in job.out(0):
        fail(f"bandwidth cut: exit codes {codes}\n{job.show()}")
    m = re.search(r"border cut: bandwidth \(rates from probe\): (.*)", job.err(0))
    if not m:
        fail(f"bandwidth cut: no 'border cut' line from the probe\n{job.show()}")
    w = [int(x) for x in re.findall(r"weight (\d+)/16", m.group(1))]
    if len(w) != 4 or not (w[0] < w[1] and w[2] < w[3]):
        fail(f"bandwidth cut: the ranks on the 100 Mbit/s link (0, 2) should weigh less than those on the 800 "
             f"Mbit/s one (1, 3): {m.group(1)}")
    return m.group(1)


def fault(cl, rank_bin, what, port):
    """2 hosts x 2 (a,a|b,b) looping AllReduce; `what` hurts host 1 once all are at ITER 20."""
    job = cl.launch([0, 0, 1, 1], [rank_bin, "--max-seconds", "60"], master_port=port,
                    env={"HETCCL_GROUP_MAP": "0-1:a,2-3:b", "HETCCL_TIMEOUT_S": str(TIMEOUT_S)})
    deadline = now() + 60
    while not all(re.search(r"^ITER 20 ", job.out(r), re.M) for r in range(4)):
        if now() > deadline or any(p.poll() is not None for p in job.procs):
            fail(f"{what}: the ranks never reached 20 AllReduces\n{job.show()}")
        time.sleep(0.1)
    t_cut = now()
    if what == "kill":
        cl.kill_host(1)
        survivors = [0, 1]
    else:
        cl.cut_link(1)
        survivors = [0, 1, 2, 3]
    codes = job.wait(LIMIT_S + 20)
    lines = []
    for r in survivors:
        m = re.search(r"^FAIL (\d+) (\d+) ([\d.]+) (.*)$", job.out(r), re.M)
        if codes[r] != 0 or not m:
            fail(f"{what}: rank {r} exited {codes[r]} without a failed AllReduce\n{job.show()}")
        after = float(m.group(3)) - t_cut
        text = m.group(4)
        if not 0 <= after <= LIMIT_S:
            fail(f"{what}: rank {r}'s AllReduce failed {after:.1f} s after the fault (limit {LIMIT_S} s): {text}")
        peers = [p for p in re.findall(r"rank (\d+)", text) if int(p) != r]
        if "hetcclAllReduce" not in text or not peers:
            fail(f"{what}: rank {r}'s error names no call or no peer: {text}")
        lines.append(f"rank {r} after {after:.1f} s: {text[:160]}")
    if what == "kill" and any(codes[r] == 0 for r in (2, 3)):
        fail(f"kill: host 1's ranks were not killed: {codes}")
    return lines


def check_ofi(cl, perf, port):
    """The ofi transport across hosts (libfabric's tcp provider on each host's
    eth0), where built; and auto's choice between hosts, logged with its
    reason: no rank here has UCX with an RDMA device or a libfabric hardware
    provider, so tcp, whatever HETCCL_AUTO_INTER's order."""
    cache = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(perf))), "CMakeCache.txt")
    built = os.path.exists(cache) and re.search(r"^OFI_INCLUDE_DIR:PATH=/", open(cache).read(), re.M)
    runs = 0
    if built:
        got = run_perf(cl, perf, LAYOUTS[2][1], LAYOUTS[2][2], "allreduce", "1M",
                       env={"HETCCL_TRANSPORT": "intra=shm,inter=ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"},
                       port=port)
        if got != "shm+ofi":
            fail(f"HETCCL_TRANSPORT=intra=shm,inter=ofi: transport {got}, expected shm+ofi")
        print("check_multihost: HETCCL_TRANSPORT=intra=shm,inter=ofi right (libfabric's tcp provider)")
        runs += 1
    for order in ("ucx,ofi,tcp", "ofi,tcp"):
        port += 1
        job = cl.launch(LAYOUTS[0][1], [perf, "-o", "allreduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0"],
                        env={"HETCCL_GROUP_MAP": LAYOUTS[0][2], "HETCCL_AUTO_INTER": order, "HETCCL_DEBUG": "INFO",
                             "HETCCL_DEBUG_SUBSYS": "TRANSPORT"}, master_port=port)
        want = "transport between hosts: tcp"
        if job.wait(60) != [0] * 4 or want not in job.err(0) or "not ofi: rank" not in job.err(0):
            fail(f"HETCCL_AUTO_INTER={order}: the log does not say '{want}' and why not ofi:\n{job.show()}")
        print(f"check_multihost: HETCCL_AUTO_INTER={order}: " +
              next(l for l in job.err(0).splitlines() if want in l).split("TRANSPORT ", 1)[-1])
        runs += 1
    return runs


def main():
    perf, rank_bin, metrics_job = sys.argv[1], sys.argv[2], sys.argv[3]
    maxb = "32K" if "--quick" in sys.argv else "1M"
    try:
        cl = Cluster(3)
    except Unavailable as e:
        print(f"check_multihost: SKIPPED: {e}")
        return 77
    port = 29500
    runs = 0
    with cl:
        for name, hosts, gmap in LAYOUTS:
            for coll in COLLS:
                port += 1
                transport = run_perf(cl, perf, hosts, gmap, coll, maxb, port=port)
                if transport != "shm+tcp":
                    fail(f"{name}: the transport chosen was {transport}, expected shm+tcp")
                runs += 1
            print(f"check_multihost: {name}: {len(COLLS)} collectives right over shm+tcp")
        port += 1  # the two-level AllReduce is the one that ran where a group has 4 ranks on each host
        job = cl.launch(LAYOUTS[3][1], [perf, "-o", "allreduce", "-b", "1M", "-e", "1M", "-n", "2", "-w", "1"],
                        env={"HETCCL_GROUP_MAP": LAYOUTS[3][2], "HETCCL_DEBUG": "INFO", "HETCCL_DEBUG_SUBSYS": "BACKEND"},
                        master_port=port)
        if job.wait(120) != [0] * 8 or "large AllReduce in two levels" not in job.err(0):
            fail(f"{LAYOUTS[3][0]}: no two-level AllReduce\n{job.show()}")
        for spec, want in (("intra=tcp,inter=tcp", "tcp"), ("intra=shm,inter=tcp", "shm+tcp")):
            port += 1
            got = run_perf(cl, perf, LAYOUTS[2][1], LAYOUTS[2][2], "allreduce", maxb,
                           env={"HETCCL_TRANSPORT": spec}, port=port)
            if got != want:
                fail(f"HETCCL_TRANSPORT={spec}: transport {got}, expected {want}")
            runs += 1
        print(f"check_multihost: HETCCL_TRANSPORT=intra=tcp,inter=tcp and intra=shm,inter=tcp right")
        runs += check_ofi(cl, perf, port + 1)
        port += 3
        for gmap, crosses in (("0:a,1:b,2:a,3:b", False), ("0-1:a,2-3:b", True)):
            port += 1
            local, remote = border_bytes(cl, metrics_job, gmap, port)
            if (remote > 0) != crosses or local + remote <= 0 or (local > 0) == crosses:
                fail(f"groups {gmap}: border bytes on this host {local}, across hosts {remote}")
            print(f"check_multihost: groups {gmap}: border bytes on one host {local:.0f}, across hosts {remote:.0f}")
        info = os.path.join(os.path.dirname(os.path.abspath(perf)), "hetccl-info")
        port += 1
        job = cl.launch(LAYOUTS[2][1], [info, "--topology"], env={"HETCCL_GROUP_MAP": LAYOUTS[2][2]}, master_port=port)
        want = "transport shm+tcp (peers on one host: shm; on other hosts: tcp)"
        if job.wait(60) != [0] * 6 or want not in job.out(0):
            fail(f"hetccl-info --topology does not show '{want}':\n{job.show()}")
        print(f"check_multihost: hetccl-info --topology: {want}")
        port += 1
        print(f"check_multihost: bandwidth cut, 100 vs 800 Mbit/s links: {bandwidth_cut(cl, perf, port)}")
        for what in ("kill", "cut"):
            port += 1
            for line in fault(cl, rank_bin, what, port):
                print(f"check_multihost: {what} host 1: {line}")
    print(f"check_multihost: PASSED: {runs} checked runs on emulated hosts, a killed host and a cut link")
    return 0


if __name__ == "__main__":
    sys.exit(main())
