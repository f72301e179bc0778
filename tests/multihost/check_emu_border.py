#!/usr/bin/env python3
"""Emulated GPU ranks (device kind emu) on emulated hosts (emu_hosts.py):
the device border with border peers on other hosts, through its relay
(border/border_relay.h), then a host killed under it.

  check_emu_border.py HETCCL_PERF [--pairs PAIR_RELAY_RANK] [--quick] [--kind emu|cuda|hip] [--shared-network]

1. Layouts (ranks per host, groups by rank), every collective checked by
   hetccl-perf against its reference, 8 B to 1 MiB (--quick: to 64 KiB),
   with 64 KiB border parts (many slot uses a call):
     2 hosts x 2, groups a,a | b,b      (every border peer on the other host)
     2 hosts, a,a,b,b | c,c             (three groups: peers on this host and on the other)
     2 hosts, a,a,a | b,b               (groups of unequal sizes)
   Each must have set up the relay (its INFO line) and taken the device
   border for the calls it takes on one host (the TRACE lines of the
   border's calls): every collective; send/recv (hetccl-perf's ring: each
   rank sends to the next) where two neighbours of the ring are in
   different groups (on one host a pair channel or a pair link, across
   hosts the pair relay, whose channel is then made), and nowhere else
   (inside a group it is the vendor library's).
   With --pairs: pair_relay_rank's send/recv of every rank with every
   other (long messages in one group call, ring steps back to back, sizes
   from 4 B) on the same layouts, every result checked and no call staged;
   a send meeting a receive of half its size, which both ranks must fail
   naming both sizes; and a send waiting on the relay for a receive that
   never comes: aborted (abort and the stream's release within 1 s each,
   then a new communicator works), or its peer exiting (an error within
   HETCCL_TIMEOUT_S + 5 s naming it); a send to a rank that destroyed its
   communicator fails at once, saying so.
2. Encrypted links: 2 hosts x 2 (a,a | b,b), each host its own site
   (HETCCL_SITE_MAP, a job secret of its own): AllReduce right, and the
   border relay's three transports and the pair relay's on each rank
   connected encrypted (AES-256-GCM records, as every link across sites).
3. Emulated GPUs: a kernel launch inside a border call that waits for the
   device (HETCCL_EMU_LAZY_LOADING=2: kernels load lazily whatever the
   preload did), while the streams wait on the relay: both ranks fail
   within HETCCL_TIMEOUT_S + 20 s, naming the stalled enqueue. (Every other
   run here loads kernels lazily too, HETCCL_EMU_LAZY_LOADING=1, which the
   preload at init covers.)
4. kill -9 of host 1 while 2 hosts x 2 (a,a | b,b) loop over border
   AllReduces of 1 MiB and up: host 0's ranks exit with an error within
   HETCCL_TIMEOUT_S + 10 s, naming the device border or a peer.
--kind cuda (or hip) runs the same on a machine with one real GPU, which
every rank shares: one rank a group (a vendor library takes one rank a
GPU), layouts a | b and a,b | c, and the kill under a | b.
Without root or iproute2 (or with --shared-network) the hosts share the
machine's network (emu_hosts.Cluster(network=False): loopback between
them; their own hostname, IPC and /dev/shm still).
Exit status 0 pass, 1 fail, 77 skip (namespaces unavailable).
"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_hosts import Unavailable, any_cluster  # noqa: E402

COLLS = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv", "gather", "scatter"]
EMU_LAYOUTS = [
    # name, host of each rank, groups, collectives
    ("2 hosts x 2, groups a,a|b,b", [0, 0, 1, 1], "0-1:a,2-3:b", COLLS),
    ("2 hosts, groups a,a,b,b|c,c", [0, 0, 0, 0, 1, 1], "0-1:a,2-3:b,4-5:c", COLLS),
    ("2 hosts, groups a,a,a|b,b", [0, 0, 0, 1, 1], "0-2:a,3-4:b",
     ["allreduce", "broadcast", "broadcast -R 2", "reduce -R 2", "allgather", "reducescatter", "alltoall", "gather",
      "gather -R 2", "scatter", "scatter -R 2"]),
]
GPU_LAYOUTS = [
    ("2 hosts x 1, groups a|b", [0, 1], "0:a,1:b", COLLS),
    ("2 hosts, groups a,b|c", [0, 0, 1], "0:a,1:b,2:c", COLLS),
]
# What the TRACE line of a call that took the device border begins with.
BORDER_NAMES = {op: f"{name} of \\d+ bytes" for op, name in
                [("allreduce", "AllReduce"), ("allgather", "AllGather"), ("reducescatter", "ReduceScatter"),
                 ("broadcast", "Broadcast"), ("reduce", "Reduce"), ("alltoall", "AlltoAll"), ("gather", "Gather"),
                 ("scatter", "Scatter")]}
BORDER_NAMES["sendrecv"] = "send/recv: "


def groups_of(gmap):
    group = {}
    for part in gmap.split(","):
        ranks, name = part.split(":")
        lo, _, hi = ranks.partition("-")
        for r in range(int(lo), int(hi or lo) + 1):
            group[r] = name
    return group


def ring_pairs(hosts, gmap):
    """The ring's neighbours (r, r + 1) in different groups: (any, across hosts)."""
    group, n = groups_of(gmap), len(hosts)
    cross = [r for r in range(n) if group[r] != group[(r + 1) % n]]
    return bool(cross), any(hosts[r] != hosts[(r + 1) % n] for r in cross)
