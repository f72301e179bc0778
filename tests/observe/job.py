"""A 4-rank job with the metrics endpoint on, for the observability tests:
metrics_job ranks started with the torchrun-style environment, each with
HETCCL_METRICS_PORT (rank r serves on base + r, all ranks on this host).

  with Job(binary, calls=200, count=1024) as job:
      job.wait_done()          # every rank finished its calls
      ... read http://127.0.0.1:{job.port(r)}/metrics ...
  (leaving the block releases the ranks and checks they exited 0)
"""
import os
import socket
import subprocess
import time
import urllib.request


def free_ports(n):
    """n consecutive free TCP ports on 127.0.0.1."""
    for _ in range(200):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + n > 65535:
            continue
        ok = True
        for p in range(base, base + n):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RuntimeError("no free ports")


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


class Job:
    def __init__(self, binary, calls=200, count=1024, loop_s=0, layout=("a", "a", "b", "b"), env=None,
                 metrics_port=None, transport="shm"):
        self.n = len(layout)
        self.base = metrics_port or free_ports(self.n)
        master = free_ports(2)  # hetccl's rendezvous root listens on MASTER_PORT + 1
        self.procs = []
        for r, group in enumerate(layout):
            e = dict(os.environ, RANK=str(r), WORLD_SIZE=str(self.n), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(master), HETCCL_GROUP=group, HETCCL_TRANSPORT=transport,
                     HETCCL_METRICS_PORT=str(self.base), HETCCL_TIMEOUT_S="60")
            e.update(env or {})
            self.procs.append(subprocess.Popen([binary, str(calls), str(count), str(loop_s)], env=e,
                                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True))
        self.done = [None] * self.n

    def port(self, r):
        return self.base + r

    def url(self, r, path):
        return f"http://127.0.0.1:{self.port(r)}{path}"

    def wait_up(self, timeout=60):
        """Until every rank's endpoint answers /status with its communicator."""
        deadline = time.time() + timeout
        for r in range(self.n):
            while True:
                try:
                    if '"comms": [\n' in get(self.url(r, "/status"))[1]:
                        break
                except OSError:
                    pass
                if time.time() > deadline or self.procs[r].poll() is not None:
                    raise RuntimeError(f"rank {r}'s endpoint never came up: {self.stderr_of(r)}")
                time.sleep(0.1)

    def wait_done(self, timeout=120):
        for r, p in enumerate(self.procs):
            line = p.stdout.readline()
            if not line.startswith("done "):
                for q in self.procs:  # each rank's own account, once it ended
                    try:
                        q.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                raise RuntimeError(f"rank {r} ended without 'done': " +
                                   "; ".join(f"rank {i} (exit {q.poll()}): {self.stderr_of(i)[-1500:]}"
                                             for i, q in enumerate(self.procs)))
            self.done[r] = int(line.split()[1])
        return self.done

    def stderr_of(self, r):
        p = self.procs[r]
        if p.poll() is None:
            return "(running)"
        return p.stderr.read()

    def release(self):
        codes = []
        for p in self.procs:
            try:
                p.stdin.write("go\n")
                p.stdin.close()
            except OSError:
                pass
        for r, p in enumerate(self.procs):
            try:
                codes.append(p.wait(timeout=60))
            except subprocess.TimeoutExpired:
                p.kill()
                codes.append(-9)
        return codes

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        codes = self.release()
        if exc[0] is None and any(codes):
            raise RuntimeError(f"ranks exited {codes}: {[p.stderr.read() for p in self.procs]}")
        return False
