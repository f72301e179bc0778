#!/usr/bin/env python3
"""The timeline (HETCCL_TRACE_FILE) of a real job: hetccl-perf runs 4 host
ranks in groups a,a,b,b (AllReduce: group steps and border steps), each
rank writes its file; this checks every file's structure, that call spans
follow one another in call order without overlapping, that every group and
border step lies inside a call of its rank, that `hetccl-trace merge` joins
the four ranks, and that a path that cannot be written is a warning naming
the setting while the job still runs, and so is a trace whose writes fail
(a full disk: /dev/full).

  check_trace.py HETCCL_PERF HETCCL_TRACE
"""
import json
import os
import subprocess
import sys
import tempfile

SLACK_US = 1.0  # the file keeps 0.1 us; steady-to-wall conversion rounds


def fail(msg):
    print(f"check_trace: FAILED: {msg}")
    sys.exit(1)


def run_perf(perf, env_extra):
    env = dict(os.environ, **env_extra)
    p = subprocess.run([perf, "--np", "4", "--groups", "a,a,b,b", "--transport", "shm", "-o", "allreduce",
                        "-b", "8", "-e", "262144", "-f", "8", "-n", "3", "-w", "1", "-c", "1"],
                       env=env, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        fail(f"hetccl-perf exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
    if "# Out of bounds values : 0 OK" not in p.stdout:
        fail(f"hetccl-perf found wrong results:\n{p.stdout}")
    return p


def check_rank(path, rank):
    with open(path) as f:
        events = json.load(f)  # a finished rank closes its array
    if not isinstance(events, list) or not events:
        fail(f"{path}: not a JSON array of events")
    meta = {e["name"]: e for e in events if e.get("ph") == "M"}
    for name in ("process_name", "hetccl_clock_offset_us", "hetccl_end"):
        if name not in meta:
            fail(f"{path}: no {name} metadata")
    spans = [e for e in events if e.get("ph") == "X"]
    for e in spans:
        for k in ("name", "cat", "pid", "tid", "ts", "dur"):
            if k not in e:
                fail(f"{path}: span without {k}: {e}")
        if e["pid"] != rank or e["dur"] < 0:
            fail(f"{path}: span of pid {e['pid']} or negative duration: {e}")
    calls = sorted((e for e in spans if e["cat"] == "call"), key=lambda e: e["ts"])
    steps = [e for e in spans if e["cat"] in ("group", "border")]
    if len(calls) < 20:
        fail(f"{path}: {len(calls)} call spans, expected the sweep's calls")
    if not any(e["cat"] == "group" for e in steps) or not any(e["cat"] == "border" for e in steps):
        fail(f"{path}: an AllReduce across two groups of two shows group and border steps; got "
             f"{sorted(set(e['cat'] for e in steps))}")
    seqs = [c["args"]["seq"] for c in calls]
    if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
        fail(f"{path}: calls out of order: {seqs[:20]}")
    for a, b in zip(calls, calls[1:]):
        if a["ts"] + a["dur"] > b["ts"] + SLACK_US:
            fail(f"{path}: call #{a['args']['seq']} overlaps #{b['args']['seq']}")
    for s in steps:
        inside = [c for c in calls if c["tid"] == s["tid"] and c["ts"] - SLACK_US <= s["ts"] and
                  s["ts"] + s["dur"] <= c["ts"] + c["dur"] + SLACK_US]
        if len(inside) != 1:
            fail(f"{path}: step {s['name']} at {s['ts']} lies in {len(inside)} calls")
    return len(calls), len(steps)


def main():
    perf, tool = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as d:
        run_perf(perf, {"HETCCL_TRACE_FILE": os.path.join(d, "trace-%r.json")})
        for r in range(4):
            n, s = check_rank(os.path.join(d, f"trace-{r}.json"), r)
            print(f"rank {r}: {n} calls, {s} steps, nested and in order")
        out = os.path.join(d, "merged.json")
        m = subprocess.run(["/usr/bin/python3", tool, "merge", out] +
                           [os.path.join(d, f"trace-{r}.json") for r in range(4)], capture_output=True, text=True)
        if m.returncode != 0:
            fail(f"hetccl-trace merge: {m.stdout}{m.stderr}")
        merged = json.load(open(out))["traceEvents"]
        pids = {e["pid"] for e in merged if e.get("ph") == "X"}
        if pids != {0, 1, 2, 3}:
            fail(f"merged file holds ranks {sorted(pids)}")
        print(f"merged: {len(merged)} events of ranks 0-3")
        # A folder that does not exist: a warning, the job runs untraced.
        p = run_perf(perf, {"HETCCL_TRACE_FILE": os.path.join(d, "no-such-dir", "t-%r.json"), "HETCCL_DEBUG": "WARN"})
        if "HETCCL_TRACE_FILE" not in p.stdout + p.stderr:
            fail("no warning naming HETCCL_TRACE_FILE for a path that cannot be written")
        print("unwritable path: a warning naming HETCCL_TRACE_FILE, the job ran")
        # A full disk (/dev/full: every write fails with ENOSPC): one warning, right results.
        p = run_perf(perf, {"HETCCL_TRACE_FILE": "/dev/full", "HETCCL_DEBUG": "WARN"})
        if "HETCCL_TRACE_FILE: writing rank" not in p.stdout + p.stderr:
            fail("no warning naming HETCCL_TRACE_FILE for a trace whose writes fail")
        print("full disk: a warning naming HETCCL_TRACE_FILE, the job ran with right results")
    print("check_trace: ok")


if __name__ == "__main__":
    main()