TIMEOUT_S = 5
# HETCCL_EMU_LAZY_LOADING=1: the emulated GPU loads kernels lazily, as CUDA
# does by default (a first launch waits for the device's streams, which may
# wait on the relay): the kernels plugin's preload at init must cover it.
ENV = {"HETCCL_GPU_BORDER_CHUNK": "65536", "NCCL_NVLS_ENABLE": "0",
       "HETCCL_EMU_LAZY_LOADING": "1"}


def fail(msg):
    print(f"check_emu_border: FAILED: {msg}")
    sys.exit(1)


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def run_layout(cl, perf, kind, name, hosts, gmap, coll, maxb, port):
    env = dict(ENV, HETCCL_DEVICE=kind, HETCCL_GROUP_MAP=gmap, HETCCL_TIMEOUT_S="60", HETCCL_DEBUG="TRACE",
               HETCCL_DEBUG_SUBSYS="INIT,COLL")
    op, extra = coll.split()[0], coll.split()[1:]  # e.g. "broadcast -R 2": a root of index 2
    job = cl.launch(hosts, [perf, "-o", op, "-b", "8", "-e", maxb, "-f", "8", "-n", "2", "-w", "1", "-c", "1"] + extra,
                    env=env, master_port=port)
    codes = job.wait(300)
    if codes != [0] * len(hosts) or "# Out of bounds values : 0 OK" not in job.out(0):
        fail(f"{name}: {coll}: exit codes {codes}\n{job.show()}")
    relayed = border = 0
    for r in range(len(hosts)):
        err = job.err(r)
        relayed += "relayed over tcp" in err
        border += len(re.findall(r"device border %s" % BORDER_NAMES[op], err))
    if not relayed:
        fail(f"{name}: {coll}: no rank set up the device border's relay\n{job.show()}")
    any_pair, far_pair = ring_pairs(hosts, gmap)
    takes = op != "sendrecv" or any_pair
    if op == "sendrecv" and far_pair and not any("send/recv relay: channel with rank" in job.err(r)
                                                 for r in range(len(hosts))):
        fail(f"{name}: {coll}: no rank made a channel of the send/recv relay\n{job.show()}")
    if takes and border == 0:
        fail(f"{name}: {coll}: no call took the device border\n{job.show()}")
    if not takes and border:
        fail(f"{name}: {coll}: {border} calls took the device border where they should stage\n{job.show()}")
    return border


