"""The RDMA devices and their ports: present, usable from this process, up,
which link layer, MTU, and for RoCE a v2 GID."""
import re

from doctor.report import FAIL, OK, SKIP, WARN, Result

NO_DEVICE = "no RDMA device to check"
IB_MTUS = (256, 512, 1024, 2048, 4096)
ROCE_HEADERS = 96  # what RoCE's headers take from the interface's MTU (GRH, UDP, BTH, extensions, ICRC)


def is_efa(node, dev):
    """An AWS EFA device: its ports' link layer reads Unknown, and libfabric's efa provider drives it."""
    return dev.startswith("efa") or node.root.read(f"/sys/class/infiniband/{dev}/device/vendor") == "0x1d0f"


def check_rdma_devices(node):
    devs, cxi = node.rdma_devices(), node.cxi_devices()
    if cxi:
        return Result("rdma-devices", OK, f"{len(devs) + len(cxi)} RDMA device(s): " +
                      ", ".join(devs + [f"{c} (Slingshot, through libfabric's cxi provider)" for c in cxi]))
    if not devs:
        return Result("rdma-devices", FAIL, "no RDMA device in /sys/class/infiniband: links to other hosts "
                      "fall back to tcp",
                      "load the NIC's RDMA driver (mlx5_ib, efa, irdma, bnxt_re, ...) and install rdma-core; "
                      "in a container, run it with the host's RDMA devices (docker --device=/dev/infiniband, "
                      "or the RDMA device plugin on Kubernetes)")
    return Result("rdma-devices", OK, f"{len(devs)} RDMA device(s): " + ", ".join(devs))


def check_uverbs(node):
    if not node.rdma_devices():
        return Result("rdma-uverbs", SKIP, "no verbs device (Slingshot's cxi devices have none)"
                      if node.cxi_devices() else NO_DEVICE)
    nodes = [e for e in node.root.listdir("/dev/infiniband") if e.startswith("uverbs")]
    if not nodes:
        return Result("rdma-uverbs", FAIL, "no /dev/infiniband/uverbs*: this process cannot open the RDMA "
                      "devices the kernel has",
                      "modprobe ib_uverbs; in a container pass the device files (docker --device=/dev/infiniband "
                      "or the RDMA device plugin on Kubernetes)")
    return Result("rdma-uverbs", OK, "/dev/infiniband: " + ", ".join(nodes))


def check_ports(node):
    ports = node.ports()
    if not ports:
        return Result("rdma-ports", SKIP, NO_DEVICE)
    bad, good, fixes = [], [], []
    for dev, port, base in ports:
        state = node.root.read(base + "/state", "?")  # e.g. "4: ACTIVE"
        phys = node.root.read(base + "/phys_state", "?")  # e.g. "5: LinkUp"
        text = f"{dev}/{port} {state.split(':')[-1].strip()}, {phys.split(':')[-1].strip()}"
        if "ACTIVE" in state and "LinkUp" in phys:
            good.append(text)
            continue
        bad.append(text)
        if "LinkUp" in phys and "INIT" in state:
            fixes.append(f"{dev}/{port} has link but no subnet manager configured it: run one on the fabric "
                         "(opensm on one node, or the switch's)")
        else:
            fixes.append(f"{dev}/{port}: check its cable and switch port; for RoCE bring its interface up "
                         "(ip link set dev IF up)")
    if bad:
        return Result("rdma-ports", FAIL, "not ACTIVE/LinkUp: " + "; ".join(bad) +
                      (" (up: " + "; ".join(good) + ")" if good else ""), "; ".join(fixes))
    return Result("rdma-ports", OK, "; ".join(good))


def check_link_layer(node):
    ports = node.ports()
    if not ports:
        return Result("rdma-link-layer", SKIP, NO_DEVICE)
    seen, odd = [], []
    for dev, port, base in ports:
        layer = node.root.read(base + "/link_layer", "unreadable")
        if layer == "Unknown" and is_efa(node, dev):
            seen.append(f"{dev}/{port} EFA (its own fabric, through libfabric's efa provider)")
            continue
        (seen if layer in ("InfiniBand", "Ethernet") else odd).append(
            f"{dev}/{port} {layer}" + (" (RoCE)" if layer == "Ethernet" else ""))
    if odd:
        return Result("rdma-link-layer", WARN, "unknown link layer: " + "; ".join(odd),
                      "check the driver (ibv_devinfo shows each port's link_layer); hetccl's RDMA paths expect "
                      "InfiniBand or Ethernet (RoCE)")
    return Result("rdma-link-layer", OK, "; ".join(seen))


