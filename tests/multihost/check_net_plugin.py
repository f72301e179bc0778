#!/usr/bin/env python3
"""The net transport across two emulated hosts (emu_hosts.py), through the
tests' sockets plugin of NCCL's net ABI (tests/mp/netplugin_sockets.c).

  check_net_plugin.py HETCCL_PERF FAULT_NETNS_RANK NET_PLUGIN [--quick]

1. 2 hosts x 2 ranks, groups a,a | b,b (every border byte crosses hosts),
   HETCCL_TRANSPORT=intra=shm,inter=net: every collective checked against
   hetccl-perf's reference (8 B to 1 MiB; --quick: to 32 KiB), on ABI v8
   and on v11 (HETCCL_NET_PLUGIN_ABI); the plugin's record shows the
   version each rank called, and hetccl-perf shows the transport shm+net.
2. kill -9 of host 1's ranks while the four loop over AllReduce: host 0's
   ranks fail within HETCCL_TIMEOUT_S + 5 s naming the call and a peer.
Exit status 0 pass, 1 fail, 77 skip (not root, or namespaces unavailable).
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_hosts import Cluster, Unavailable  # noqa: E402

COLLS = ["allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv", "gather", "scatter"]
HOSTS = [0, 0, 1, 1]
GMAP = "0-1:a,2-3:b"
TIMEOUT_S = 5
LIMIT_S = TIMEOUT_S + 5


def fail(msg):
    print(f"check_net_plugin: FAILED: {msg}")
    sys.exit(1)


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def main():
    perf, rank_bin, plugin = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    maxb = "32K" if "--quick" in sys.argv else "1M"
    try:
        cl = Cluster(2)
    except Unavailable as e:
        print(f"check_net_plugin: SKIPPED: {e}")
        return 77
    port = 29700
    base = {"HETCCL_GROUP_MAP": GMAP, "HETCCL_TRANSPORT": "intra=shm,inter=net", "HETCCL_NET_PLUGIN": plugin,
            "HETCCL_DEBUG": "WARN"}
    with cl:
        for abi in (8, 11):
            record = tempfile.mktemp(prefix=f"netplugin_v{abi}_")
            for coll in COLLS:
                port += 1
                env = dict(base, HETCCL_TIMEOUT_S="30", HETCCL_NET_PLUGIN_ABI=str(abi), NETPLUGIN_TEST_RECORD=record)
                job = cl.launch(HOSTS, [perf, "-o", coll, "-b", "8", "-e", maxb, "-f", "32", "-n", "2", "-w", "1",
                                        "-c", "1"], env=env, master_port=port)
                codes = job.wait(120)
                if codes != [0] * 4 or "# Out of bounds values : 0 OK" not in job.out(0):
                    fail(f"{coll}, ABI v{abi}: exit codes {codes}\n{job.show()}")
                m = re.search(r"transport (\S+)", job.out(0))
                if not m or m.group(1) != "shm+net":
                    fail(f"{coll}, ABI v{abi}: transport {m.group(1) if m else '?'}, expected shm+net")
            with open(record) as f:
                inits = set(f.read().split("\n")) - {""}
            os.unlink(record)
            if inits != {f"init v{abi}"}:
                fail(f"ABI v{abi}: the plugin recorded {sorted(inits)}")
            print(f"check_net_plugin: ABI v{abi}: {len(COLLS)} collectives right over shm+net across two hosts")
        port += 1
        job = cl.launch(HOSTS, [rank_bin, "--max-seconds", "60"], master_port=port,
                        env=dict(base, HETCCL_TIMEOUT_S=str(TIMEOUT_S)))
        deadline = now() + 60
        while not all(re.search(r"^ITER 20 ", job.out(r), re.M) for r in range(4)):
            if now() > deadline or any(p.poll() is not None for p in job.procs):
                fail(f"kill: the ranks never reached 20 AllReduces\n{job.show()}")
            time.sleep(0.1)
        t_kill = now()
        cl.kill_host(1)
        codes = job.wait(LIMIT_S + 20)
        for r in (0, 1):
            m = re.search(r"^FAIL (\d+) (\d+) ([\d.]+) (.*)$", job.out(r), re.M)
            if codes[r] != 0 or not m:
                fail(f"kill: rank {r} exited {codes[r]} without a failed AllReduce\n{job.show()}")
            after, text = float(m.group(3)) - t_kill, m.group(4)
            if not 0 <= after <= LIMIT_S:
                fail(f"kill: rank {r}'s AllReduce failed {after:.1f} s after the kill (limit {LIMIT_S} s): {text}")
            peers = [p for p in re.findall(r"rank (\d+)", text) if int(p) in (2, 3)]
            if "hetcclAllReduce" not in text or not peers:
                fail(f"kill: rank {r}'s error names no call or no rank of host 1: {text}")
            print(f"check_net_plugin: kill host 1: rank {r} after {after:.1f} s: {text[:200]}")
    print("check_net_plugin: PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