def pair_relay(cl, rankbin, kind, name, hosts, gmap, port):
    """pair_relay_rank pairs: every result right, nothing staged."""
    env = dict(ENV, HETCCL_DEVICE=kind, HETCCL_GROUP_MAP=gmap, HETCCL_TIMEOUT_S="60", HETCCL_GPU_BORDER_MIN="0",
               HETCCL_DEBUG="INFO", HETCCL_DEBUG_SUBSYS="INIT,COLL")
    job = cl.launch(hosts, [rankbin, "pairs"], env=env, master_port=port)
    codes = job.wait(300)
    counts = []
    for r in range(len(hosts)):
        m = re.search(r"^PAIRS OK (\d+) (\d+) (\d+)$", job.out(r), re.M)
        if codes[r] != 0 or not m:
            fail(f"pairs {name}: rank {r} exited {codes[r]}\n{job.show()}")
        device, staged, none = (int(v) for v in m.groups())
        if staged or not device:
            fail(f"pairs {name}: rank {r}: {device} calls on the device, {staged} staged\n{job.show()}")
        counts.append(device)
    if not any("send/recv relay: channel with rank" in job.err(r) for r in range(len(hosts))):
        fail(f"pairs {name}: no rank made a channel of the send/recv relay\n{job.show()}")
    return f"every pair right; device calls by rank {counts}, none staged"


def pair_job(cl, rankbin, kind, port, mode, timeout_s=60, hosts=(0, 1), border_min="0"):
    """pair_relay_rank MODE on ranks 0 and 1 (groups a | b; by default one a host); the job and its exit codes."""
    env = dict(ENV, HETCCL_DEVICE=kind, HETCCL_GROUP_MAP="0:a,1:b", HETCCL_TIMEOUT_S=str(timeout_s),
               HETCCL_GPU_BORDER_MIN=border_min)
    job = cl.launch(list(hosts), [rankbin, mode], env=env, master_port=port)
    return job, job.wait(timeout_s + 60)


def size_mismatch(cl, rankbin, kind, port, hosts=(0, 1), mode="mismatch", border_min="0"):
    """A send of 256 KiB meets a receive of 128 KiB (across hosts, or on one host: hosts (0, 0)): both ranks
    fail, naming both sizes (on one host the second rank to enqueue finds it; the other learns of it from the
    device border, in its call's watch or its next hetcclCommGetAsyncError). border_min 192K: the send takes
    the border, the receive stages; the check is the same."""
    job, codes = pair_job(cl, rankbin, kind, port, mode, hosts=hosts, border_min=border_min)
    where = "on one host" if hosts[0] == hosts[1] else "across hosts"
    lines = []
    for r in range(2):
        m = re.search(r"^MISMATCH (\d+) ([\d.]+) (.*)$", job.out(r), re.M)
        if codes[r] != 0 or not m or "262144 bytes meets a receive of 131072 bytes" not in m.group(3):
            fail(f"size mismatch {where}: rank {r} (exit {codes[r]}) did not fail naming both sizes\n{job.show()}")
        lines.append(f"rank {r} failed (code {m.group(1)}) after {float(m.group(2)):.1f} s")
    return "; ".join(lines) + f": {m.group(3)[:160]}"


def stuck_send(cl, rankbin, kind, port, mode):
    """Rank 0's send waits on the relay for a rank 1 that never receives. abort: rank 0 aborts after 1 s;
    the abort and the stream's release each within 1 s, then a new communicator of rank 0 works. exit:
    rank 1 exits; rank 0 fails within HETCCL_TIMEOUT_S + 5 s naming rank 1."""
    job, codes = pair_job(cl, rankbin, kind, port, mode, TIMEOUT_S)
    out = job.out(0)
    if mode == "abort":
        m = re.search(r"^ABORT ([\d.]+) ([\d.]+) (\S+) ([\d.]+)", out, re.M)
        if codes[0] != 0 or not m or m.group(3) != "ok" or float(m.group(1)) > 1 or float(m.group(2)) > 1:
            fail(f"abort under a send across hosts: exit codes {codes}\n{job.show()}")
        return (f"abort {float(m.group(1)):.2f} s, stream free {float(m.group(2)):.2f} s after it, new communicator "
                f"ok (its own abort, one rank, nothing in flight: {float(m.group(4)):.2f} s)")
    m = re.search(r"^EXIT (\d+) ([\d.]+) (.*)$", out, re.M)
    if codes[0] != 0 or not m or float(m.group(2)) > TIMEOUT_S + 5 or "rank 1" not in m.group(3):
        fail(f"rank 1 exiting under a send across hosts: exit codes {codes}\n{job.show()}")
    return f"rank 0 failed (code {m.group(1)}) within {float(m.group(2)):.1f} s: {m.group(3)[:160]}"