def interface_of(node, dev, base):
    """The network interface of a RoCE port."""
    name = node.root.read(base + "/gid_attrs/ndevs/0")
    if name:
        return name
    nets = node.root.listdir(f"/sys/class/infiniband/{dev}/device/net")
    return nets[0] if nets else None


def ibv_active_mtus(node):
    """{(device, port): active MTU} from ibv_devinfo; {} where it is missing."""
    found, text = node.command(["ibv_devinfo"])
    mtus, dev, port = {}, None, None
    for line in text.splitlines() if found else []:
        m = re.match(r"\s*(hca_id|port|active_mtu):\s*(\S+)", line)
        if not m:
            continue
        key, value = m.groups()
        if key == "hca_id":
            dev = value
        elif key == "port":
            port = value
        elif dev and port and value.isdigit():
            mtus[(dev, port)] = int(value)
    return mtus


def check_mtu(node):
    ports = node.ports()
    if not ports:
        return Result("rdma-mtu", SKIP, NO_DEVICE)
    known = ibv_active_mtus(node)
    seen, low, fixes, unknown = [], [], [], []
    for dev, port, base in ports:
        roce = node.root.read(base + "/link_layer") == "Ethernet"
        mtu, where = known.get((dev, port)), "ibv_devinfo"
        iface = interface_of(node, dev, base) if roce else None
        if mtu is None and iface:
            netmtu = node.root.read(f"/sys/class/net/{iface}/mtu", "")
            if netmtu.isdigit():
                mtu = max((m for m in IB_MTUS if m <= int(netmtu) - ROCE_HEADERS), default=0)
                where = f"{iface} mtu {netmtu}"
        if mtu is None:
            unknown.append(f"{dev}/{port}")
            continue
        text = f"{dev}/{port} {mtu} ({where})"
        if mtu >= 4096:
            seen.append(text)
            continue
        low.append(text)
        if roce:
            fixes.append(f"set {iface or 'the interface'}'s MTU to 9000 (ip link set dev {iface or 'IF'} mtu 9000, "
                         "and in the network configuration to keep it) and the switch ports' to match")
        else:
            fixes.append(f"{dev}/{port}: raise the partition's MTU in the subnet manager (opensm partitions.conf: "
                         "mtu=5 is 4096)")
    tail = f" (unknown for {', '.join(unknown)}: ibv_devinfo not found)" if unknown else ""
    if low:
        return Result("rdma-mtu", WARN, "active MTU below 4096: " + "; ".join(low) + tail, "; ".join(fixes))
    if not seen:
        return Result("rdma-mtu", WARN, "active MTU unknown" + tail, "install ibv-utils / rdma-core's ibv_devinfo")
    return Result("rdma-mtu", OK, "; ".join(seen) + tail)


def roce_v2_gids(node, base):
    out = []
    for i in node.root.listdir(base + "/gid_attrs/types"):
        kind = node.root.read(f"{base}/gid_attrs/types/{i}")  # unreadable for an empty slot
        gid = node.root.read(f"{base}/gids/{i}", "")
        if kind and "v2" in kind and gid.strip("0:"):
            out.append(gid)
    return out


def check_roce_gid(node):
    ports = [(d, p, b) for d, p, b in node.ports() if node.root.read(b + "/link_layer") == "Ethernet"]
    if not ports:
        return Result("rdma-roce-gid", SKIP, "no RoCE port" if node.ports() else NO_DEVICE)
    seen, missing = [], []
    for dev, port, base in ports:
        gids = roce_v2_gids(node, base)
        if gids:
            seen.append(f"{dev}/{port} {len(gids)} RoCE v2 GID(s)")
        else:
            missing.append((dev, port, interface_of(node, dev, base)))
    if missing:
        names = "; ".join(f"{d}/{p}" + (f" ({i})" if i else "") for d, p, i in missing)
        return Result("rdma-roce-gid", FAIL, "no RoCE v2 GID on " + names,
                      "give the port's interface an IP address (each address makes a RoCE v2 GID: ip addr add "
                      "ADDR dev IF) and check that RoCE v2 is on (rdma link; cma_roce_mode -d DEV -p PORT -m 2)")
    return Result("rdma-roce-gid", OK, "; ".join(seen))
