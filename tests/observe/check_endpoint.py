#!/usr/bin/env python3
"""The metrics endpoint under bad input, while its job keeps calling
AllReduce (results checked by the ranks): methods other than GET/HEAD get
405, unknown paths 404; seeded random junk requests (mutated request
lines and headers, random bytes, a 200 KiB header, requests cut short,
connections held open and dropped, 64 at once) never stop it serving
/metrics and /status or harm the calls. A port already in use and a
civetweb library that cannot be loaded are each a warning naming the
setting, and the job still runs right.

  check_endpoint.py METRICS_JOB
Exit status 0 pass, 1 fail.
"""
import os
import random
import socket
import sys
import threading
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from job import Job, free_ports, get  # noqa: E402

SEED = 20261204
JUNK = 400


def fail(msg):
    print(f"check_endpoint: FAILED: {msg}")
    sys.exit(1)


def raw(port, data, read=True, timeout=3):
    """Sends bytes, returns what came back (b"" on a reset or timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        if not read:
            return b""
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    except OSError:
        return b""
    finally:
        s.close()


def status_of(port, method, path):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def junk(rng):
    valid = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
    kind = rng.randrange(6)
    if kind == 0:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2048)))
    if kind == 1:  # a valid request with bytes flipped
        b = bytearray(valid)
        for _ in range(rng.randrange(1, 6)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return bytes(b)
    if kind == 2:  # cut short
        return valid[:rng.randrange(len(valid))]
    if kind == 3:  # odd request lines
        return rng.choice([b"GET\r\n\r\n", b"GET /metrics\r\n\r\n", b"GET /metrics HTTP/9.9\r\n\r\n",
                           b"GET http://evil/metrics HTTP/1.1\r\n\r\n", b"GET /../../etc/passwd HTTP/1.1\r\n\r\n",
                           b"GET /%00%ff HTTP/1.1\r\n\r\n", b"\r\n\r\n\r\n", b"BREW /pot HTCPCP/1.0\r\n\r\n"])
    if kind == 4:  # huge or many headers
        return b"GET /status HTTP/1.1\r\n" + b"X-A: " + b"a" * rng.choice([100, 10000, 200000]) + b"\r\n\r\n"
    return b"GET /status HTTP/1.1\r\nContent-Length: 99999999\r\n\r\nabc"


def main():
    job_bin = sys.argv[1]
    rng = random.Random(SEED)
    with Job(job_bin, calls=0, count=2048, loop_s=12) as job:
        job.wait_up()
        port = job.port(0)
        for method, want in (("POST", 405), ("PUT", 405), ("DELETE", 405), ("GET", 200), ("HEAD", 200)):
            got = status_of(port, method, "/metrics")
            if got != want:
                fail(f"{method} /metrics answered {got}, expected {want}")
        if status_of(port, "GET", "/nope") != 404 or status_of(port, "GET", "/metrics?x=1") != 200:
            fail("an unknown path is not 404, or a query string on /metrics is not served")
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]  # idle, dropped later
        for _ in range(JUNK):
            raw(port, junk(rng), read=rng.random() < 0.5)
        errors = []

        def hammer():
            try:
                for _ in range(8):
                    if get(f"http://127.0.0.1:{port}/metrics", timeout=20)[0] != 200:
                        errors.append("not 200")
            except OSError as e:
                errors.append(str(e))

        threads = [threading.Thread(target=hammer) for _ in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in held:
            s.close()
        if errors:
            fail(f"{len(errors)} of 512 concurrent GETs failed: {errors[:3]}")
        code, body = get(job.url(0, "/metrics"))
        if code != 200 or "hetccl_calls_total" not in body:
            fail("after the junk, /metrics no longer serves the counters")
        done = job.wait_done()
        if min(done) <= 0:
            fail(f"calls per rank while the endpoint was hammered: {done}")
    # A port in use (rank 0's) and a library that cannot be loaded.
    busy = socket.socket()
    busy.bind(("127.0.0.1", free_ports(2)))
    busy.listen(1)
    for env, port, expect in (({"HETCCL_DEBUG": "WARN"}, busy.getsockname()[1], "HETCCL_METRICS_PORT: cannot serve on"),
                              ({"HETCCL_DEBUG": "WARN", "HETCCL_CIVETWEB_LIB": "/nonexistent/libcivetweb.so"}, None,
                               "HETCCL_CIVETWEB_LIB")):
        with Job(job_bin, calls=50, count=256, layout=("a", "b"), env=env, metrics_port=port) as job:
            job.wait_done()
        # The job exited 0 (Job checks on leaving); rank 0 warned, naming the setting.
        err = job.procs[0].stderr.read()
        if expect not in err:
            fail(f"no warning with '{expect}' on rank 0: {err[-1000:]}")
    busy.close()
    print(f"check_endpoint: {JUNK} junk requests (seed {SEED}), 8 idle connections and 512 concurrent GETs; "
          f"the endpoint kept serving and the calls went on; a busy port and a missing library were warnings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
