"""A healthy node as a tree of files, for hetccl-doctor --node --root: two
sockets, each with a PCIe switch holding an NVIDIA GPU and a Mellanox NIC
(mlx5_0 InfiniBand on socket 0, mlx5_1 RoCE over ens2 on socket 1),
nvidia_peermem loaded, IOMMU in passthrough, limits raised, and the recorded
output of fi_info, ucx_info, ibv_devinfo and hetccl-info. The tests break one
thing at a time in a copy."""
import os
import struct

# (domain, root port, switch upstream, switch downstream, endpoint, what, NUMA node)
LAYOUT = [
    ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "gpu", 0),
    ("pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:01.0", "0000:04:00.0", "mlx5_0", 0),
    ("pci0000:80", "0000:80:01.0", "0000:81:00.0", "0000:82:00.0", "0000:83:00.0", "gpu", 1),
    ("pci0000:80", "0000:80:01.0", "0000:81:00.0", "0000:82:01.0", "0000:84:00.0", "mlx5_1", 1),
]
GPU0, NIC0, GPU1, NIC1 = (row[4] for row in LAYOUT)
BRIDGE_CLASS, GPU_CLASS, IB_CLASS, ETH_CLASS = "0x060400", "0x030200", "0x020700", "0x020000"
ACS_OFFSET = 0x100

FI_INFO_L = "".join(f"{p}:\n    version: 120.0\n" for p in ("verbs", "ofi_rxm", "shm", "tcp", "sockets", "udp"))
FI_RDM_TAGGED = "".join(f"provider: {p}\n    fabric: {f}\n    domain: {d}\n    version: 120.0\n    type: FI_EP_RDM\n"
                        "    protocol: FI_PROTO_RXM\n"
                        for p, f, d in (("verbs;ofi_rxm", "IB-0xfe80000000000000", "mlx5_0"),
                                        ("verbs;ofi_rxm", "192.168.10.0/24", "mlx5_1"),
                                        ("tcp;ofi_rxm", "192.168.10.0/24", "ens2")))
UCX_HEADER = "#\n# Memory domain: {md}\n#     Component: {comp}\n#             register: unlimited, cost: 180 nsec\n" \
    "#         memory types: {mem}\n#\n"
UCX_TRANSPORT = "#      Transport: {tl}\n#         Device: {dev}\n#           Type: {kind}\n#\n"


def ucx_info(rdma=True, cuda=True):
    out = UCX_HEADER.format(md="posix", comp="posix", mem="host (access,alloc,cache)")
    out += UCX_TRANSPORT.format(tl="posix", dev="memory", kind="intra-node")
    out += UCX_HEADER.format(md="enp1s0", comp="tcp", mem="host (access,reg,cache)")
    out += UCX_TRANSPORT.format(tl="tcp", dev="ens2", kind="network")
    if cuda:
        out += UCX_HEADER.format(md="cuda_cpy", comp="cuda_cpy", mem="host (reg), cuda (access,alloc,reg,detect)")
        out += UCX_TRANSPORT.format(tl="cuda_copy", dev="cuda", kind="accelerator")
    if rdma:
        for dev in ("mlx5_0", "mlx5_1"):
            mem = "host (access,reg,cache)" + (", cuda (reg)" if cuda else "")
            out += UCX_HEADER.format(md=dev, comp="ib", mem=mem)
            out += UCX_TRANSPORT.format(tl="rc_mlx5", dev=dev + ":1", kind="network")
            out += UCX_TRANSPORT.format(tl="ud_verbs", dev=dev + ":1", kind="network")
    return out


def ibv_devinfo(mtu0=4096, mtu1=4096):
    out = ""
    for dev, layer, mtu in (("mlx5_0", "InfiniBand", mtu0), ("mlx5_1", "Ethernet", mtu1)):
        out += (f"hca_id:\t{dev}\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n"
                f"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{mtu} "
                f"({IB_MTU_CODE[mtu]})\n\t\t\tlink_layer:\t\t{layer}\n\n")
    return out


IB_MTU_CODE = {256: 1, 512: 2, 1024: 3, 2048: 4, 4096: 5}


def hetccl_info(transports="tcp, shm, ucx", settings=("HETCCL_TRANSPORT",)):
    out = "# settings (environment variables)\n"
    for s in settings:
        out += f"{s:<22} = auto       [string, default; default 'auto']\n    ...\n    allowed: any text\n"
    return out + f"# hetccl 0.9.0\n# device kinds: host\n# transports: {transports}\n# group backends: host\n"


def config_space(acs_ctrl=None):
    """4 KiB of PCI config space; with an ACS extended capability whose
    control register is acs_ctrl where given (bridges)."""
    data = bytearray(4096)
    if acs_ctrl is not None:
        struct.pack_into("<I", data, ACS_OFFSET, 0x000D | (1 << 16))  # ACS, version 1, last capability
        struct.pack_into("<HH", data, ACS_OFFSET + 4, 0x005F, acs_ctrl)
    return bytes(data)


