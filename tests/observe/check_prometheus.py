#!/usr/bin/env python3
"""A real Prometheus server (Debian's `prometheus`) scrapes the metrics
endpoints of a live 4-rank job (groups a,a,b,b, HETCCL_METRICS_PORT) and
the values it stores, read back through its HTTP query API, are the job's:
every rank's AllReduce count and bytes (and `promtool check metrics`
passes the page), the duration histogram's count, a
quantile of it, border bytes on this host, no errors, no failed
communicator, and each equal to what the endpoint itself serves.

  check_prometheus.py METRICS_JOB
Exit status 0 pass, 1 fail, 77 skip (no prometheus binary).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job import Job, free_ports, get  # noqa: E402

CALLS, COUNT = 300, 1024


def fail(msg):
    print(f"check_prometheus: FAILED: {msg}")
    sys.exit(1)


def parse_metrics(text):
    """{(name, frozenset(labels)): value} of a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, value = line.rsplit(" ", 1)
        name, _, labels = head.partition("{")
        pairs = frozenset(tuple(kv.split("=", 1)) for kv in labels.rstrip("}").split(",") if kv)
        out[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return out


def total(metrics, name, **want):
    return sum(v for (n, labels), v in metrics.items()
               if n == name and all((k, w) in labels for k, w in want.items()))


def query(port, q):
    status, body = get(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
    data = json.loads(body)
    if data.get("status") != "success":
        fail(f"prometheus query {q}: {body}")
    return data["data"]["result"]


def scalar(port, q):
    r = query(port, q)
    return float(r[0]["value"][1]) if r else None


def main():
    job_bin = sys.argv[1]
    prom = shutil.which("prometheus")
    if not prom:
        print("check_prometheus: SKIPPED: no prometheus binary (Debian: prometheus)")
        return 77
    with tempfile.TemporaryDirectory() as d, Job(job_bin, calls=CALLS, count=COUNT) as job:
        job.wait_up()
        job.wait_done()
        pages = [get(job.url(r, "/metrics"))[1] for r in range(job.n)]
        lint = subprocess.run([shutil.which("promtool") or "promtool", "check", "metrics"], input=pages[0],
                              capture_output=True, text=True)
        if lint.returncode != 0:
            fail(f"promtool check metrics: {lint.stdout}{lint.stderr}")
        direct = [parse_metrics(p) for p in pages]
        for r, m in enumerate(direct):
            got = total(m, "hetccl_calls_total", collective="AllReduce", status="ok")
            if got != CALLS:
                fail(f"rank {r}'s endpoint counts {got} AllReduces, the job made {CALLS}")
        ppn = free_ports(1)
        targets = ", ".join(f"'127.0.0.1:{job.port(r)}'" for r in range(job.n))
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write(f"global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    f"scrape_configs:\n  - job_name: hetccl\n    static_configs:\n      - targets: [{targets}]\n")
        log = open(os.path.join(d, "prometheus.log"), "w")
        server = subprocess.Popen([prom, f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/data",
                                   f"--web.listen-address=127.0.0.1:{ppn}"], stdout=log, stderr=log)
        try:
            deadline = time.time() + 90
            calls = None
            while time.time() < deadline:
                try:
                    up = scalar(ppn, 'count(up{job="hetccl"} == 1)')
                    calls = scalar(ppn, 'sum(hetccl_calls_total{collective="AllReduce",status="ok"})')
                    if up == job.n and calls == job.n * CALLS:
                        break
                except OSError:
                    pass
                if server.poll() is not None:
                    fail(f"prometheus exited {server.returncode}: {open(log.name).read()[-2000:]}")
                time.sleep(0.5)
            else:
                fail(f"prometheus never saw {job.n} targets up with {job.n * CALLS} AllReduces (last: {calls})")
            checks = {
                'sum(hetccl_bytes_total{collective="AllReduce"})': job.n * CALLS * COUNT * 4,
                'sum(hetccl_call_duration_seconds_count{collective="AllReduce"})': job.n * CALLS,
                'sum(hetccl_comm_failed)': 0,
                'count(hetccl_comm_info{nranks="4",transport="shm",border_path="host"})': job.n,
                'sum(hetccl_calls_in_flight)': 0,
                'sum(hetccl_bus_bytes_total{collective="AllReduce"})': job.n * CALLS * COUNT * 4 * 1.5,
            }
            for q, want in checks.items():
                got = scalar(ppn, q)
                if got != want:
                    fail(f"prometheus: {q} = {got}, expected {want}")
            for r in range(job.n):
                for name, labels in (("hetccl_bytes_total", {"collective": "AllReduce"}),
                                     ("hetccl_step_bytes_total", {"link": "border_host"}),
                                     ("hetccl_step_bytes_total", {"link": "group"})):
                    sel = ",".join(f'{k}="{v}"' for k, v in labels.items())
                    got = scalar(ppn, f'sum({name}{{rank="{r}",{sel}}})')
                    want = total(direct[r], name, **labels)
                    if got != want or want <= 0:
                        fail(f"rank {r} {name}{{{sel}}}: prometheus has {got}, the endpoint served {want}")
            p50 = scalar(ppn, 'histogram_quantile(0.5, sum by (le) (hetccl_call_duration_seconds_bucket))')
            if p50 is None or not 0 < p50 <= 60:
                fail(f"median AllReduce duration from the histogram: {p50}")
            share = query(ppn, "hetccl_border_time_share")
            if len(share) != job.n or not all(0 < float(s["value"][1]) < 1 for s in share):
                fail(f"border time share per rank: {share}")
            if scalar(ppn, "sum(hetccl_errors_total)") != 0 or len(query(ppn, "hetccl_errors_total")) < job.n:
                fail(f"errors: {query(ppn, 'hetccl_errors_total')}")
            busbw = scalar(ppn, 'sum(hetccl_bus_bytes_total{rank="0",collective="AllReduce"}) / '
                                'sum(hetccl_call_duration_seconds_sum{rank="0",collective="AllReduce"})')
            if busbw is None or busbw <= 0:
                fail(f"mean bus bandwidth from the counters: {busbw}")
            print(f"check_prometheus: prometheus scraped {job.n} ranks: {int(calls)} AllReduces, "
                  f"median {p50 * 1e6:.0f} us, bytes and step counters equal to the endpoints'")
        finally:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
