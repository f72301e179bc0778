#!/usr/bin/env python3
"""An elastic job on emulated hosts (emu_hosts.py): a rank lost mid-training,
the survivors shrink and train on, replacements grow the job back.

  check_elastic.py ELASTIC_RANK [--transport tcp|auto|ofi|ucx] [--fault kill|cut]

4 ranks on 2 hosts, groups a,a | b,b (HETCCL_GROUP_MAP), started
torchrun-style, train: each step an AllReduce checked in full
(elastic_rank.cc). Once every rank has run 20 steps, the fault:
  kill  kill -9 of rank 3 (host 1); the survivors learn it from the
        closed links. The agent (this script) starts a replacement on
        host 1, group b.
  cut   host 1's link set down: ranks 2 and 3 live on but are cut off and
        no process exit is seen; the survivors learn it at their
        HETCCL_TIMEOUT_S (5 s here). The agent starts two replacements on
        a third host, group b; the cut-off ranks, when their own calls
        fail, read that they are counted lost and leave.
The agent writes the lost ranks to the job's folder (DIR/dead); the
survivors shrink past them (HETCCL_SHRINK_ABORT), train on the shrunk
communicator, and once every replacement is up (DIR/join.R) rank 0 makes
the grow id and hands it over in DIR/grow-id; all grow back to 4 ranks
and run 30 more checked steps.
Prints `figure elastic_regrow_hosts transport=T fault=F kill_to_training_s=S
target_s=30 timeout_s=5` (S: from the fault to the last rank's first right
step on the grown communicator, replacement start-up included) and fails
past 90 s. Transports between hosts (shm inside each): tcp; auto (no
HETCCL_TRANSPORT: the survivors' shrunk communicator, on one host, leaves
the choice between hosts to auto for the grow, as the replacement does);
ofi on libfabric's tcp provider over eth0; ucx with UCX_TLS=tcp over eth0.
CMake registers ofi and ucx only where they are built.
Exit status 0 pass, 1 fail, 77 skip (not root, or no namespaces).
"""
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_hosts import Cluster, Unavailable  # noqa: E402

HOSTS = [0, 0, 1, 1]
GMAP = "0-1:a,2-3:b"
TIMEOUT_S = 5
TARGET_S = 30
BOUND_S = 90
TRANSPORTS = {
    "auto": {},  # HETCCL_TRANSPORT unset: shm inside a host, auto's choice between (tcp here)
    "tcp": {"HETCCL_TRANSPORT": "intra=shm,inter=tcp"},
    "ofi": {"HETCCL_TRANSPORT": "intra=shm,inter=ofi", "FI_PROVIDER": "tcp", "FI_TCP_IFACE": "eth0"},
    "ucx": {"HETCCL_TRANSPORT": "intra=shm,inter=ucx", "UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"},
}


def fail(msg):
    print(f"check_elastic: FAILED: {msg}")
    sys.exit(1)


def now():
    return time.clock_gettime(time.CLOCK_MONOTONIC)


def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def lines(text, tag):
    return [l.split()[1:] for l in text.splitlines() if l.startswith(tag + " ")]


def show(procs):
    return "\n".join(f"--- {name}: exit {job.procs[i].poll()}\n{job.out(i)[-1200:]}{job.err(i)[-1500:]}"
                     for name, job, i in procs)


