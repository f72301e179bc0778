#!/usr/bin/env python3
"""hetccl-dashboard on a live 4-rank job (groups a, a, b, b, so the border
carries data), seen the way a person sees it: headless chromium loads the
page, whose JavaScript polls /api/snapshot and renders, and the test reads
the numbers back from the dumped DOM: 4 rank rows, each with calls/s > 0
and border GB/s > 0, a bandwidth chart line per rank and link class, and
more than one snapshot rendered. Also: a POST gets 405, a screenshot of
the page is kept as ARTIFACT_DIR/hetccl-dashboard.png, and the ranks
(which check their AllReduce results) end well.

  check_dashboard.py METRICS_JOB TOOLS_DIR ARTIFACT_DIR
Exit status 0 pass, 1 fail, 77 skip (no chromium).
"""
import contextlib
import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job import Job, free_ports, get  # noqa: E402

RANKS = 4
# Virtual time: chromium runs the page's timers on a virtual clock that does
# not advance while a fetch() is pending, so 8 s of it renders about 8
# snapshots and returns as soon as the page idles (about 5 s of real time
# on 2 cores). Measured with chromium 156: the fetches complete, and the
# dumped DOM holds the rendered table.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
                  "--virtual-time-budget=8000"]
MIN_PNG_BYTES = 20000  # a blank 1400x900 page is about 5 KB; the table and charts make it several times that


def fail(msg):
    print(f"FAILED: check_dashboard: {msg}")
    sys.exit(1)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Dom(html.parser.HTMLParser):
    """What the test reads from the rendered page."""

    def __init__(self):
        super().__init__()
        self.updates = None
        self.rows = []            # data-rank of each tr.rank-row
        self.cells = {}           # (class, rank) -> data-value
        self.lines = {}           # (link, rank) -> number of points of its polyline
        self.straggler = None
        self.in_straggler = False
        self.text = ""
        self.alltext = ""         # every text of the page

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "body":
            self.updates = a.get("data-updates")
        elif tag == "tr" and "rank-row" in classes:
            self.rows.append(a.get("data-rank"))
        elif tag == "td" and classes:
            self.cells[(classes[0], a.get("data-rank"))] = a.get("data-value")
        elif tag == "polyline" and "series" in classes:
            self.lines[(a.get("data-link"), a.get("data-rank"))] = int(a.get("data-points") or 0)
        elif a.get("id") == "straggler":
            self.straggler = a.get("class")
            self.in_straggler = True

    def handle_endtag(self, tag):
        self.in_straggler = False

    def handle_data(self, data):
        self.alltext += data
        if self.in_straggler:
            self.text += data


def chromium(binary, url, extra, timeout=120):
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        cmd = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            fail(f"chromium ran over {timeout} s: {' '.join(cmd)}")
    if out.returncode != 0:
        fail(f"chromium exited {out.returncode}: {out.stderr[-1500:]}")
    return out.stdout


def number(dom, cls, rank):
    v = dom.cells.get((cls, str(rank)))
    try:
        return float(v)
    except (TypeError, ValueError):
        fail(f"rank {rank}: no number in <td class={cls}> (data-value {v!r}); rows {dom.rows}")


def wait_snapshot(url, timeout=30):
    """The snapshot once every rank is in it with a rate (two polls done)."""
    deadline = time.time() + timeout
    snap = None
    while time.time() < deadline:
        try:
            snap = json.loads(get(url, timeout=3)[1])
            live = [r for r in snap["ranks"] if r.get("rank") is not None and (r.get("calls_per_s") or 0) > 0]
            if len(live) == RANKS:
                return snap
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    fail(f"/api/snapshot never showed {RANKS} ranks with calls/s: {json.dumps(snap)[:1500]}")


def look(browser, page, png, job):
    """The checks on the served page while the job runs; the parsed DOM and the screenshot's size."""
    snap = wait_snapshot(page + "api/snapshot")
    if snap["job"]["gbps"]["border_host"] is None or snap["job"]["gbps"]["border_host"] <= 0:
        fail(f"the snapshot shows no border_host traffic: {snap['job']}")

    try:
        req = urllib.request.Request(page + "api/snapshot", data=b"x=1", method="POST")
        code = urllib.request.urlopen(req, timeout=5).status
    except urllib.error.HTTPError as e:
        code = e.code
    if code != 405:
        fail(f"POST /api/snapshot answered {code}, expected 405")

    dom = Dom()
    dom.feed(chromium(browser, page, ["--dump-dom"]))
    if sorted(dom.rows) != [str(r) for r in range(RANKS)]:
        fail(f"rank rows in the page: {dom.rows}, expected 0..{RANKS - 1}")
    for r in range(RANKS):
        calls, border = number(dom, "calls-per-s", r), number(dom, "border-gbps", r)
        if calls <= 0 or border <= 0:
            fail(f"rank {r} in the page: calls/s {calls}, border GB/s {border}; both should be > 0")
        for link in ("group", "border_host"):
            if dom.lines.get((link, str(r)), 0) < 1:
                fail(f"no {link} chart line for rank {r}: {dom.lines}")
    if not dom.updates or int(dom.updates) < 2:
        fail(f"body data-updates is {dom.updates!r}: the page rendered fewer than 2 snapshots")
    if dom.straggler not in ("none", "found"):
        fail(f"no #straggler verdict in the page (class {dom.straggler!r})")

    chromium(browser, page, [f"--screenshot={png}", "--window-size=1400,900"])
    if not os.path.exists(png):
        fail(f"chromium wrote no screenshot at {png}")
    with open(png, "rb") as f:
        head = f.read(24)
    size = os.path.getsize(png)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or size < MIN_PNG_BYTES:
        fail(f"{png}: not a PNG of a rendered page ({size} bytes, starts {head[:8]!r})")
    width, height = struct.unpack(">II", head[16:24])
    if (width, height) != (1400, 900):
        fail(f"{png} is {width}x{height}, expected 1400x900")
    ended = [r for r, p in enumerate(job.procs) if p.poll() is not None]
    if ended:
        fail(f"ranks {ended} ended while the page was read (LOOP_S too short for this machine?)")
    return dom, size


