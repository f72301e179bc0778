"""GPUs and NICs on the PCI bus: how near each GPU is to a NIC, ACS on the
bridges between them, the IOMMU's mode, and the peer memory GPUDirect RDMA
needs."""
import struct

from doctor.report import FAIL, OK, SKIP, WARN, Result

NO_GPU = "no GPU on the PCI bus (class 0x0300/0x0302 of NVIDIA 0x10de or AMD 0x1002)"
ACS_CAP_ID = 0x000D
ACS_REQ_REDIR, ACS_CMPLT_REDIR = 0x4, 0x8


def common_prefix(a, b):
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def relation(gpu, nic):
    """(rank, words): 0 same PCIe switch, 1 same NUMA node, 2 NUMA unknown, 3 across NUMA nodes."""
    if gpu.domain == nic.domain and common_prefix(gpu.chain[:-1], nic.chain[:-1]) >= 1:
        return 0, "same PCIe switch"
    if gpu.numa >= 0 and gpu.numa == nic.numa:
        return 1, f"same NUMA node {gpu.numa}, through the CPU"
    if gpu.numa < 0 or nic.numa < 0:
        return 2, "through the CPU (NUMA node not reported)"
    return 3, f"across NUMA nodes (GPU on {gpu.numa}, NIC on {nic.numa})"


def rdma_nics(node):
    rdma = set(node.rdma_devices() + node.cxi_devices())
    return [n for n in node.nics() if rdma.intersection(n.names)]


def check_gpu_nic(node):
    gpus = node.gpus()
    if not gpus:
        return Result("gpu-nic-affinity", SKIP, NO_GPU)
    nics = rdma_nics(node) or node.nics()
    if not nics:
        return Result("gpu-nic-affinity", SKIP, f"{len(gpus)} GPU(s) but no NIC on the PCI bus")
    parts, far = [], []
    for g in gpus:
        # Every NIC, nearest first: the nearest decides.
        ranked = sorted((relation(g, n) + (n,) for n in nics), key=lambda t: t[0])
        parts.append(f"{g.label()} -> " + ", ".join(f"{n.label()}: {words}" for _, words, n in ranked))
        if ranked[0][0] == 3:
            far.append(g.label())
    if far:
        return Result("gpu-nic-affinity", WARN, "; ".join(parts),
                      "no NIC on the NUMA node of " + ", ".join(far) + ": traffic crosses the sockets' link; put a "
                      "NIC on each GPU's socket (another slot), and run each rank on its GPU's NUMA node "
                      "(numactl --cpunodebind=N --membind=N)")
    return Result("gpu-nic-affinity", OK, "; ".join(parts))


def acs_redirects(config):
    """The ACS control's request and completion redirect bits of a PCI
    function's config space; None where the extended space is unreadable
    (it takes root) or holds no ACS capability."""
    if len(config) < 0x104:
        return None
    at, seen = 0x100, 0
    while at and at + 8 <= len(config) and seen < 64:
        header = struct.unpack_from("<I", config, at)[0]
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == ACS_CAP_ID:
            return struct.unpack_from("<H", config, at + 6)[0] & (ACS_REQ_REDIR | ACS_CMPLT_REDIR)
        at, seen = header >> 20, seen + 1
    return None


def check_acs(node):
    gpus, nics = node.gpus(), rdma_nics(node)
    if not gpus or not nics:
        return Result("pcie-acs", SKIP, NO_GPU if not gpus else "no RDMA NIC")
    bridges = set()
    for g in gpus:
        for n in nics:
            k = common_prefix(g.chain[:-1], n.chain[:-1])
            if g.domain == n.domain and k >= 1:  # under one switch: peer traffic may stay below it
                bridges.update(g.chain[k:-1] + n.chain[k:-1])
    if not bridges:
        return Result("pcie-acs", SKIP, "no GPU shares a PCIe switch with an RDMA NIC")
    redirect, clear, unread = [], [], []
    for b in sorted(bridges):
        bits = acs_redirects(node.root.read_bytes(f"/sys/bus/pci/devices/{b}/config"))
        (unread if bits is None else redirect if bits else clear).append(b)
    if redirect:
        return Result("pcie-acs", WARN, "ACS redirects peer traffic up to the CPU on " + ", ".join(redirect),
                      "on bare metal turn ACS redirection off on those bridges (BIOS: ACS off, or setpci -s BDF "
                      "ECAP_ACS+0x6.w=0000 at boot); keep it where it isolates devices passed into VMs")
    if not clear:
        return Result("pcie-acs", SKIP, "ACS not readable on " + ", ".join(unread) + " (needs root)")
    tail = f"; not readable on {', '.join(unread)} (needs root)" if unread else ""
    return Result("pcie-acs", OK, "no ACS redirection on " + ", ".join(clear) + tail)


