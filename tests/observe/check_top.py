#!/usr/bin/env python3
"""hetccl-top on a live 4-rank job (groups a, a, b, b): with --plain, 3
frames (each followed by a blank line, no escape codes), each listing the
4 ranks with calls/s > 0 and border GB/s > 0 and a job line naming the
link classes with the border carrying data; an endpoint that does not
answer is a row marked unreachable, not a crash. Without --plain, each
frame is drawn in place (cursor home, clear) and the cursor is shown again
at the end. The ranks (which check their AllReduce results) end well.
The plain frames are kept as ARTIFACT_DIR/hetccl-top.txt.

  check_top.py METRICS_JOB TOOLS_DIR ARTIFACT_DIR
Exit status 0 pass, 1 fail.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job import Job, free_ports  # noqa: E402

RANKS = 4
LINKS = ("group", "border_host", "border_remote")
HOME, CLEAR, SHOW_CURSOR = "\x1b[H", "\x1b[2J", "\x1b[?25h"


def fail(msg):
    print(f"FAILED: check_top: {msg}")
    sys.exit(1)


def top(tools, args, timeout=60):
    cmd = [sys.executable, os.path.join(tools, "hetccl-top"), *args]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail(f"ran over {timeout} s: {' '.join(cmd)}")
    if out.returncode != 0:
        fail(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr[-1500:]}")
    return out.stdout


def check_frame(n, text, dead):
    """One --plain frame: the job line and a row per rank, read by the header's column names."""
    lines = text.split("\n")
    job = next((line for line in lines if line.startswith("job: ")), None)
    if job is None:
        fail(f"frame {n} has no 'job:' line:\n{text}")
    bw = dict(re.findall(r"\b(group|border_host|border_remote) ([0-9.]+) GB/s", job))
    if set(bw) != set(LINKS) or float(bw["border_host"]) <= 0:
        fail(f"frame {n}'s job line does not give GB/s of {', '.join(LINKS)} with border_host > 0: {job}")
    head = next((i for i, line in enumerate(lines) if line.startswith("RANK ")), None)
    if head is None:
        fail(f"frame {n} has no RANK header:\n{text}")
    cols = lines[head].split()
    rows = {}
    for line in lines[head + 1:]:
        cells = line.split()
        if cells and cells[0].isdigit():
            rows[int(cells[0])] = dict(zip(cols, cells))
        elif dead in line and "unreachable" not in line:
            fail(f"frame {n}: the endpoint {dead} that does not answer is not marked unreachable: {line}")
    if sorted(rows) != list(range(RANKS)):
        fail(f"frame {n} lists ranks {sorted(rows)}, expected 0..{RANKS - 1}:\n{text}")
    if not any(dead in line and "unreachable" in line for line in lines):
        fail(f"frame {n} has no row for the endpoint {dead} that does not answer:\n{text}")
    for r, row in rows.items():
        try:
            calls, border = float(row["CALLS/S"]), float(row["BORDER_GB/S"])
        except (KeyError, ValueError):
            fail(f"frame {n}, rank {r}: no numbers under CALLS/S and BORDER_GB/S: {row}")
        if calls <= 0 or border <= 0:
            fail(f"frame {n}, rank {r}: calls/s {calls}, border GB/s {border}; both should be > 0")
    return [round(float(rows[r]["CALLS/S"])) for r in range(RANKS)]


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip())
        return 2
    job_bin, tools, artifacts = sys.argv[1:4]
    os.makedirs(artifacts, exist_ok=True)
    t0 = time.time()
    # LOOP_S covers the two runs (about 3 s here). Then the ranks stop together;
    # wait_done and leaving the block check their results and exit codes.
    with Job(job_bin, calls=0, count=4096, loop_s=12) as job:
        job.wait_up()
        ports = f"{job.port(0)}-{job.port(RANKS - 1)}"
        dead = f"127.0.0.1:{free_ports(1)}"  # free a moment ago: nothing answers there
        plain = top(tools, ["--ports", ports, "--endpoints", dead, "--plain", "--iterations", "3", "--interval", "0.5"])
        with open(os.path.join(artifacts, "hetccl-top.txt"), "w") as f:
            f.write(plain)
        if "\x1b" in plain:
            fail(f"--plain output has escape codes: {plain[:300]!r}")
        if not plain.endswith("\n\n"):
            fail(f"--plain output does not end its last frame with a blank line: {plain[-300:]!r}")
        frames = plain.rstrip("\n").split("\n\n")
        if len(frames) != 3:
            fail(f"--iterations 3 --plain gave {len(frames)} frames:\n{plain}")
        calls = [check_frame(n, text, dead) for n, text in enumerate(frames)]

        ansi = top(tools, ["--ports", ports, "--iterations", "2", "--interval", "0.5"])
        if ansi.count(HOME) != 2 or CLEAR not in ansi or not ansi.endswith(SHOW_CURSOR):
            fail(f"without --plain, 2 frames should each start at cursor home ({HOME!r}), the first clear the "
                 f"screen ({CLEAR!r}) and the cursor be shown at the end ({SHOW_CURSOR!r}): {ansi[:200]!r}...")
        if ansi.count("RANK ") != 2:
            fail(f"without --plain, {ansi.count('RANK ')} tables drawn for --iterations 2")
        ended = [r for r, p in enumerate(job.procs) if p.poll() is not None]
        if ended:
            fail(f"ranks {ended} ended while hetccl-top read them (LOOP_S too short for this machine?)")
        done = job.wait_done()
    print(f"check_top: 3 plain frames of {RANKS} ranks (calls/s per frame {calls}), an unreachable endpoint shown, "
          f"2 frames drawn in place; the ranks made {min(done)} calls, results right; {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
