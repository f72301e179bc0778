"""Process limits and kernel settings that RDMA and large jobs care about:
locked memory, open files, NUMA balancing, huge pages."""
from doctor.report import FAIL, OK, WARN, Result

MIN_OPEN_FILES = 65536  # sockets and shared-memory segments grow with the ranks a process talks to


def shown(value):
    if value is None:
        return "unlimited"
    return f"{value // 1024} KiB" if value >= 1024 else f"{value} B"


def limits_conf_says_unlimited(node, item):
    """Whether /etc/security/limits.conf (or limits.d) gives everyone an unlimited item."""
    files = ["/etc/security/limits.conf"] + [f"/etc/security/limits.d/{f}"
                                             for f in node.root.listdir("/etc/security/limits.d")]
    for path in files:
        for line in (node.root.read(path, "") or "").splitlines():
            fields = line.split("#")[0].split()
            if len(fields) == 4 and fields[2] == item and fields[3] in ("unlimited", "infinity", "-1"):
                return True
    return False


def check_memlock(node):
    lim = node.limit("Max locked memory")
    if lim is None:
        return Result("memlock", WARN, "no 'Max locked memory' in /proc/self/limits",
                      "check the locked memory limit with ulimit -l: RDMA registration pins memory")
    soft, hard = lim
    if soft is None:
        return Result("memlock", OK, "locked memory unlimited")
    found = f"locked memory limited to {shown(soft)} (hard {shown(hard)}): RDMA cannot pin the buffers it registers"
    fix = ("set it unlimited: '* soft memlock unlimited' and '* hard memlock unlimited' in "
           "/etc/security/limits.conf (a new login), LimitMEMLOCK=infinity in a systemd unit, "
           "docker run --ulimit memlock=-1:-1")
    if limits_conf_says_unlimited(node, "memlock"):
        found += "; limits.conf says unlimited, so this process did not start from a PAM login"
        fix = ("limits.conf applies to PAM logins only: for a container use docker run --ulimit memlock=-1:-1 "
               "(Kubernetes: the runtime's default ulimits), for a service LimitMEMLOCK=infinity; under Slurm "
               "LimitMEMLOCK=infinity in slurmd's unit and PropagateResourceLimitsExcept=MEMLOCK in slurm.conf")
    return Result("memlock", FAIL, found, fix)


def check_open_files(node):
    lim = node.limit("Max open files")
    if lim is None:
        return Result("open-files", WARN, "no 'Max open files' in /proc/self/limits",
                      "check the open files limit with ulimit -n")
    soft, hard = lim
    if soft is not None and soft < MIN_OPEN_FILES:
        hard_text = hard if hard is not None else "unlimited"
        return Result("open-files", WARN, f"open files limited to {soft} (hard {hard_text}), below {MIN_OPEN_FILES}",
                      "raise it: '* soft nofile 1048576' and '* hard nofile 1048576' in /etc/security/limits.conf, "
                      "LimitNOFILE=1048576 in a systemd unit, docker run --ulimit nofile=1048576:1048576")
    return Result("open-files", OK, f"open files: {soft if soft is not None else 'unlimited'}")


def check_numa_balancing(node):
    value = node.root.read("/proc/sys/kernel/numa_balancing")
    if value is None:
        return Result("numa-balancing", OK, "no kernel.numa_balancing (not built into this kernel)")
    if value.strip() != "0":
        return Result("numa-balancing", WARN, f"kernel.numa_balancing = {value}: the kernel moves pages between "
                      "NUMA nodes under registered buffers, which costs bandwidth and jitter",
                      "sysctl -w kernel.numa_balancing=0, and kernel.numa_balancing = 0 in /etc/sysctl.d/ to keep it")
    return Result("numa-balancing", OK, "kernel.numa_balancing = 0")


def check_hugepages(node):
    """Informational: what huge pages the node offers."""
    meminfo = {}
    for line in (node.root.read("/proc/meminfo", "") or "").splitlines():
        key, _, rest = line.partition(":")
        meminfo[key.strip()] = rest.strip()
    thp = node.root.read("/sys/kernel/mm/transparent_hugepage/enabled", "")
    mode = thp[thp.find("[") + 1:thp.find("]")] if "[" in thp else "unknown"
    return Result("hugepages", OK, f"huge pages: {meminfo.get('HugePages_Total', '?')} of "
                  f"{meminfo.get('Hugepagesize', '?')} reserved; transparent huge pages: {mode} (informational)")
