"""The communication libraries RDMA goes through: libfabric's providers
(fi_info) and UCX's transports and memory types (ucx_info)."""
import ctypes
import re

from doctor.report import OK, WARN, Result

# Providers that move data over sockets or host memory: an RDM endpoint of
# one of these is no RDMA path (net is libfabric's newer sockets provider).
SOCKET_PROVIDERS = ("tcp", "sockets", "udp", "shm", "net")
UCX_RDMA = re.compile(r"^(rc|ud|dc)(_|$)|^srd")  # rc, rc_verbs, rc_mlx5, ud_verbs, dc_mlx5, EFA's srd
UCX_GPU_MEMORY = ("cuda", "rocm")

RDM_TAGGED = ["fi_info", "-t", "FI_EP_RDM", "-c", "FI_TAGGED"]


def rdm_tagged_providers(node):
    """(found, every provider of an RDM endpoint with tagged messages, those
    that are not socket or shared-memory ones). A layered name such as
    verbs;ofi_rxm counts by its core provider, the first."""
    found, text = node.command(RDM_TAGGED)
    names = sorted(set(re.findall(r"^provider:\s*(\S+)", text, re.M))) if found else []
    fast = [n for n in names if n.split(";")[0] not in SOCKET_PROVIDERS]
    return found, names, fast


def check_libfabric(node):
    found, text = node.command(["fi_info", "-l"])
    if not found:
        return Result("libfabric", WARN, "fi_info not found: libfabric's providers unknown",
                      "install libfabric and its tools (Debian: libfabric1 libfabric-bin; EFA and Slingshot "
                      "ship their own libfabric) to use a libfabric provider")
    listed = re.findall(r"^([A-Za-z0-9_]+):\s*$", text, re.M)
    _, rdm, fast = rdm_tagged_providers(node)
    scope = f" (FI_PROVIDER={node.env['FI_PROVIDER']})" if node.env.get("FI_PROVIDER") else ""
    if fast:
        return Result("libfabric", OK, f"RDM+tagged over RDMA: {', '.join(fast)}; providers: {', '.join(listed)}"
                      + scope)
    return Result("libfabric", WARN, "no RDM+tagged provider but socket/shared-memory ones (" +
                  (", ".join(rdm) or "none") + f"); providers: {', '.join(listed) or 'none'}" + scope,
                  "install the fabric's provider (efa: the EFA installer; cxi: HPE Slingshot host software; verbs: "
                  "libfabric built with rdma-core); if FI_PROVIDER is set, it must name that provider")


def loadable(lib):
    try:
        ctypes.CDLL(lib)
        return True
    except OSError:
        return False


def ucx_devices(text):
    """{transport: [devices]} and the memory types of ucx_info -d's output."""
    transports, memtypes, current = {}, set(), None
    for line in text.splitlines():
        line = line.lstrip("#").strip()
        if line.startswith("Transport:"):
            current = line.split(":", 1)[1].strip()
            transports.setdefault(current, [])
        elif line.startswith("Device:") and current:
            transports[current].append(line.split(":", 1)[1].strip())
        elif line.startswith("memory types:"):
            memtypes.update(m.strip().split(" ")[0] for m in line.split(":", 1)[1].split("),") if m.strip())
    return transports, memtypes


def check_ucx(node):
    found, text = node.command(["ucx_info", "-d"])
    if not found:
        lib = node.env.get("HETCCL_UCX_LIB") or "libucp.so.0"
        loads = node.root.real and loadable(lib)
        return Result("ucx", WARN, f"ucx_info not found: UCX's transports unknown ({lib} "
                      + ("loads" if loads else "does not load" if node.root.real else "not looked for") + ")",
                      "install ucx_info (Debian: ucx-utils) to see them" if loads else
                      "install UCX and its tools (Debian: libucx0 ucx-utils) for hetccl's ucx transport")
    transports, memtypes = ucx_devices(text)
    rdma = {t: d for t, d in transports.items() if UCX_RDMA.match(t)}
    gpu_mem = sorted(m for m in memtypes if m.startswith(UCX_GPU_MEMORY))
    found_text = ("RDMA: " + ", ".join(f"{t} ({' '.join(d)})" for t, d in sorted(rdma.items())) if rdma
                  else "no RDMA transport") + f"; transports: {', '.join(sorted(transports)) or 'none'}" + \
        f"; memory types: {', '.join(sorted(memtypes)) or 'none'}"
    if node.gpus():  # informational: hetccl hands UCX host memory only (src/transport/ucx/ucx_transport.cc)
        found_text += ("; GPU memory: " + (", ".join(gpu_mem) if gpu_mem else "none") +
                       " (hetccl hands UCX host memory only; GPU data crosses through the device border or staging)")
    if not rdma:
        return Result("ucx", WARN, found_text,
                      "install UCX with its InfiniBand/RoCE module (Debian's libucx0 has it; a UCX built from source "
                      "needs rdma-core's headers) and leave rc/ud/dc in UCX_TLS")
    return Result("ucx", OK, found_text)