def write(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb" if isinstance(text, bytes) else "w") as f:
        f.write(text)


def link(root, path, target):
    """A relative link at path to target (both absolute on the node), so it resolves inside the tree."""
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    os.symlink(os.path.relpath(os.path.join(root, target.lstrip("/")), os.path.dirname(full)), full)


def pci_function(root, path, cls, vendor, numa, group, acs_ctrl=None):
    bdf = os.path.basename(path)
    write(root, path + "/class", cls + "\n")
    write(root, path + "/vendor", vendor + "\n")
    write(root, path + "/numa_node", f"{numa}\n")
    write(root, path + "/config", config_space(acs_ctrl))
    write(root, f"/sys/kernel/iommu_groups/{group}/type", "identity\n")
    link(root, path + "/iommu_group", f"/sys/kernel/iommu_groups/{group}")
    link(root, "/sys/bus/pci/devices/" + bdf, path)


def rdma_device(root, dev, pci_path, layer):
    base = f"/sys/class/infiniband/{dev}"
    link(root, base + "/device", pci_path)
    port = base + "/ports/1"
    write(root, port + "/state", "4: ACTIVE\n")
    write(root, port + "/phys_state", "5: LinkUp\n")
    write(root, port + "/link_layer", layer + "\n")
    if layer == "Ethernet":
        write(root, port + "/gids/0", "fe80:0000:0000:0000:0a00:27ff:fe00:0001\n")
        write(root, port + "/gids/1", "0000:0000:0000:0000:0000:ffff:c0a8:0a05\n")
        write(root, port + "/gids/2", "0000:0000:0000:0000:0000:0000:0000:0000\n")
        write(root, port + "/gid_attrs/types/0", "IB/RoCE v1\n")
        write(root, port + "/gid_attrs/types/1", "RoCE v2\n")
        write(root, port + "/gid_attrs/ndevs/0", "ens2\n")
    else:
        write(root, port + "/gids/0", "fe80:0000:0000:0000:0002:c903:0000:0001\n")


def build(root):
    group = 0
    for domain, rp, up, down, end, what, numa in LAYOUT:
        path = f"/sys/devices/{domain}"
        for bdf in (rp, up, down):
            path += "/" + bdf
            if not os.path.exists(os.path.join(root, path.lstrip("/"), "class")):
                pci_function(root, path, BRIDGE_CLASS, "0x8086", numa, group, acs_ctrl=0x0001)  # SrcValid only
                group += 1
        path += "/" + end
        if what == "gpu":
            pci_function(root, path, GPU_CLASS, "0x10de", numa, group)
        else:
            pci_function(root, path, IB_CLASS if what == "mlx5_0" else ETH_CLASS, "0x15b3", numa, group)
            rdma_device(root, what, path, "InfiniBand" if what == "mlx5_0" else "Ethernet")
            if what == "mlx5_1":
                write(root, "/sys/class/net/ens2/mtu", "9000\n")
                link(root, "/sys/class/net/ens2/device", path)
        group += 1
    write(root, "/sys/class/net/lo/mtu", "65536\n")  # no device: virtual
    for i in (0, 1):
        write(root, f"/dev/infiniband/uverbs{i}", "")
    for module in ("nvidia", "nvidia_peermem", "ib_uverbs", "mlx5_ib"):
        write(root, f"/sys/module/{module}/refcnt", "0\n")
    write(root, "/proc/driver/nvidia/version",
          "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build\n")
    write(root, "/proc/sys/kernel/osrelease", "6.8.0-45-generic\n")
    write(root, "/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt\n")
    write(root, "/proc/self/limits", limits())
    write(root, "/proc/sys/kernel/numa_balancing", "0\n")
    write(root, "/proc/meminfo", "MemTotal: 1056764788 kB\nHugePages_Total: 0\nHugepagesize: 2048 kB\n")
    write(root, "/sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n")
    write(root, "/etc/security/limits.conf", "* soft memlock unlimited\n* hard memlock unlimited\n")
    write(root, "/commands/fi_info_-l.txt", FI_INFO_L)
    write(root, "/commands/fi_info_-t_FI_EP_RDM_-c_FI_TAGGED.txt", FI_RDM_TAGGED)
    write(root, "/commands/ucx_info_-d.txt", ucx_info())
    write(root, "/commands/ibv_devinfo.txt", ibv_devinfo())
    write(root, "/commands/hetccl-info_--settings.txt", hetccl_info())


def limits(memlock="unlimited", nofile="1048576"):
    rows = [("Max cpu time", "unlimited", "unlimited", "seconds"), ("Max open files", nofile, nofile, "files"),
            ("Max locked memory", memlock, memlock, "bytes"), ("Max address space", "unlimited", "unlimited", "bytes")]
    return "Limit                     Soft Limit           Hard Limit           Units     \n" + \
        "".join(f"{n:<26}{s:<21}{h:<21}{u:<10}\n" for n, s, h, u in rows)
