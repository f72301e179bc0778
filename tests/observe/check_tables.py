#!/usr/bin/env python3
"""What a spreadsheet or BI tool reads from a live 4-rank job (ranks a,a,b,b):
every rank's /status JSON has the fields docs/observability.md names, and
`hetccl-doctor --csv` turns the ranks' flight dumps (written on SIGUSR1) into
one CSV row per recorded call, with a header, the dump's columns, every
record's fields and a wall-clock start time near now.

  check_tables.py METRICS_JOB HETCCL_DOCTOR
Exit status 0 pass, 1 fail.
"""
import csv
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job import Job, get  # noqa: E402

CALLS = 50
# The fields docs/observability.md shows for /status and its Power Query example.
STATUS_FIELDS = {"format", "pid", "host", "port", "unix_s", "comms"}
COMM_FIELDS = {"comm", "rank", "nranks", "group_name", "groups", "transport", "border_path", "device", "state",
               "error", "calls_issued", "last_ended", "oldest_in_flight", "calls_ok", "calls_failed",
               "calls_enqueued", "calls_in_flight", "group_bytes", "border_bytes", "group_seconds",
               "border_seconds"}
CSV_FIRST = ["comm", "rank", "nranks", "host", "group", "transport", "border_path", "reason", "seq", "coll",
             "count", "dtype", "op", "root", "state", "result", "start_us", "end_us"]


def fail(msg):
    print(f"check_tables: FAILED: {msg}")
    sys.exit(1)


def main():
    binary, doctor = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as flight:
        with Job(binary, calls=CALLS, count=256, env={"HETCCL_FLIGHT_DIR": flight}) as job:
            job.wait_done()
            job.wait_up()
            for r in range(job.n):
                status = json.loads(get(job.url(r, "/status"))[1])
                if not STATUS_FIELDS <= status.keys():
                    fail(f"rank {r}'s /status lacks {sorted(STATUS_FIELDS - status.keys())}")
                comm = status["comms"][0]
                if not COMM_FIELDS <= comm.keys():
                    fail(f"rank {r}'s /status comms[0] lacks {sorted(COMM_FIELDS - comm.keys())}")
                if comm["rank"] != r or comm["state"] != "ok" or comm["calls_ok"] < CALLS:
                    fail(f"rank {r}'s /status: rank {comm['rank']}, state {comm['state']}, {comm['calls_ok']} ok")
            for p in job.procs:
                os.kill(p.pid, signal.SIGUSR1)
            deadline = time.time() + 30
            while len([f for f in os.listdir(flight) if f.endswith(".json")]) < job.n:
                if time.time() > deadline:
                    fail(f"dumps after SIGUSR1: {os.listdir(flight)}")
                time.sleep(0.1)
            time.sleep(0.5)  # the last dump's writer closes its file
        out = subprocess.run([doctor, "--csv", flight], capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            fail(f"hetccl-doctor --csv exited {out.returncode}: {out.stderr}")
        rows = list(csv.reader(io.StringIO(out.stdout)))
        header, body = rows[0], rows[1:]
        if header[:len(CSV_FIRST)] != CSV_FIRST or header[-1] != "start_unix_s":
            fail(f"header {header}")
        records = 0
        for name in os.listdir(flight):
            with open(os.path.join(flight, name)) as f:
                records += len(json.load(f)["records"])
        if len(body) != records:
            fail(f"{len(body)} rows for {records} records")
        col = {name: i for i, name in enumerate(header)}
        if any(len(row) != len(header) for row in body):
            fail("a row of another width than the header")
        per_rank = {}
        for row in body:
            per_rank.setdefault(int(row[col["rank"]]), []).append(row)
            start = float(row[col["start_unix_s"]])
            if abs(start - time.time()) > 600:
                fail(f"start_unix_s {start} is not near now: {row}")
        if sorted(per_rank) != [0, 1, 2, 3]:
            fail(f"rows of ranks {sorted(per_rank)}")
        for r, rs in per_rank.items():
            done = [x for x in rs if x[col["coll"]] == "AllReduce" and x[col["state"]] == "completed"]
            if len(done) < CALLS or {x[col["group"]] for x in rs} != {"a" if r < 2 else "b"}:
                fail(f"rank {r}: {len(done)} completed AllReduce rows, groups {({x[col['group']] for x in rs})}")
    print(f"check_tables: /status of 4 ranks, {len(body)} CSV rows from 4 dumps: PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
