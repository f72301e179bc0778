"""What the checks share about the node: its RDMA devices and ports, its GPUs
and NICs on the PCI bus, its kernel and its limits, read once through a
SysRoot."""
import os
import re

GPU_VENDORS = {"0x10de": "NVIDIA", "0x1002": "AMD"}
GPU_CLASSES = ("0x0302", "0x0300")  # 3D controller, VGA controller
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class PciDevice:
    def __init__(self, node, bdf, names=()):
        self.bdf = bdf
        self.names = list(names)
        base = "/sys/bus/pci/devices/" + bdf
        self.vendor = node.root.read(base + "/vendor", "")
        # The chain of PCI functions from the root port down to this device.
        parts = node.root.realpath(base).split("/")
        self.domain = next((p for p in parts if p.startswith("pci")), "")
        self.chain = [p for p in parts if BDF.match(p)]
        numa = node.root.read(base + "/numa_node", "-1")
        self.numa = int(numa) if re.fullmatch(r"-?\d+", numa) else -1

    def label(self):
        return "/".join(self.names) + f" ({self.bdf})" if self.names else self.bdf


class Node:
    def __init__(self, root, env):
        self.root = root
        self.env = env
        self._commands = {}
        self._gpus = None
        self._nics = None

    def command(self, argv):
        key = tuple(argv)
        if key not in self._commands:
            self._commands[key] = self.root.run(list(argv))
        return self._commands[key]

    def rdma_devices(self):
        return self.root.listdir("/sys/class/infiniband")

    def cxi_devices(self):
        """HPE Slingshot NICs: not verbs devices; libfabric's cxi provider drives them."""
        return self.root.listdir("/sys/class/cxi")

    def ports(self):
        """(device, port number, the port's sysfs folder) of every RDMA port."""
        out = []
        for dev in self.rdma_devices():
            for port in self.root.listdir(f"/sys/class/infiniband/{dev}/ports"):
                out.append((dev, port, f"/sys/class/infiniband/{dev}/ports/{port}"))
        return out

    def gpus(self):
        if self._gpus is None:
            self._gpus = []
            for bdf in self.root.listdir("/sys/bus/pci/devices"):
                base = "/sys/bus/pci/devices/" + bdf
                cls, vendor = self.root.read(base + "/class", ""), self.root.read(base + "/vendor", "")
                if cls.startswith(GPU_CLASSES) and vendor in GPU_VENDORS:
                    self._gpus.append(PciDevice(self, bdf, [f"{GPU_VENDORS[vendor]} GPU"]))
        return self._gpus

    def nics(self):
        """The NICs behind RDMA devices and network interfaces, by PCI address."""
        if self._nics is None:
            found = {}
            links = [f"/sys/class/infiniband/{d}" for d in self.rdma_devices()]
            links += [f"/sys/class/cxi/{d}" for d in self.cxi_devices()]
            links += [f"/sys/class/net/{n}" for n in self.root.listdir("/sys/class/net")]
            for link in links:
                if not self.root.exists(link + "/device"):
                    continue  # a virtual interface (lo, bridges, veth)
                # The PCI function it belongs to: the last one on its path (a
                # virtio NIC's device is a child of its PCI function).
                bdfs = [p for p in self.root.realpath(link + "/device").split("/") if BDF.match(p)]
                if bdfs:
                    found.setdefault(bdfs[-1], []).append(os.path.basename(link))
            self._nics = [PciDevice(self, bdf, names) for bdf, names in sorted(found.items())]
        return self._nics

    def kernel(self):
        """The kernel's release as (major, minor), or None."""
        m = re.match(r"(\d+)\.(\d+)", self.root.read("/proc/sys/kernel/osrelease", ""))
        return (int(m.group(1)), int(m.group(2))) if m else None

    def limit(self, name):
        """(soft, hard) of /proc/self/limits' line name: ints, or None for unlimited;
        None where the line is absent."""
        for line in (self.root.read("/proc/self/limits", "") or "").splitlines():
            if line.startswith(name):
                fields = line[len(name):].split()
                if len(fields) >= 2:
                    conv = [None if f == "unlimited" else int(f) if f.isdigit() else None for f in fields[:2]]
                    return conv[0], conv[1]
        return None
