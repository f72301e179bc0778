"""hetccl-doctor --node [--json] [--root DIR]: checks that this node is set up
for hetccl's RDMA paths, one line per check (OK, WARN, FAIL, or SKIP where
there is nothing to check, such as GPUs on a node without one), each problem
with its fix.

--json     the report as JSON (format hetccl-doctor-node-1)
--root DIR read /sys, /proc, /dev and /etc under DIR, and each command's output
           from DIR/commands/NAME.txt (NAME: the command line, spaces as _)
           instead of running it; HETCCL_DOCTOR_ROOT sets the same

Exit status: 0 nothing failed, 1 a check failed, 2 it could not run (bad
usage, a root that is not a folder, a check that broke)."""
import os
import sys

from doctor import checks_pci, checks_rdma, checks_stack, checks_system, transport_choice
from doctor.facts import Node
from doctor.report import FAIL, Result, as_json, as_text, exit_status
from doctor.sysroot import SysRoot

# In the order they print: the devices, the bus, the host, the libraries,
# and what hetccl would make of them.
CHECKS = [
    checks_rdma.check_rdma_devices,
    checks_rdma.check_uverbs,
    checks_rdma.check_ports,
    checks_rdma.check_link_layer,
    checks_rdma.check_mtu,
    checks_rdma.check_roce_gid,
    checks_pci.check_gpu_nic,
    checks_pci.check_acs,
    checks_pci.check_iommu,
    checks_pci.check_peer_memory,
    checks_system.check_memlock,
    checks_system.check_open_files,
    checks_system.check_numa_balancing,
    checks_system.check_hugepages,
    checks_stack.check_libfabric,
    checks_stack.check_ucx,
    transport_choice.check_transport_choice,
]


def run_checks(node):
    """Every check's result, and whether one of them broke."""
    results, broke = [], False
    for check in CHECKS:
        try:
            results.append(check(node))
        except Exception as e:  # a check that breaks is reported; the others still run
            results.append(Result(check.__name__.replace("check_", "").replace("_", "-"), FAIL,
                                  f"the check itself failed: {type(e).__name__}: {e}", "report this with the output"))
            broke = True
    return results, broke


def main(args, env=os.environ):
    as_json_out, root = False, env.get("HETCCL_DOCTOR_ROOT") or "/"
    rest = list(args)
    while rest:
        a = rest.pop(0)
        if a == "--json":
            as_json_out = True
        elif a == "--root" and rest:
            root = rest.pop(0)
        elif a.startswith("--root="):
            root = a.split("=", 1)[1]
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            print(f"hetccl-doctor --node: unknown argument '{a}' (--json, --root DIR)", file=sys.stderr)
            return 2
    if not os.path.isdir(root):
        print(f"hetccl-doctor --node: root '{root}' is not a folder", file=sys.stderr)
        return 2
    node = Node(SysRoot(root), dict(env))
    results, broke = run_checks(node)
    sys.stdout.write(as_json(results, root) if as_json_out else as_text(results, root))
    return 2 if broke else exit_status(results)
