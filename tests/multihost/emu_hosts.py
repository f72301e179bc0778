"""Emulated hosts on one machine: each "host" is a network namespace with
its own address on a private switch (a bridge in a namespace of its own),
its own hostname (UTS namespace), and its own IPC namespace and /dev/shm
(a mount namespace with a fresh tmpfs), so shared memory cannot cross
between hosts and hetccl's host identity (hostname + boot id) differs
without any test switch. Ranks start inside their host's namespaces with
the torchrun-style environment (RANK, LOCAL_RANK, WORLD_SIZE,
LOCAL_WORLD_SIZE, MASTER_ADDR = host 0's address, MASTER_PORT).

  with Cluster(3) as cl:                  # needs root and iproute2/unshare
      job = cl.launch([0, 0, 1, 1, 2, 2], ["prog", "arg"], env={...})
      codes = job.wait(timeout=120)
      cl.kill_host(1); cl.cut_link(2)
      cl.limit_link(0, 2, 100)               # 100 Mbit/s between hosts 0 and 2

Cluster(n, network=False) makes hosts of their own hostname, IPC and
/dev/shm that share this machine's network (ranks meet on loopback; no
iproute2 needed, and not root: a user namespace maps this user to root):
for machines without iproute2, where hetccl still sees n hosts and
crosses between them on its inter-host transport. limit_link and
cut_link need the network namespaces.
"""
import os
import shutil
import subprocess
import tempfile
import time


class Unavailable(Exception):
    """Namespaces cannot be made here (not root, no iproute2 or unshare)."""


def sh(*args, check=True):
    return subprocess.run(args, check=check, capture_output=True, text=True)


class Job:
    def __init__(self, procs, work):
        self.procs = procs  # rank -> Popen
        self.work = work

    def out(self, r):
        with open(os.path.join(self.work, f"rank{r}.out")) as f:
            return f.read()

    def err(self, r):
        with open(os.path.join(self.work, f"rank{r}.err")) as f:
            return f.read()

    def wait(self, timeout):
        """Exit codes by rank; a rank still running at the deadline is killed (code 'hung')."""
        deadline = time.time() + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(timeout=max(0.1, deadline - time.time())))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                codes.append("hung")
        return codes

    def show(self):
        return "\n".join(f"--- rank {r}: exit {p.poll()}\n{self.out(r)[-800:]}{self.err(r)[-1500:]}"
                         for r, p in enumerate(self.procs))