def run(cl, rank_bin, transport, fault):
    work = tempfile.mkdtemp(dir=cl.work)
    env = dict(TRANSPORTS[transport], HETCCL_TIMEOUT_S=str(TIMEOUT_S), HETCCL_DEBUG="WARN")
    job = cl.launch(HOSTS, [rank_bin, "train", work], env=dict(env, HETCCL_GROUP_MAP=GMAP), master_port=29600)
    procs = [(f"rank {r}", job, r) for r in range(4)]
    deadline = now() + 60
    while not all(re.search(r"^ITER 20 ", job.out(r), re.M) for r in range(4)):
        if now() > deadline or any(p.poll() is not None for p in job.procs):
            fail(f"{transport}: the ranks never reached 20 steps\n{show(procs)}")
        time.sleep(0.05)
    t_fault = now()
    if fault == "kill":
        job.procs[3].kill()
        job.procs[3].wait()  # the agent sees the exit, as torchrun's does
        dead, spare = [3], 1
    else:
        cl.cut_link(1)  # no exit is seen: the agent counts the host lost
        dead, spare = [2, 3], 2
    with open(os.path.join(work, "dead.part"), "w") as f:
        f.write(" ".join(map(str, dead)) + "\n")
    os.rename(os.path.join(work, "dead.part"), os.path.join(work, "dead"))
    joins = []
    for r in dead:  # the replacement's group from HETCCL_GROUP: the map names only the first ranks
        j = cl.launch([spare], [rank_bin, "join", work, str(r), "4"], env=dict(env, HETCCL_GROUP="b"),
                      master_port=29600)
        joins.append((r, j))
        procs.append((f"replacement rank {r} on host {spare}", j, 0))
    codes = job.wait(BOUND_S + 30)
    jcodes = [j.wait(max(1, t_fault + BOUND_S + 30 - now()))[0] for _, j in joins]
    survivors = [r for r in range(4) if r not in dead]
    resumed = []
    for r in survivors:
        out = job.out(r)
        if codes[r] != 0 or not lines(out, "DONE"):
            fail(f"{transport}/{fault}: survivor rank {r} exited {codes[r]} before training on\n{show(procs)}")
        failed = lines(out, "FAIL")
        if not failed:
            fail(f"{transport}/{fault}: survivor rank {r} saw no failed step\n{show(procs)}")
        shrunk = lines(out, "SHRUNK")
        if not shrunk or int(shrunk[0][0]) != len(survivors):
            fail(f"{transport}/{fault}: rank {r} did not shrink to {len(survivors)} ranks\n{show(procs)}")
        resumed.append(float(lines(out, "RESUMED")[0][1]))
        print(f"check_elastic: {transport}/{fault}: rank {r} failed {float(failed[0][2]) - t_fault:.2f} s after "
              f"the fault ({' '.join(failed[0][3:])[:140]}), shrank to {len(survivors)} at "
              f"{float(shrunk[0][2]) - t_fault:.2f} s")
    for (r, j), code in zip(joins, jcodes):
        if code != 0 or not lines(j.out(0), "DONE"):
            fail(f"{transport}/{fault}: replacement rank {r} exited {code} before training\n{show(procs)}")
        resumed.append(float(lines(j.out(0), "RESUMED")[0][1]))
    if fault == "kill" and codes[3] != -9:
        fail(f"{transport}/kill: rank 3 exited {codes[3]}, expected the kill (-9)")
    if fault == "cut":
        for r in dead:  # cut off, they fail at their own timeout and leave the job
            if codes[r] != 0 or not lines(job.out(r), "FENCED"):
                fail(f"{transport}/cut: cut-off rank {r} exited {codes[r]} without leaving the job\n{show(procs)}")
    seconds = max(resumed) - t_fault
    print(f"figure elastic_regrow_hosts transport={transport} fault={fault} kill_to_training_s={seconds:.3f} "
          f"target_s={TARGET_S} timeout_s={TIMEOUT_S}")
    if seconds > BOUND_S:
        fail(f"{transport}/{fault}: {seconds:.1f} s from the fault to training on the grown communicator "
             f"(bound {BOUND_S} s, target {TARGET_S} s)")
    return seconds


def main():
    rank_bin = sys.argv[1]
    transport = arg("--transport", "tcp")
    fault = arg("--fault", "kill")
    if transport not in TRANSPORTS or fault not in ("kill", "cut"):
        print(f"check_elastic: bad --transport {transport} or --fault {fault} (tcp, auto, ofi, ucx; kill, cut)")
        return 1
    try:
        cl = Cluster(3 if fault == "cut" else 2)
    except Unavailable as e:
        print(f"check_elastic: SKIPPED: {e}")
        return 77
    with cl:
        seconds = run(cl, rank_bin, transport, fault)
    print(f"check_elastic: PASSED: {transport}/{fault}: training on 4 ranks again {seconds:.2f} s after the fault")
    return 0


if __name__ == "__main__":
    sys.exit(main())