def check_iommu(node):
    groups = node.root.listdir("/sys/kernel/iommu_groups")
    if not groups:
        return Result("iommu", OK, "no IOMMU groups: DMA is not translated")
    devices = node.gpus() + rdma_nics(node)
    if devices:
        types = {d.label(): node.root.read(f"/sys/bus/pci/devices/{d.bdf}/iommu_group/type") for d in devices}
    else:
        types = {f"group {g}": node.root.read(f"/sys/kernel/iommu_groups/{g}/type") for g in groups}
    translated = [f"{k} ({t})" for k, t in types.items() if t and t != "identity"]
    cmdline = node.root.read("/proc/cmdline", "")
    if translated:
        return Result("iommu", WARN, "IOMMU translates DMA for " + ", ".join(translated),
                      "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt) in GRUB_CMDLINE_LINUX, "
                      "update-grub and reboot: GPUDirect RDMA wants passthrough")
    if any(types.values()):
        return Result("iommu", OK, "passthrough (identity) for " + ", ".join(types))
    if "iommu=pt" in cmdline.split():
        return Result("iommu", OK, "passthrough (iommu=pt on the kernel command line)")
    return Result("iommu", WARN, f"IOMMU on ({len(groups)} groups), mode not readable and no iommu=pt in /proc/cmdline",
                  "boot with iommu=pt in GRUB_CMDLINE_LINUX, update-grub and reboot")


def check_peer_memory(node):
    gpus = node.gpus()
    if not gpus:
        return Result("gpu-peer-memory", SKIP, NO_GPU)
    if not node.rdma_devices():
        return Result("gpu-peer-memory", SKIP, f"{len(gpus)} GPU(s) but no RDMA device: GPUDirect RDMA has no NIC")
    kernel = node.kernel()
    dmabuf_kernel = kernel is not None and kernel >= (5, 12)
    kernel_text = "kernel " + (".".join(map(str, kernel)) if kernel else "unknown")
    found, fails = [], []
    if any(g.vendor == "0x10de" for g in gpus):
        version = node.root.read("/proc/driver/nvidia/version", "")
        if not node.root.exists("/sys/module/nvidia"):
            fails.append(("NVIDIA driver not loaded", "install and load the NVIDIA driver (modprobe nvidia)"))
        elif node.root.exists("/sys/module/nvidia_peermem"):
            found.append("NVIDIA: nvidia_peermem loaded")
        elif dmabuf_kernel and "Open Kernel Module" in version:
            found.append(f"NVIDIA: dma-buf (open kernel modules, {kernel_text})")
        else:
            fails.append((f"NVIDIA: no nvidia_peermem, and no dma-buf ({kernel_text}, "
                          + ("open" if "Open Kernel Module" in version else "proprietary") + " kernel modules)",
                          "modprobe nvidia_peermem (it comes with the NVIDIA driver; add it to /etc/modules-load.d), "
                          "or use the driver's open kernel modules on kernel >= 5.12 for dma-buf"))
    if any(g.vendor == "0x1002" for g in gpus):
        if not node.root.exists("/sys/module/amdgpu"):
            fails.append(("AMD: amdgpu not loaded", "install and load amdgpu (ROCm's amdgpu-dkms; modprobe amdgpu)"))
        elif dmabuf_kernel:
            found.append(f"AMD: dma-buf (amdgpu, {kernel_text})")
        else:
            fails.append((f"AMD: amdgpu on {kernel_text}, too old for dma-buf",
                          "use kernel >= 5.12 for dma-buf (or ROCm's peer-memory module with MLNX_OFED)"))
    if fails:
        return Result("gpu-peer-memory", FAIL, "; ".join([f for f, _ in fails] + found), "; ".join(x for _, x in fails))
    return Result("gpu-peer-memory", OK, "; ".join(found))