class Cluster:
    def __init__(self, nhosts, subnet=None, network=True):
        if network and os.geteuid() != 0:
            raise Unavailable("not root: network namespaces need CAP_SYS_ADMIN")
        for tool in ("ip", "unshare", "nsenter") if network else ("unshare", "nsenter"):
            if not shutil.which(tool):
                raise Unavailable(f"{tool} is missing")
        self.n = nhosts
        self.network = network
        self.user = not network and os.geteuid() != 0  # a user namespace of its own per host
        self.launched = [[] for _ in range(nhosts)]  # host -> the rank processes started there
        tag = f"{os.getpid() % 100000}"
        self.sw = f"hmh-sw-{tag}"
        self.ns = [f"hmh-{i}-{tag}" for i in range(nhosts)]
        octet = 100 + os.getpid() % 150
        self.addr = [f"10.{octet}.{subnet or 80}.{i + 1}" if network else "127.0.0.1" for i in range(nhosts)]
        self.work = tempfile.mkdtemp(prefix="hetccl-hosts.")
        self.holders = []  # one process per host holding its UTS/IPC/mount namespaces
        self.hpid = []     # their pids inside (what nsenter -t takes)
        self.shaped = set()  # hosts whose eth0 has limit_link's qdiscs
        try:
            self._make()
        except subprocess.CalledProcessError as e:
            self.close()
            raise Unavailable(f"{' '.join(e.cmd)}: {e.stderr.strip()}")

    def _make(self):
        if not self.network:
            for i in range(self.n):
                self._hold(i, ["unshare"] + (["--user", "--map-root-user"] if self.user else []))
            return
        sh("ip", "netns", "add", self.sw)
        sh("ip", "-n", self.sw, "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", self.sw, "link", "set", "br0", "up")
        for i, ns in enumerate(self.ns):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", self.sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "-n", self.sw, "link", "set", f"p{i}", "master", "br0")
            sh("ip", "-n", self.sw, "link", "set", f"p{i}", "up")
            sh("ip", "-n", ns, "addr", "add", f"{self.addr[i]}/24", "dev", "eth0")
            sh("ip", "-n", ns, "link", "set", "eth0", "up")
            self._hold(i, ["ip", "netns", "exec", ns, "unshare"])

    def _hold(self, i, unshare):
        """The host's own hostname, IPC and /dev/shm, held by a sleeping process that ranks join with
        nsenter."""
        holder = subprocess.Popen(
            unshare + ["--uts", "--ipc", "--mount", "--propagation", "private",
                       "sh", "-c", f"hostname emu-host-{i} && mount -t tmpfs -o size=4g tmpfs /dev/shm && "
                                   "echo ready $$ && exec sleep 100000"],  # $$: the sh that becomes the sleep
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.holders.append(holder)
        line = holder.stdout.readline().split()
        if len(line) != 2 or line[0] != "ready":
            raise subprocess.CalledProcessError(1, unshare, stderr=holder.stderr.read())
        self.hpid.append(int(line[1]))

    def launch(self, host_of_rank, argv, env=None, master_port=29500, stdin=None):
        """Starts rank r on host host_of_rank[r]; returns a Job (stdin=subprocess.PIPE: each rank's
        stdin is a pipe, Popen.stdin)."""
        world = len(host_of_rank)
        argv = [os.path.abspath(argv[0]) if os.path.exists(argv[0]) else argv[0]] + list(argv[1:])
        work = tempfile.mkdtemp(dir=self.work)
        procs = []
        for r, h in enumerate(host_of_rank):
            local = [q for q in range(world) if host_of_rank[q] == h]
            e = dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(local.index(r)),
                     LOCAL_WORLD_SIZE=str(len(local)), MASTER_ADDR=self.addr[host_of_rank[0]],
                     MASTER_PORT=str(master_port), HETCCL_SOCKET_IFNAME="eth0" if self.network else "lo")
            e.update(env or {})
            spaces = (["--net"] if self.network else []) + (["--user", "--preserve-credentials"] if self.user else [])
            cmd = ["nsenter", "-t", str(self.hpid[h])] + spaces + ["--uts", "--ipc", "--mount", "--"] + list(argv)
            procs.append(subprocess.Popen(cmd, env=e, stdin=stdin, text=True,
                                          stdout=open(os.path.join(work, f"rank{r}.out"), "w"),
                                          stderr=open(os.path.join(work, f"rank{r}.err"), "w")))
            self.launched[h].append(procs[-1])
        return Job(procs, work)

    def fetch(self, host, url):
        """GET url from inside host's network namespace; the body."""
        if not self.network:
            raise Unavailable("fetch: the hosts share one network (Cluster(network=False))")
        code = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).read().decode())"
        r = subprocess.run(["nsenter", "-t", str(self.hpid[host]), "--net", "/usr/bin/python3", "-c", code],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"GET {url} on host {host}: {r.stderr}")
        return r.stdout

    def kill_host(self, host):
        """kill -9 of every process in the host's network namespace but its namespace holder."""
        if not self.network:  # the ranks started there (nsenter execs them)
            live = [p for p in self.launched[host] if p.poll() is None]
            for p in live:
                p.kill()
            return len(live)
        keep = self.hpid[host]
        pids = sh("ip", "netns", "pids", self.ns[host], check=False).stdout.split()
        for p in pids:
            if int(p) != keep:
                try:
                    os.kill(int(p), 9)
                except ProcessLookupError:
                    pass
        return len(pids) - 1

    def limit_link(self, a, b, mbit):
        """Rate-limits the traffic between hosts a and b, both ways, to `mbit` Mbit/s (a tbf under an
        htb class picked by destination address; other traffic is not shaped). Raises Unavailable where
        the kernel lacks the qdiscs or the hosts share one network."""
        if not self.network:
            raise Unavailable("limit_link: the hosts share one network (Cluster(network=False))")
        for src, dst in ((a, b), (b, a)):
            tc = ["ip", "netns", "exec", self.ns[src], "tc"]
            try:
                if src not in self.shaped:
                    sh(*tc, "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "htb", "default", "0")
                    self.shaped.add(src)
                cid = str(10 + dst)
                sh(*tc, "class", "add", "dev", "eth0", "parent", "1:", "classid", f"1:{cid}", "htb", "rate", "100gbit")
                sh(*tc, "qdisc", "add", "dev", "eth0", "parent", f"1:{cid}", "handle", f"{cid}:", "tbf", "rate",
                   f"{mbit}mbit", "burst", "256kb", "latency", "200ms")
                sh(*tc, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match",
                   "ip", "dst", f"{self.addr[dst]}/32", "flowid", f"1:{cid}")
            except subprocess.CalledProcessError as e:
                raise Unavailable(f"tc: {' '.join(e.cmd)}: {e.stderr.strip()}")

    def clear_limits(self):
        """Removes every limit_link."""
        for h in self.shaped:
            sh("ip", "netns", "exec", self.ns[h], "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        self.shaped.clear()

    def cut_link(self, host):
        if not self.network:
            raise Unavailable("cut_link: the hosts share one network (Cluster(network=False))")
        sh("ip", "-n", self.ns[host], "link", "set", "eth0", "down")

    def close(self):
        for h in self.holders:
            h.kill()
            h.wait()
        for host in getattr(self, "launched", []):
            for p in host:
                if p.poll() is None:
                    p.kill()
        for ns in getattr(self, "ns", []) + [getattr(self, "sw", None)] if getattr(self, "network", False) else []:
            if ns:
                for p in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                    try:
                        os.kill(int(p), 9)
                    except ProcessLookupError:
                        pass
                sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def any_cluster(nhosts, who, shared=False, **kw):
    """Cluster(nhosts) where network namespaces can be made, else (or with shared) hosts that share
    this machine's network (saying so on stdout); Unavailable naming both reasons where neither can be
    made."""
    if shared:
        return Cluster(nhosts, network=False, **kw)
    try:
        return Cluster(nhosts, **kw)
    except Unavailable as first:
        try:
            cl = Cluster(nhosts, network=False, **kw)
        except Unavailable as second:
            raise Unavailable(f"{first}; hosts on one network: {second}")
        print(f"{who}: no network namespaces ({first}): the hosts share this machine's network (loopback)")
        return cl
