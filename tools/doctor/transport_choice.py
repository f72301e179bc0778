"""What hetccl would pick on this node for each link class, and why.

The rule is src/comm/comm_setup.cc's Comm::chooseTransports: peers on this
host (intra) take shm; peers on other hosts (inter) take, under auto, the
first transport of the order that this node can use (every rank of a job
must be able to: the job takes a transport only where all can), and tcp
last. HETCCL_TRANSPORT names a transport per link class instead. One entry
per transport below: adding a transport is one entry."""
import os
import re
import shutil
from dataclasses import dataclass
from typing import Callable

from doctor.checks_stack import loadable, rdm_tagged_providers
from doctor.report import FAIL, OK, WARN, Result

DEFAULT_AUTO_INTER = "ucx,ofi,tcp"  # HETCCL_AUTO_INTER's default, where the library has that setting
ASSUMED_BUILT = ("tcp", "shm", "ucx")  # where hetccl-info cannot be run


def ucx_usable(node):
    if not node.rdma_devices():
        return False, "no RDMA device"
    lib = node.env.get("HETCCL_UCX_LIB") or "libucp.so.0"
    if node.root.real:
        return (True, f"RDMA device and {lib}") if loadable(lib) else (False, f"{lib} does not load")
    found, _ = node.command(["ucx_info", "-d"])  # a recorded tree: UCX is there where ucx_info is
    return (True, "RDMA device and UCX") if found else (False, "no UCX (ucx_info not recorded)")


def ofi_usable(node):
    found, _, fast = rdm_tagged_providers(node)
    if not found:
        return False, "fi_info not found"
    if not fast:
        return False, "no RDM+tagged provider but tcp/sockets/udp/shm"
    return True, "RDM+tagged provider " + ", ".join(fast)


def net_usable(node):
    plugin = node.env.get("HETCCL_NET_PLUGIN") or node.env.get("NCCL_NET_PLUGIN")
    return (True, f"net plugin {plugin}") if plugin else (False, "neither HETCCL_NET_PLUGIN nor NCCL_NET_PLUGIN set")


@dataclass
class Transport:
    name: str
    links: tuple  # the link classes it can serve: intra (this host), inter (other hosts)
    auto: bool  # whether auto may pick it (else only when HETCCL_TRANSPORT names it)
    usable: Callable  # node -> (bool, why)


TRANSPORTS = [
    Transport("shm", ("intra",), True, lambda node: (True, "same-host peers share memory")),
    Transport("ucx", ("intra", "inter"), True, ucx_usable),
    Transport("ofi", ("inter",), True, ofi_usable),
    Transport("net", ("inter",), False, net_usable),
    Transport("tcp", ("intra", "inter"), True, lambda node: (True, "always")),
]
BY_NAME = {t.name: t for t in TRANSPORTS}


def find_info_tool():
    """hetccl-info: on PATH, in the install's bin/ (these checks lie in
    share/hetccl/doctor), or in the build folder of the checkout (tools/doctor)."""
    here = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # share/hetccl or tools
    for p in (shutil.which("hetccl-info"), os.path.join(here, "..", "..", "bin", "hetccl-info"),
              os.path.join(here, "..", "build", "tools", "hetccl-info")):
        if p and os.access(p, os.X_OK):
            return p
    return "hetccl-info"


def library_facts(node):
    """(transports this hetccl has, its settings {name: value}) from hetccl-info."""
    found, text = node.command([find_info_tool() if node.root.real else "hetccl-info", "--settings"])
    m = re.search(r"^# transports:\s*(.+)$", text, re.M) if found else None
    if not m:
        return list(ASSUMED_BUILT), {}, "hetccl-info not found: assuming the transports " + ", ".join(ASSUMED_BUILT)
    settings = dict(re.findall(r"^(HETCCL_\w+)\s+=\s+(\S*)", text, re.M))
    return [t for t in re.split(r"[,\s]+", m.group(1).strip()) if t], settings, ""


def parse_choice(text):
    """{intra, inter} from HETCCL_TRANSPORT's text; None where hetccl refuses it."""
    text = text.strip().lower() or "auto"
    if "=" not in text:
        return {"intra": text, "inter": text}
    choice = {"intra": "auto", "inter": "auto"}
    for item in text.split(","):
        cls, _, name = item.partition("=")
        if cls not in choice or not name:
            return None
        choice[cls] = name
    return choice


def check_transport_choice(node):
    built, settings, note = library_facts(node)
    given = node.env.get("HETCCL_TRANSPORT", "")
    choice = parse_choice(given)
    if choice is None or any(n != "auto" and n not in BY_NAME for n in choice.values()):
        return Result("transport-choice", FAIL, f"HETCCL_TRANSPORT='{given}' is not one hetccl accepts",
                      "unset it, or give auto, shm, tcp, ucx, or intra=<name>,inter=<name>")
    order = node.env.get("HETCCL_AUTO_INTER", DEFAULT_AUTO_INTER) if "HETCCL_AUTO_INTER" in settings \
        else DEFAULT_AUTO_INTER
    picked, why, problems, cautions = {}, [], [], []
    for link in ("intra", "inter"):
        asked = choice[link]
        if asked != "auto":
            t = BY_NAME[asked]
            ok, reason = t.usable(node)
            picked[link] = asked
            if asked not in built:
                problems.append(f"{link}={asked}: this hetccl has no {asked} transport (it has {', '.join(built)})")
            if asked == "net" and not ok:
                problems.append(f"{link}=net: {reason}")
            if link not in t.links:
                cautions.append(f"{asked} cannot reach other hosts: a job across hosts fails at init; use "
                                f"intra={asked},inter=auto")
            why.append(f"{link}: {asked} as HETCCL_TRANSPORT asks ({reason})")
            continue
        names = ["shm"] if link == "intra" else [n.strip() for n in order.split(",") if n.strip()]
        reasons = []
        for name in names:
            t = BY_NAME.get(name)
            if t is None or name not in built:
                reasons.append(f"{name} not in this hetccl")
                continue
            if not t.auto or link not in t.links:
                continue
            ok, reason = t.usable(node)
            if ok:
                picked[link] = name
                reasons.append(f"{name}: {reason}")
                break
            reasons.append(f"{name}: {reason}")
        picked.setdefault(link, "tcp")
        why.append(f"{link} -> {picked[link]} (" + "; ".join(reasons) + ")")
    text = "; ".join(why) + (f"; {note}" if note else "")
    if problems:
        return Result("transport-choice", FAIL, text, "; ".join(problems + cautions))
    if cautions:
        return Result("transport-choice", WARN, text, "; ".join(cautions))
    return Result("transport-choice", OK, text)
