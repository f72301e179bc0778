"""hetccl-doctor --node on fake nodes: a healthy tree (node_tree.py) where
every check passes, then one thing broken at a time, each case asserting the
check's status, the fix it prints and the exit status; the transport hetccl
would pick for several trees; --json and the text report; bad usage; and a
run on this machine for real, which must say what it lacks rather than crash.

  check_node.py HETCCL_DOCTOR

Real RDMA devices, GPUs and fabrics are not here: every check is tested on
trees written by node_tree.py, and on this machine only as far as it goes."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import node_tree as nt

DOCTOR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../tools/hetccl-doctor")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if not k.startswith(("HETCCL_", "NCCL_", "FI_", "UCX_"))}
failures = []


def fail(what):
    failures.append(what)
    print("FAIL:", what)


def doctor(args, env=None, root=None):
    e = dict(CLEAN_ENV, **(env or {}))
    argv = [PYTHON, DOCTOR, "--node"] + (["--root", root] if root else []) + args
    done = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=60)
    return done.returncode, done.stdout, done.stderr


def report(root, env=None):
    rc, out, err = doctor(["--json"], env, root)
    if "Traceback" in err:
        fail(f"traceback: {err}")
    doc = json.loads(out)
    return rc, {c["name"]: c for c in doc["checks"]}, doc


def rm(root, *paths):
    for p in paths:
        full = os.path.join(root, p.lstrip("/"))
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full)
        elif os.path.lexists(full):
            os.remove(full)


def set_acs_redirect(root):
    nt.write(root, "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/config",
             nt.config_space(acs_ctrl=0x001D))  # SrcValid, ReqRedir, CmpltRedir, UpstreamFwd


def make_amd(root):
    nt.write(root, f"/sys/bus/pci/devices/{nt.GPU1}/vendor", "0x1002\n")


NIC0_PORT = "/sys/class/infiniband/mlx5_0/ports/1"
NIC1_PORT = "/sys/class/infiniband/mlx5_1/ports/1"

# (case, change to the healthy tree, environment, check, status, text the fix must hold, exit status)
BROKEN = [
    ("no RDMA device", lambda r: rm(r, "/sys/class/infiniband"), {}, "rdma-devices", "FAIL", "mlx5_ib", 1),
    ("no uverbs device files", lambda r: rm(r, "/dev/infiniband"), {}, "rdma-uverbs", "FAIL",
     "--device=/dev/infiniband", 1),
    ("IB port without a subnet manager", lambda r: nt.write(r, NIC0_PORT + "/state", "2: INIT\n"), {}, "rdma-ports",
     "FAIL", "opensm", 1),
    ("RoCE port link down", lambda r: (nt.write(r, NIC1_PORT + "/state", "1: DOWN\n"),
                                        nt.write(r, NIC1_PORT + "/phys_state", "3: Disabled\n")),
     {}, "rdma-ports", "FAIL", "ip link set dev IF up", 1),
    ("unknown link layer", lambda r: nt.write(r, NIC0_PORT + "/link_layer", "Unknown\n"), {}, "rdma-link-layer",
     "WARN", "InfiniBand or Ethernet", 0),
    ("IB MTU 2048", lambda r: nt.write(r, "/commands/ibv_devinfo.txt", nt.ibv_devinfo(mtu0=2048)), {}, "rdma-mtu",
     "WARN", "partitions.conf", 0),
    ("RoCE interface MTU 1500", lambda r: (rm(r, "/commands/ibv_devinfo.txt"),
                                            nt.write(r, "/sys/class/net/ens2/mtu", "1500\n")),
     {}, "rdma-mtu", "WARN", "ip link set dev ens2 mtu 9000", 0),
    ("no RoCE v2 GID", lambda r: nt.write(r, NIC1_PORT + "/gid_attrs/types/1", "IB/RoCE v1\n"), {}, "rdma-roce-gid",
     "FAIL", "ip addr add", 1),
    ("GPU without a NIC on its socket", lambda r: rm(r, "/sys/class/infiniband/mlx5_1", "/sys/class/net/ens2"), {},
     "gpu-nic-affinity", "WARN", "numactl --cpunodebind", 0),
    ("ACS redirects under the switch", set_acs_redirect, {}, "pcie-acs", "WARN", "ECAP_ACS", 0),
    ("IOMMU translating", lambda r: nt.write(r, "/sys/kernel/iommu_groups/3/type", "DMA-FQ\n"), {}, "iommu", "WARN",
     "iommu=pt", 0),
    ("no nvidia_peermem, proprietary modules", lambda r: (rm(r, "/sys/module/nvidia_peermem"), nt.write(
        r, "/proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")),
     {}, "gpu-peer-memory", "FAIL", "modprobe nvidia_peermem", 1),
    ("AMD GPU without amdgpu", make_amd, {}, "gpu-peer-memory", "FAIL", "modprobe amdgpu", 1),
    ("memlock 64 KiB", lambda r: (nt.write(r, "/proc/self/limits", nt.limits(memlock="65536")),
                                   rm(r, "/etc/security/limits.conf")), {}, "memlock", "FAIL",
     "'* hard memlock unlimited' in /etc/security/limits.conf", 1),
    ("memlock 64 KiB outside a PAM login", lambda r: nt.write(r, "/proc/self/limits", nt.limits(memlock="65536")), {},
     "memlock", "FAIL", "limits.conf applies to PAM logins only", 1),
    ("open files 1024", lambda r: nt.write(r, "/proc/self/limits", nt.limits(nofile="1024")), {}, "open-files",
     "WARN", "LimitNOFILE", 0),
    ("NUMA balancing on", lambda r: nt.write(r, "/proc/sys/kernel/numa_balancing", "1\n"), {}, "numa-balancing",
     "WARN", "sysctl -w kernel.numa_balancing=0", 0),
    ("libfabric without an RDMA provider", lambda r: nt.write(
        r, "/commands/fi_info_-t_FI_EP_RDM_-c_FI_TAGGED.txt", "provider: tcp;ofi_rxm\n    type: FI_EP_RDM\n"),
     {}, "libfabric", "WARN", "efa", 0),
    ("no fi_info", lambda r: rm(r, "/commands/fi_info_-l.txt", "/commands/fi_info_-t_FI_EP_RDM_-c_FI_TAGGED.txt"),
     {}, "libfabric", "WARN", "libfabric-bin", 0),
    ("UCX without RDMA", lambda r: nt.write(r, "/commands/ucx_info_-d.txt", nt.ucx_info(rdma=False)), {}, "ucx",
     "WARN", "UCX_TLS", 0),
    ("net asked without a plugin", None, {"HETCCL_TRANSPORT": "inter=net"}, "transport-choice", "FAIL",
     "HETCCL_NET_PLUGIN", 1),
    ("shm for every link", None, {"HETCCL_TRANSPORT": "shm"}, "transport-choice", "WARN", "intra=shm,inter=auto", 0),
    ("HETCCL_TRANSPORT not accepted", None, {"HETCCL_TRANSPORT": "inter=pigeon"}, "transport-choice", "FAIL",
     "intra=<name>,inter=<name>", 1),
]

def add_efa(root):
    port = "/sys/class/infiniband/efa_0/ports/1"
    nt.write(root, port + "/state", "4: ACTIVE\n")
    nt.write(root, port + "/phys_state", "5: LinkUp\n")
    nt.write(root, port + "/link_layer", "Unknown\n")


def slingshot_only(root):
    rm(root, "/sys/class/infiniband", "/dev/infiniband")
    nt.write(root, "/sys/class/cxi/cxi0/device/vendor", "0x17db\n")


# Fabrics the checks must know as they are (case, change, check, status, what the report must say)
KNOWN = [
    ("EFA's Unknown link layer", add_efa, "rdma-link-layer", "OK", "efa_0/1 EFA"),
    ("Slingshot without verbs devices", slingshot_only, "rdma-devices", "OK", "cxi0 (Slingshot"),
    ("Slingshot without verbs devices", slingshot_only, "rdma-uverbs", "SKIP", "no verbs device"),
    ("a NIC on the GPU's NUMA node but not its switch", lambda r: (
        rm(r, "/sys/class/infiniband/mlx5_0"), nt.write(r, f"/sys/bus/pci/devices/{nt.NIC1}/numa_node", "0\n"),
        nt.write(r, f"/sys/bus/pci/devices/{nt.GPU1}/numa_node", "0\n")), "gpu-nic-affinity", "OK",
     f"GPU ({nt.GPU0}) -> mlx5_1/ens2 ({nt.NIC1}): same NUMA node 0, through the CPU"),
    ("UCX without GPU memory", lambda r: nt.write(r, "/commands/ucx_info_-d.txt", nt.ucx_info(cuda=False)), "ucx",
     "OK", "GPU memory: none (hetccl hands UCX host memory only"),
]

INFO = "/commands/hetccl-info_--settings.txt"
# (case, change, environment, the inter-host choice the report must name)
CHOICES = [
    ("healthy: ucx", None, {}, "inter -> ucx"),
    ("no RDMA device: tcp", lambda r: rm(r, "/sys/class/infiniband"), {}, "inter -> tcp"),
    ("no UCX, this hetccl without ofi: tcp", lambda r: rm(r, "/commands/ucx_info_-d.txt"), {}, "inter -> tcp"),
    ("no UCX, a hetccl with ofi: ofi", lambda r: (rm(r, "/commands/ucx_info_-d.txt"), nt.write(
        r, INFO, nt.hetccl_info("tcp, shm, ucx, ofi"))), {}, "inter -> ofi"),
    ("HETCCL_AUTO_INTER puts ofi first", lambda r: nt.write(
        r, INFO, nt.hetccl_info("tcp, shm, ucx, ofi", ("HETCCL_TRANSPORT", "HETCCL_AUTO_INTER"))),
     {"HETCCL_AUTO_INTER": "ofi,ucx,tcp"}, "inter -> ofi"),
    ("HETCCL_AUTO_INTER unknown to this hetccl: ignored", None, {"HETCCL_AUTO_INTER": "tcp"}, "inter -> ucx"),
    ("net with a plugin", lambda r: nt.write(r, INFO, nt.hetccl_info("tcp, shm, ucx, net")),
     {"HETCCL_TRANSPORT": "inter=net", "NCCL_NET_PLUGIN": "aws-ofi"}, "inter: net as HETCCL_TRANSPORT asks"),
    ("net without a net transport in this hetccl", None, {"HETCCL_TRANSPORT": "inter=net", "HETCCL_NET_PLUGIN": "x"},
     "this hetccl has no net transport"),
]


def copy_of(healthy, scratch, name):
    root = os.path.join(scratch, name.replace(" ", "_").replace(":", "").replace(",", ""))
    shutil.copytree(healthy, root, symlinks=True)
    return root


def check_healthy(healthy):
    rc, checks, doc = report(healthy)
    if doc["format"] != "hetccl-doctor-node-1" or doc["exit_status"] != rc:
        fail(f"healthy: format {doc['format']}, exit_status {doc['exit_status']}, rc {rc}")
    if len(checks) < 12:
        fail(f"healthy: only {len(checks)} checks")
    for name, c in checks.items():
        if c["status"] != "OK":
            fail(f"healthy: {name} is {c['status']}: {c['found']} / {c['fix']}")
    if rc != 0:
        fail(f"healthy: exit status {rc}")
    if "mlx5_0/1 4096 (ibv_devinfo)" not in checks["rdma-mtu"]["found"]:
        fail(f"healthy: MTU read as {checks['rdma-mtu']['found']}")
    if f"GPU ({nt.GPU0}) -> mlx5_0 ({nt.NIC0}): same PCIe switch, mlx5_1/ens2 ({nt.NIC1}): across NUMA nodes" \
            not in checks["gpu-nic-affinity"]["found"]:
        fail(f"healthy: affinity {checks['gpu-nic-affinity']['found']}")
    if "verbs;ofi_rxm" not in checks["libfabric"]["found"] or "tcp;ofi_rxm" in checks["libfabric"]["found"]:
        fail(f"healthy: libfabric {checks['libfabric']['found']}")
    if "0 of 2048 kB reserved; transparent huge pages: madvise" not in checks["hugepages"]["found"]:
        fail(f"healthy: huge pages read as {checks['hugepages']['found']}")
    print(f"ok  healthy tree: {len(checks)} checks OK")
    rc, text, _ = doctor([], root=healthy)
    lines = [line for line in text.splitlines() if line.startswith(("OK ", "WARN", "FAIL", "SKIP"))]
    if rc != 0 or len(lines) != len(checks) or f"{len(checks)} OK, 0 WARN, 0 FAIL, 0 SKIP" not in text:
        fail(f"healthy text report (rc {rc}):\n{text}")
    rc, same, _ = doctor([], env={"HETCCL_DOCTOR_ROOT": healthy})
    if rc != 0 or same != text:
        fail("HETCCL_DOCTOR_ROOT does not read the same tree as --root")


def check_broken(healthy, scratch):
    for name, change, env, check, status, fix, want_rc in BROKEN:
        root = healthy
        if change:
            root = copy_of(healthy, scratch, name)
            change(root)
        rc, checks, _ = report(root, env)
        c = checks[check]
        if c["status"] != status or fix not in c["fix"] or rc != want_rc:
            fail(f"{name}: {check} is {c['status']} (want {status}), exit {rc} (want {want_rc}), "
                 f"found '{c['found']}', fix '{c['fix']}' (want '{fix}')")
            continue
        others = [n for n, o in checks.items() if o["status"] not in ("OK", "SKIP") and n != check]
        print(f"ok  {name}: {check} {status}, fix names '{fix}'" + (f" (also: {', '.join(others)})" if others else ""))
        if not change:
            continue
        _, text, _ = doctor([], env, root)  # the text report shows the same fix under the check's line
        if f"fix: {c['fix']}" not in text:
            fail(f"{name}: the text report lacks the fix:\n{text}")


def check_choices(healthy, scratch):
    for name, change, env, want in CHOICES:
        root = healthy
        if change:
            root = copy_of(healthy, scratch, name)
            change(root)
        _, checks, _ = report(root, env)
        found = checks["transport-choice"]["found"] + " " + checks["transport-choice"]["fix"]
        if want not in found or "intra -> shm" not in found and "intra" not in env.get("HETCCL_TRANSPORT", ""):
            fail(f"{name}: want '{want}', the report says '{found}'")
        else:
            print(f"ok  choice, {name}: {checks['transport-choice']['found']}")


def check_known(healthy, scratch):
    for name, change, check, status, said in KNOWN:
        root = copy_of(healthy, scratch, name + " " + check)
        change(root)
        _, checks, _ = report(root)
        if checks[check]["status"] != status or said not in checks[check]["found"]:
            fail(f"{name}: {check} {checks[check]} (want {status}, '{said}')")
        else:
            print(f"ok  {name}: {check} {status}: {checks[check]['found']}")


def check_unreadable(healthy, scratch):
    """Config space past 64 bytes takes root: ACS is then not known, not OK."""
    root = copy_of(healthy, scratch, "acs unreadable")
    for bridge in ("0000:02:00.0", "0000:02:01.0", "0000:82:00.0", "0000:82:01.0"):
        path = os.path.join(root, "sys/bus/pci/devices", bridge, "config")
        with open(path, "r+b") as f:
            f.truncate(64)
    _, checks, _ = report(root)
    if checks["pcie-acs"]["status"] != "SKIP" or "needs root" not in checks["pcie-acs"]["found"]:
        fail(f"ACS unreadable: {checks['pcie-acs']}")
    else:
        print(f"ok  ACS unreadable: {checks['pcie-acs']['found']}")


def check_usage(scratch):
    rc, _, err = doctor([], root=os.path.join(scratch, "absent"))
    if rc != 2 or "is not a folder" not in err:
        fail(f"a missing root: exit {rc}, {err}")
    rc, _, err = doctor(["--bogus"])
    if rc != 2 or "--bogus" not in err:
        fail(f"an unknown argument: exit {rc}, {err}")
    print("ok  bad usage: exit 2 with the reason")


def check_this_machine():
    """The real node: whatever it has, the report must be whole and honest."""
    rc, out, err = doctor(["--json"])
    if "Traceback" in err or rc not in (0, 1):
        fail(f"this machine: exit {rc}, {err}")
        return
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    has_rdma = any(not e.startswith(".") for e in (os.listdir("/sys/class/infiniband")
                                                   if os.path.isdir("/sys/class/infiniband") else []))
    want = "OK" if has_rdma else "FAIL"
    said = checks["rdma-devices"]["found"]
    if checks["rdma-devices"]["status"] != want or (not has_rdma and "no RDMA device" not in said):
        fail(f"this machine: rdma-devices {checks['rdma-devices']}")
    if not has_rdma and "inter -> tcp" not in checks["transport-choice"]["found"]:
        fail(f"this machine has no RDMA device, yet: {checks['transport-choice']['found']}")
    rc_text, text, _ = doctor([])
    if rc_text != rc:
        fail(f"this machine: --json exits {rc}, text {rc_text}")
    print(f"ok  this machine (exit {rc}):\n{text}")


def main():
    with tempfile.TemporaryDirectory(prefix="hetccl-doctor-") as scratch:
        healthy = os.path.join(scratch, "healthy")
        nt.build(healthy)
        check_healthy(healthy)
        check_broken(healthy, scratch)
        check_choices(healthy, scratch)
        check_unreadable(healthy, scratch)
        check_known(healthy, scratch)
        check_usage(scratch)
    check_this_machine()
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print(f"all passed: {len(BROKEN)} broken trees, {len(CHOICES)} transport choices")
    return 0


if __name__ == "__main__":
    sys.exit(main())