def peer_left(cl, rankbin, kind, port):
    """A send to a rank that destroyed its communicator fails at once, saying so."""
    job, codes = pair_job(cl, rankbin, kind, port, "left")
    m = re.search(r"^LEFT (\d+) (.*)$", job.out(0), re.M)
    if codes != [0, 0] or not m or "destroyed its communicator" not in m.group(2):
        fail(f"a send to a rank that left: exit codes {codes}\n{job.show()}")
    return f"the send failed at once (code {m.group(1)}): {m.group(2)[:160]}"


def encrypted(cl, perf, kind, port):
    hosts, gmap = ([0, 0, 1, 1], "0-1:a,2-3:b") if kind == "emu" else ([0, 1], "0:a,1:b")
    sites = "0-1:h0,2-3:h1" if kind == "emu" else "0:h0,1:h1"
    env = dict(ENV, HETCCL_DEVICE=kind, HETCCL_GROUP_MAP=gmap, HETCCL_SITE_MAP=sites, HETCCL_ENCRYPT="cross-site",
               HETCCL_JOB_SECRET=os.urandom(32).hex(), HETCCL_TIMEOUT_S="60", HETCCL_DEBUG="INFO",
               HETCCL_DEBUG_SUBSYS="INIT,TRANSPORT")
    job = cl.launch(hosts, [perf, "-o", "allreduce", "-b", "8", "-e", "1M", "-f", "8", "-n", "2", "-w", "1", "-c", "1"],
                    env=env, master_port=port)
    codes = job.wait(300)
    if codes != [0] * len(hosts) or "# Out of bounds values : 0 OK" not in job.out(0):
        fail(f"encrypted: exit codes {codes}\n{job.show()}")
    err = job.err(0)
    # The communicator's tcp transport, the border relay's three and the
    # pair relay's: five, each with every peer (all on the other host)
    # encrypted.
    links = re.findall(r"tcp: rank 0 connected to (\d+) peers \((\d+) encrypted", err)
    relay = sum(1 for n, e in links if n == e)
    if "relayed over tcp" not in err or relay < 5 or relay != len(links):
        fail(f"encrypted: rank 0's tcp transports: {links} (want 5, every link encrypted)\n{job.show()}")
    return f"AllReduce right; rank 0's relays on {relay} transports, every link encrypted"


def kill_host(cl, perf, kind, port):
    hosts, gmap = ([0, 0, 1, 1], "0-1:a,2-3:b") if kind == "emu" else ([0, 1], "0:a,1:b")
    survivors = [r for r in range(len(hosts)) if hosts[r] == 0]
    env = dict(ENV, HETCCL_DEVICE=kind, HETCCL_GROUP_MAP=gmap, HETCCL_TIMEOUT_S=str(TIMEOUT_S))
    # Calls of 1 MiB and up, each size synchronised: no long backlog of
    # enqueued calls for the emulated streams to drain after the release.
    job = cl.launch(hosts, [perf, "-o", "allreduce", "-b", "1M", "-e", "64M", "-i", "4096", "-n", "5", "-w", "0",
                            "-c", "0"], env=env, master_port=port)
    time.sleep(6)  # init and a few hundred calls
    if any(p.poll() is not None for p in job.procs):
        fail(f"kill: a rank ended before host 1 was killed\n{job.show()}")
    t_kill = now()
    cl.kill_host(1)
    limit = TIMEOUT_S + 10
    lines = []
    for r in survivors:
        try:
            job.procs[r].wait(timeout=max(0.1, t_kill + limit + 20 - now()))
        except Exception:
            pass
        code = job.procs[r].poll()
        after = now() - t_kill
        if code is None:
            job.procs[r].kill()
            fail(f"kill: rank {r} still runs {after:.0f} s after host 1 was killed\n{job.show()}")
        if code == 0:
            fail(f"kill: rank {r} exited 0 after host 1 was killed\n{job.show()}")
        if after > limit + 1:
            fail(f"kill: rank {r} exited {after:.1f} s after host 1 was killed (limit {limit} s)")
        text = job.err(r) + job.out(r)
        m = re.search(r"^.*(device border|rank [%s]).*$" % "".join(str(q) for q in range(len(hosts)) if hosts[q]),
                      text, re.M)
        if not m:
            fail(f"kill: rank {r}'s error names neither the device border nor a rank of host 1\n{job.show()}")
        lines.append(f"rank {r} exited {code} within {after:.1f} s: {m.group(0).strip()[:200]}")
    job.wait(30)
    return lines


