"""Report for bench/allreduce_vs_peers.sh: reads the JSON of hetccl-perf (one
file per size), bench/mpi_allreduce.c and bench/gloo_allreduce.py, prints a
table, one ratio line per size and a latency line for the smallest size, and
writes PREFIX.json and PREFIX.csv."""
import argparse
import csv
import json
import sys

PEERS = ("hetccl", "openmpi", "gloo")


def fail(msg):
    sys.exit(f"allreduce_report: error: {msg}")


def load_rows(paths, peer, nranks):
    """bytes -> {"time_us", "busbw", "wrong"} from the given JSON files."""
    rows = {}
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"{peer}: cannot read {path}: {e}")
        op = str(doc.get("op", "")).lower().replace("_", "")
        if op != "allreduce":
            fail(f"{peer}: {path} is op '{doc.get('op')}', not allreduce")
        if int(doc.get("nranks", -1)) != nranks:
            fail(f"{peer}: {path} ran {doc.get('nranks')} ranks, not {nranks}")
        if str(doc.get("dtype", "")).lower() not in ("float", "float32", "f32"):
            print(f"# warning: {peer}: {path} dtype is '{doc.get('dtype')}'", file=sys.stderr)
        for row in doc.get("rows", []):
            # Out-of-place where there is one; torch's all_reduce is in-place only.
            res = row.get("oop") or row.get("ip")
            if res is None:
                fail(f"{peer}: {path}: row without oop/ip results: {row}")
            rows[int(row["bytes"])] = {"time_us": float(res["time_us"]),
                                      "busbw": float(res["busbw"]),
                                      "wrong": res.get("wrong", 0)}
    return rows


def ratio(a, b):
    return a / b if b > 0 else float("nan")


def fmt_ratio(x):
    return "n/a" if x != x else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", required=True, help="space-separated byte sizes")
    ap.add_argument("--out", required=True, help="output prefix (.json and .csv are added)")
    ap.add_argument("--meta", nargs="*", default=[], help="KEY=VALUE pairs stored in the JSON")
    ap.add_argument("--hetccl", nargs="+", required=True)
    ap.add_argument("--openmpi", nargs="+", required=True)
    ap.add_argument("--gloo", nargs="+", required=True)
    args = ap.parse_args()

    meta = dict(kv.split("=", 1) for kv in args.meta)
    nranks = int(meta.get("np", 4))
    sizes = [int(s) for s in args.sizes.split()]
    data = {p: load_rows(getattr(args, p), p, nranks) for p in PEERS}
    for p in PEERS:
        missing = [s for s in sizes if s not in data[p]]
        if missing:
            fail(f"{p}: no result for sizes {missing} (has {sorted(data[p])})")

    table = []
    for s in sizes:
        r = {"bytes": s}
        for p in PEERS:
            r[f"{p}_time_us"] = data[p][s]["time_us"]
            r[f"{p}_busbw"] = data[p][s]["busbw"]
            r[f"{p}_wrong"] = data[p][s]["wrong"]
        r["hetccl/openmpi"] = ratio(r["hetccl_busbw"], r["openmpi_busbw"])
        r["hetccl/gloo"] = ratio(r["hetccl_busbw"], r["gloo_busbw"])
        table.append(r)

    # What hetccl-perf says it ran on (transport, groups), kept with the results.
    with open(args.hetccl[0]) as f:
        first = json.load(f)
    for key in ("transport", "groups", "group_sizes"):
        if key in first:
            meta[f"hetccl_{key}"] = first[key]
    print(f"# allreduce float32 sum, {nranks} ranks; busbw in GB/s (1e9), time in us per call, "
          "slowest rank; hetccl transport "
          f"{meta.get('hetccl_transport', '?')}, groups {meta.get('hetccl_groups', '?')}")
    head = f"{'bytes':>10} |" + "|".join(f"{p + ' time_us':>16} {p + ' busbw':>14} " for p in PEERS)
    print(head)
    for r in table:
        print(f"{r['bytes']:>10} |" + "|".join(
            f"{r[p + '_time_us']:>16.2f} {r[p + '_busbw']:>14.4f} " for p in PEERS))
    for r in table:
        bad = [f"{p}={r[p + '_wrong']}" for p in PEERS if r[p + "_wrong"] not in (0, None)]
        if bad:
            print(f"# warning: wrong results at {r['bytes']} bytes: {' '.join(bad)}")
    print()
    for r in table:
        print(f"ratio allreduce {r['bytes']} hetccl/openmpi={fmt_ratio(r['hetccl/openmpi'])} "
              f"hetccl/gloo={fmt_ratio(r['hetccl/gloo'])}")
    small = table[0]
    print(f"latency allreduce {small['bytes']} hetccl_us={small['hetccl_time_us']:.2f} "
          f"openmpi_us={small['openmpi_time_us']:.2f} gloo_us={small['gloo_time_us']:.2f}")

    with open(args.out + ".json", "w") as f:
        json.dump({"op": "allreduce", "dtype": "float32", "nranks": nranks, "meta": meta,
                   "rows": [{k: (None if isinstance(v, float) and v != v else v)
                             for k, v in r.items()} for r in table]}, f, indent=1)
        f.write("\n")
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    print(f"# written: {args.out}.json {args.out}.csv")


if __name__ == "__main__":
    main()
