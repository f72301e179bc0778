#!/usr/bin/env python3
"""The cost model (hetccl-plan) against measured runs: each case is a
cluster file of bench/clusters (with a line or two changed), a collective
and a size, and the time a benchmark measured for it, read from its record
in docs/perf/data. Prints one ratio line per case and whether every model
time is within +-25% of the measured one (exit 1 if not: ctest
model.MatchesRecordedRuns).

  /usr/bin/python3 bench/model_vs_measured.py [BUILD]

  ratio model <case> <bytes> measured_us=.. model_us=.. model/measured=..
"""
import json
import os
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)
LIMIT = 0.25

# (case, cluster file, replacements in it, collective, bytes, record, row match, column)
CASES = [
    ("emu hosts, border cut by size", "emu-border-cut.yaml", [], "allreduce", 16 << 20,
     "border-cut-2core", {"name": "border_cut"}, "size_us"),
    ("emu hosts, border cut by bandwidth", "emu-border-cut.yaml", [("border_cut: size", "border_cut: bandwidth")],
     "allreduce", 16 << 20, "border-cut-2core", {"name": "border_cut"}, "bandwidth_us"),
    ("emu hosts 2x4, 2 Gbit/s, two levels", "emu-host-levels.yaml", [], "allreduce", 16 << 20,
     "multihost-levels", {"rate": "2gbit"}, "two_level_us"),
    ("emu hosts 2x4, 2 Gbit/s, one level", "emu-host-levels.yaml", [("host_levels: true", "host_levels: false")],
     "allreduce", 16 << 20, "multihost-levels", {"rate": "2gbit"}, "one_level_us"),
    ("emu hosts 2x4, 10 Gbit/s, two levels", "emu-host-levels.yaml", [("nic_gbps: 2,", "nic_gbps: 10,")],
     "allreduce", 16 << 20, "multihost-levels", {"rate": "10gbit"}, "two_level_us"),
    ("emu hosts 2x4, 10 Gbit/s, one level", "emu-host-levels.yaml",
     [("nic_gbps: 2,", "nic_gbps: 10,"), ("host_levels: true", "host_levels: false")], "allreduce", 16 << 20,
     "multihost-levels", {"rate": "10gbit"}, "one_level_us"),
]
FAST = [("gbps: 0.1,", "gbps: 0.2,"), ("gbps: 0.4,", "gbps: 0.8,")]
CASES += [
    ("emu hosts 200-800 Mbit/s, border cut by size", "emu-border-cut.yaml", FAST, "allreduce", 16 << 20,
     "border-cut-2core-fast", {"name": "border_cut"}, "size_us"),
    ("emu hosts 200-800 Mbit/s, border cut by bandwidth", "emu-border-cut.yaml",
     FAST + [("border_cut: size", "border_cut: bandwidth")], "allreduce", 16 << 20, "border-cut-2core-fast",
     {"name": "border_cut"}, "bandwidth_us"),
]
for size in (1 << 20, 8 << 20, 64 << 20):
    CASES.append(("CPU a,a,b,b on shm", "cpu-2core-aabb.yaml", [], "allreduce", size, "cpu-aabb-shm",
                  {"bytes": size}, "time_us"))
# Cases held to a wider bound, and why.
WIDER = {
    ("CPU a,a,b,b on shm", 1 << 20): (0.35, "1 MiB stays in the caches, which the model leaves out; two runs of the "
                                            "4 ranks on 2 cores measured 441 and 532 us"),
}
for size in (16 << 20, 128 << 20, 256 << 20):
    CASES.append(("H200, two GPU groups", "h200-two-gpu-groups.yaml", [], "allreduce", size, "gpu-two-groups",
                  {"name": "gpu_2groups_allreduce", "bytes": size}, "time_us"))
for coll in ("allgather", "reducescatter"):
    CASES.append(("H200, two GPU groups", "h200-two-gpu-groups.yaml", [], coll, 64 << 20, "gpu-two-groups",
                  {"name": f"gpu_2groups_{coll}", "bytes": 64 << 20}, "time_us"))


def measured(record, match, column):
    with open(os.path.join(root, "docs", "perf", "data", record + ".json")) as f:
        rows = json.load(f)["rows"]
    for r in rows:
        if all(r.get(k) == v for k, v in match.items()):
            return float(r[column])
    sys.exit(f"model_vs_measured: no row {match} in {record}")


def model(plan, cluster, edits, coll, nbytes):
    with open(os.path.join(here, "clusters", cluster)) as f:
        text = f.read()
    for old, new in edits:
        if old not in text:
            sys.exit(f"model_vs_measured: '{old}' is not in {cluster}")
        text = text.replace(old, new)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, cluster)
        with open(path, "w") as f:
            f.write(text)
        out = os.path.join(d, "out.json")
        subprocess.run([plan, path, "--json", out, "--sizes", str(nbytes), "--colls", coll], check=True,
                       stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)["rows"][0]["us"]


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    plan = os.path.join(build, "tools", "hetccl-plan")
    within = failed = 0
    for name, cluster, edits, coll, nbytes, record, match, column in CASES:
        m = measured(record, match, column)
        p = model(plan, cluster, edits, coll, nbytes)
        ratio = p / m
        within += abs(ratio - 1) <= LIMIT
        bound, why = WIDER.get((name, nbytes), (LIMIT, ""))
        failed += abs(ratio - 1) > bound
        tag = name.replace(" ", "_").replace(",", "").replace("/", "")
        print(f"ratio model {tag}_{coll} {nbytes} measured_us={m:.0f} model_us={p:.0f} model/measured={ratio:.2f}")
        if why:
            print(f"# {name} at {nbytes} bytes: held to +-{bound:.0%}: {why}")
    print(f"model_vs_measured: {within} of {len(CASES)} within +-{LIMIT:.0%}" +
          (f"; {failed} outside their bounds" if failed else "; every case within its bound"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