def stalled(cl, perf, port):
    """Emulated GPUs only: HETCCL_EMU_LAZY_LOADING=2 ignores the preload, so the
    first fold kernel's launch waits for streams that wait on the relay, which
    waits for that thread: the relay must fail the call within the timeout."""
    env = dict(ENV, HETCCL_DEVICE="emu", HETCCL_GROUP_MAP="0:a,1:b", HETCCL_TIMEOUT_S=str(TIMEOUT_S),
               HETCCL_EMU_LAZY_LOADING="2")
    t0 = now()
    job = cl.launch([0, 1], [perf, "-o", "allreduce", "-b", "1M", "-e", "1M", "-n", "1", "-w", "0", "-c", "0"],
                    env=env, master_port=port)
    limit = TIMEOUT_S + 20
    codes = job.wait(limit + 30)
    took = now() - t0
    if any(c in (0, "hung") for c in codes) or took > limit:
        fail(f"stalled enqueue: exit codes {codes} after {took:.0f} s (want failures within {limit} s)\n{job.show()}")
    text = job.err(0) + job.out(0) + job.err(1) + job.out(1)
    if "enqueuing a call" not in text:
        fail(f"stalled enqueue: no rank names the stalled enqueue\n{job.show()}")
    return f"both ranks failed within {took:.0f} s, naming the stalled enqueue"


def main():
    perf = sys.argv[1]
    rankbin = sys.argv[sys.argv.index("--pairs") + 1] if "--pairs" in sys.argv else None
    kind = sys.argv[sys.argv.index("--kind") + 1] if "--kind" in sys.argv else "emu"
    # A real GPU that two ranks of one host share stages calls under 1 MiB
    # (HETCCL_GPU_BORDER_MIN's default there): sizes up to 2 MiB.
    maxb = "64K" if "--quick" in sys.argv else "1M" if kind == "emu" else "2M"
    try:
        cl = any_cluster(2, "check_emu_border", shared="--shared-network" in sys.argv)
    except Unavailable as e:
        print(f"check_emu_border: SKIPPED: {e}")
        return 77
    port = 29700
    with cl:
        for name, hosts, gmap, colls in (EMU_LAYOUTS if kind == "emu" else GPU_LAYOUTS):
            counts = []
            for coll in colls:
                port += 1
                counts.append(f"{coll} {run_layout(cl, perf, kind, name, hosts, gmap, coll, maxb, port)}")
            print(f"check_emu_border: {name}: right; border calls (all ranks): {', '.join(counts)}")
            if rankbin:
                port += 1
                print(f"check_emu_border: {name}: send/recv: {pair_relay(cl, rankbin, kind, name, hosts, gmap, port)}")
        if rankbin:
            checks = [("size mismatch across hosts", lambda p: size_mismatch(cl, rankbin, kind, p))]
            checks += [(f"size mismatch on one host ({m})",
                        lambda p, m=m: size_mismatch(cl, rankbin, kind, p, hosts=(0, 0), mode=m))
                       for m in ("mismatch", "mismatch-late")]
            checks += [("size mismatch on one host, the send on the border and the receive staged",
                        lambda p: size_mismatch(cl, rankbin, kind, p, hosts=(0, 0), border_min="192K"))]
            checks += [("a send to a rank that left", lambda p: peer_left(cl, rankbin, kind, p))]
            checks += [(f"{m} under a send across hosts", lambda p, m=m: stuck_send(cl, rankbin, kind, p, m))
                       for m in ("abort", "exit")]
            for label, check in checks:
                port += 1
                print(f"check_emu_border: {label}: {check(port)}")
        port += 1
        print(f"check_emu_border: encrypted, a site a host: {encrypted(cl, perf, kind, port)}")
        if kind == "emu":
            port += 1
            print(f"check_emu_border: a launch that waits for the device: {stalled(cl, perf, port)}")
        port += 1
        for line in kill_host(cl, perf, kind, port):
            print(f"check_emu_border: kill host 1: {line}")
    print("check_emu_border: PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
