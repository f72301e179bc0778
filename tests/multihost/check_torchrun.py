#!/usr/bin/env python3
"""A multi-node torchrun job on two emulated hosts (emu_hosts.py): on each
host `torchrun --nnodes 2 --node-rank H --nproc-per-node 2` with the
environment a user gives on one host (HETCCL_GROUP_MAP, the job secret), the
native "hetccl" backend of hetccl_torch in every worker. Groups inside each
host (a,a | b,b: the border crosses hosts) and across them (a,b | a,b: the
border stays on each host). Every worker must print its ok line naming its
host.

  check_torchrun.py PYSITE
Exit status 0 pass, 1 fail, 77 skip (not root, no torchrun).
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emu_hosts import Cluster, Unavailable  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    site = sys.argv[1]
    torchrun = shutil.which("torchrun")
    if not torchrun:
        print("check_torchrun: SKIPPED: no torchrun")
        return 77
    try:
        cl = Cluster(2, subnet=82)
    except Unavailable as e:
        print(f"check_torchrun: SKIPPED: {e}")
        return 77
    port = 29800
    with cl:
        for gmap in ("0-1:a,2-3:b", "0:a,1:b,2:a,3:b"):
            port += 2
            # One torchrun a host; RANK and MASTER_* are the launcher's (the
            # host's index and host 0's address), as a cluster script gives them.
            # (--redirects/--tee 0, the defaults, fail in torch 1.13 under Python
            # 3.11, which leaves flag value 0 out of iteration: stdout is teed.)
            cmd = ["sh", "-c", f"exec {torchrun} --nnodes 2 --node_rank $RANK --nproc_per_node 2 "
                   f"--master_addr $MASTER_ADDR --master_port $MASTER_PORT --redirects 2 --tee 1 "
                   f"{HERE}/torchrun_job.py"]
            env = {"PYTHONPATH": site, "HETCCL_GROUP_MAP": gmap, "HETCCL_JOB_SECRET": "torchrun-test-secret",
                   "HETCCL_TIMEOUT_S": "60", "OMP_NUM_THREADS": "1"}
            job = cl.launch([0, 1], cmd, env=env, master_port=port)
            codes = job.wait(240)
            lines = [ln for h in (0, 1) for ln in job.out(h).splitlines() if "torchrun_job: ok" in ln]
            hosts = {int(m.group(1)): m.group(2) for m in
                     (re.search(r"ok rank (\d+) of 4 on (\S+),", ln) for ln in lines) if m}
            want = {0: "emu-host-0", 1: "emu-host-0", 2: "emu-host-1", 3: "emu-host-1"}
            if codes != [0, 0] or hosts != want:
                print(f"check_torchrun: FAILED: groups {gmap}: exit codes {codes}, ranks on {hosts}\n{job.show()}")
                return 1
            print(f"check_torchrun: groups {gmap}: 4 workers on 2 hosts, every collective right")
    print("check_torchrun: PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