@contextlib.contextmanager
def serving(tools, job):
    """hetccl-dashboard reading the job's endpoints, on a free port: yields its page's URL."""
    port = free_ports(1)
    dash = subprocess.Popen([sys.executable, os.path.join(tools, "hetccl-dashboard"),
                             "--ports", f"{job.port(0)}-{job.port(RANKS - 1)}", "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        dash.terminate()
        try:
            dash.wait(timeout=10)
        except subprocess.TimeoutExpired:
            dash.kill()


def look_failed(browser, job_bin, tools, png):
    """A job whose communicator failed (a mismatched Broadcast root): the page
    shows every rank's row failed with the reason, and errors counted."""
    with Job(job_bin, calls=20, count=1024, env={"MISMATCH_AT_END": "1"}) as job:
        job.wait_up()
        job.wait_done()
        with serving(tools, job) as page:
            deadline = time.time() + 30
            while True:
                try:
                    snap = json.loads(urllib.request.urlopen(page + "api/snapshot", timeout=5).read())
                    if len(snap.get("job", {}).get("failed", [])) == RANKS:
                        break
                except (OSError, ValueError):
                    snap = None
                if time.time() > deadline:
                    fail(f"/api/snapshot never showed {RANKS} failed ranks: {json.dumps(snap)[:1500]}")
                time.sleep(0.2)
            dom = Dom()
            dom.feed(chromium(browser, page, ["--dump-dom"]))
            states = {r: dom.cells.get(("state", str(r))) for r in range(RANKS)}
            if any(s != "failed" for s in states.values()):
                fail(f"the page shows states {states} for a job whose communicator failed on every rank")
            errors = sum(int(float(dom.cells.get(("errors", str(r))) or 0)) for r in range(RANKS))
            if errors < RANKS:
                fail(f"the page counts {errors} errors; every rank failed at least one call")
            if "Broadcast" not in dom.alltext:
                fail("the page does not say which call failed (no 'Broadcast' in the failed rows' reasons)")
            chromium(browser, page, [f"--screenshot={png}", "--window-size=1400,900"])
            if not os.path.exists(png):
                fail(f"chromium wrote no screenshot at {png}")
    return errors


def main():
    if len(sys.argv) != 4:
        print(__doc__.strip())
        return 2
    job_bin, tools, artifacts = sys.argv[1:4]
    browser = find_chromium()
    if not browser:
        print("check_dashboard: skipped: no chromium (chromium, chromium-browser or google-chrome) on PATH")
        return 77
    os.makedirs(artifacts, exist_ok=True)
    png = os.path.join(artifacts, "hetccl-dashboard.png")
    if os.path.exists(png):
        os.remove(png)
    t0 = time.time()
    # LOOP_S covers both chromium runs (under 10 s together on 2 cores with the 4
    # ranks busy). Then the ranks stop together; wait_done and leaving the block
    # check that their results stayed right while they were watched, and that they exited 0.
    with Job(job_bin, calls=0, count=4096, loop_s=25) as job:
        job.wait_up()
        with serving(tools, job) as page:
            dom, size = look(browser, page, png, job)
        done = job.wait_done()
    failed_png = os.path.join(artifacts, "hetccl-dashboard-failed.png")
    errors = look_failed(browser, job_bin, tools, failed_png)
    calls = [round(number(dom, "calls-per-s", r)) for r in range(RANKS)]
    print(f"check_dashboard: chromium rendered {dom.updates} snapshots of {RANKS} ranks "
          f"(calls/s {calls}, {dom.text.strip() or 'no straggler'}); POST got 405; "
          f"screenshot {png} ({size} bytes); the ranks made {min(done)} calls, results right; "
          f"a failed job: every rank's row failed, {errors} errors, screenshot {failed_png}; {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
