"""One check's outcome, and the node report in text and JSON."""
import json
from dataclasses import asdict, dataclass

OK, WARN, FAIL, SKIP = "OK", "WARN", "FAIL", "SKIP"
FORMAT = "hetccl-doctor-node-1"


@dataclass
class Result:
    name: str  # the check, e.g. rdma-ports
    status: str  # OK, WARN, FAIL, or SKIP (nothing to check here, e.g. no GPU)
    found: str  # what the check saw
    fix: str = ""  # for WARN and FAIL: what to do about it


def exit_status(results):
    """0 nothing failed, 1 something failed (2, could not run, is the caller's)."""
    return 1 if any(r.status == FAIL for r in results) else 0


def as_text(results, root):
    width = max(len(r.name) for r in results)
    lines = [f"hetccl-doctor --node: {'this node' if root == '/' else 'the tree under ' + root}"]
    for r in results:
        lines.append(f"{r.status:<4}  {r.name:<{width}}  {r.found}")
        if r.fix and r.status in (WARN, FAIL):
            lines.append(f"{'':<4}  {'':<{width}}  fix: {r.fix}")
    counts = {s: sum(r.status == s for r in results) for s in (OK, WARN, FAIL, SKIP)}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines) + "\n"


def as_json(results, root):
    counts = {s: sum(r.status == s for r in results) for s in (OK, WARN, FAIL, SKIP)}
    doc = {"format": FORMAT, "root": root, "checks": [asdict(r) for r in results], "counts": counts,
           "exit_status": exit_status(results)}
    return json.dumps(doc, indent=2) + "\n"
