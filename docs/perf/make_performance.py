"""docs/performance.md, docs/performance-cpu.md and docs/performance-costs.md from the benchmarks' results in docs/perf/data/*.json.

  make_performance.py add --name N --title T --machine M --command C [--date D]
                          [--text T] [--columns a,b] [--plot NAME:Y1,Y2] [--order N] SOURCE
      stores one run: SOURCE is a benchmark's output (its "ratio ..." lines,
      as bench/gpu_two_groups.sh, bench/torch_two_groups.py and
      bench/allreduce_vs_peers.sh print them) or the JSON that
      bench/allreduce_report.py writes; the record goes to
      docs/perf/data/N.json (its plot to docs/perf/N.png).
  make_performance.py build   writes docs/performance.md (the GPU machines'
                              records), docs/performance-cpu.md (the
                              others) and docs/performance-costs.md (the
                              records whose "page" is "costs": encrypted
                              links, the flight recorder), and one PNG plot
                              per record that asks for one (needs matplotlib)
  make_performance.py check   exits 1 when a page is not what
                              build would write, or a plot it links is missing

Each record is one run of one command on one machine: its rows are the
numbers that command printed, nothing computed here but the layout. Runs
kept from before the records existed are prose in docs/perf/earlier.md,
which both pages link.
"""
import argparse
import datetime
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
DOCS = os.path.dirname(HERE)
# Two pages, each under the docs' length limit: the records of the GPU
# machines (the machine names an H100 or H200) and the rest (the CPU
# machines, the cost model). Runs kept from before the records existed are
# prose in perf/earlier.md, linked from both.
PAGES = (("gpu", "performance.md", "Performance: GPU machines"),
         ("cpu", "performance-cpu.md", "Performance: CPU machines and the model"),
         ("costs", "performance-costs.md", "Performance: what encrypted links and the flight recorder cost"))

ABOUT = """Every table below is one run of the command named above it, on the machine
named there, as that command printed it; made by `make perf-doc`
(docs/perf/make_performance.py) from the records in docs/perf/data. The
machines are shared and noisy: each benchmark prints ratios against a peer
or a bound measured in the same run, and those ratios are what to compare.
To add a run: `python3 docs/perf/make_performance.py add --title ... SOURCE`,
then `make perf-doc`.
"""


def page_of(rec):
    """A record's page: its own "page" key (a topic's page), else by its machine."""
    if rec.get("page"):
        return rec["page"]
    return "gpu" if re.search(r"H100|H200", rec["machine"]) else "cpu"


def fail(msg):
    sys.exit(f"make_performance: error: {msg}")


def number(text):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def parse_ratio_lines(text):
    """Rows from "ratio NAME [LABEL...] [BYTES] key=value ..." lines."""
    rows = []
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] != "ratio":
            continue
        row, labels = {}, []
        for w in words[1:]:
            if "=" in w:
                k, v = w.split("=", 1)
                row[k] = number(v)
            elif re.fullmatch(r"\d+", w):
                row["bytes"] = int(w)
            else:
                labels.append(w)
        row = {"name": " ".join(labels), **row}
        rows.append(row)
    return rows


def load_records():
    records = []
    for name in sorted(os.listdir(DATA)):
        if not name.endswith(".json"):
            continue
        path = os.path.join(DATA, name)
        with open(path) as f:
            try:
                rec = json.load(f)
            except ValueError as e:
                fail(f"{path}: {e}")
        for key in ("title", "machine", "command", "date", "rows"):
            if key not in rec:
                fail(f"{path}: no '{key}'")
        rec["_file"] = name[:-5]
        records.append(rec)
    records.sort(key=lambda r: (r.get("order", 100), r["_file"]))
    return records


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 100 else f"{v:.1f}"
    return str(v)


def size(b):
    for unit, n in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def table(rec):
    rows = rec["rows"]
    cols = rec.get("columns")
    if not cols:
        cols = []
        for r in rows:
            for k in r:
                if k not in cols:
                    cols.append(k)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [size(r[c]) if c == "bytes" and isinstance(r.get(c), int) else fmt(r.get(c)) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_spec(rec):
    spec = rec.get("plot")
    if not spec:
        return None
    name, ys = spec.split(":", 1)
    return name, ys.split(",")


def render(records, page):
    """The page `page` ("gpu" or "cpu") of docs/, from its records."""
    titles = {key: (name, title) for key, name, title in PAGES}
    name, title = titles[page]
    others = ", ".join(f"[{n}]({n})" for key, n, _ in PAGES if key != page)
    out = [f"# {title}\n", f"The other pages: {others}; runs kept from before the records existed: "
           "[perf/earlier.md](perf/earlier.md).\n", ABOUT]
    for rec in records:
        if page_of(rec) != page:
            continue
        out.append(f"## {rec['title']}\n")
        out.append(f"{rec['machine']}, {rec['date']}: `{rec['command']}`\n")
        if rec.get("text"):
            out.append(rec["text"].strip() + "\n")
        out.append(table(rec) + "\n")
        if plot_spec(rec):
            out.append(f"![{rec['title']}](perf/{rec['_file']}.png)\n")
    return "\n".join(out)


def draw(rec):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    name, ys = plot_spec(rec)
    rows = [r for r in rec["rows"] if r.get("name") == name and "bytes" in r]
    if not rows:  # rows without sizes (one per setting or layout): bars, one group a row
        return draw_bars(rec, name, ys, plt)
    if len(rows) < 2:
        fail(f"{rec['_file']}: plot of '{name}' has {len(rows)} points")
    rows.sort(key=lambda r: r["bytes"])
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    for y in ys:
        ax.plot([r["bytes"] for r in rows], [r.get(y) for r in rows], marker="o", label=y)
    bounds = {r["bound"] for r in rows if isinstance(r.get("bound"), (int, float))}
    if len(bounds) == 1:
        ax.axhline(bounds.pop(), linestyle="--", color="gray", label="bound")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes")
    ax.set_ylabel(", ".join(ys))
    ax.set_title(f"{name} ({rec['date']}: {rec['command']})", fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, rec["_file"] + ".png"), metadata={"Software": None})
    plt.close(fig)


def draw_bars(rec, prefix, ys, plt):
    """Rows whose name starts with `prefix` and that have no size: a group of
    bars a row (its name less the prefix), one bar a value, a line at 1."""
    rows = [r for r in rec["rows"] if str(r.get("name", "")).startswith(prefix) and "bytes" not in r]
    if len(rows) < 2:
        fail(f"{rec['_file']}: plot of '{prefix}' has {len(rows)} rows")
    fig, ax = plt.subplots(figsize=(6.4, 3.6), dpi=100)
    width = 0.8 / len(ys)
    for i, y in enumerate(ys):
        ax.bar([k + i * width for k in range(len(rows))], [r.get(y) or 0 for r in rows], width, label=y)
    ax.set_xticks([k + width * (len(ys) - 1) / 2 for k in range(len(rows))])
    ax.set_xticklabels([str(r["name"])[len(prefix):].strip() for r in rows], fontsize=7)
    ax.axhline(1.0, linestyle="--", color="gray")
    ax.set_ylabel(", ".join(ys))
    ax.set_title(f"{prefix} ({rec['date']}: {rec['command']})", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(HERE, rec["_file"] + ".png"), metadata={"Software": None})
    plt.close(fig)


def cmd_add(args):
    with open(args.source) as f:
        text = f.read()
    try:
        doc = json.loads(text)
        rows = doc["rows"]
    except (ValueError, KeyError, TypeError):
        rows = parse_ratio_lines(text)
    if not rows:
        fail(f"{args.source}: no 'ratio' lines and no JSON rows")
    rec = {"title": args.title, "machine": args.machine, "command": args.command,
           "date": args.date or datetime.date.today().isoformat(), "rows": rows}
    for key in ("text", "order"):
        if getattr(args, key) is not None:
            rec[key] = getattr(args, key)
    if args.columns:
        rec["columns"] = args.columns.split(",")
    if args.plot:
        rec["plot"] = args.plot
    os.makedirs(DATA, exist_ok=True)
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", args.name):
        fail(f"--name '{args.name}': lower-case letters, digits and '-' only")
    path = os.path.join(DATA, args.name + ".json")
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
        f.write("\n")
    print(f"make_performance: wrote {path} ({len(rows)} rows)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    add = sub.add_parser("add")
    for k in ("name", "title", "machine", "command"):
        add.add_argument("--" + k, required=True)
    add.add_argument("--date")
    add.add_argument("--text")
    add.add_argument("--columns")
    add.add_argument("--plot", help="NAME:Y1,Y2 (rows of that name, those values against bytes; rows without "
                     "bytes whose name starts with NAME: bars, a group a row)")
    add.add_argument("--order", type=int)
    add.add_argument("source")
    sub.add_parser("build")
    sub.add_parser("check")
    args = ap.parse_args()
    if args.cmd == "add":
        return cmd_add(args)
    records = load_records()
    pages = {name: render(records, key) for key, name, _ in PAGES}
    if args.cmd == "build":
        for rec in records:
            if plot_spec(rec):
                draw(rec)
        for name, text in pages.items():
            with open(os.path.join(DOCS, name), "w") as f:
                f.write(text)
        print(f"make_performance: wrote {', '.join(pages)} from {len(records)} records")
        return
    for name, text in pages.items():
        path = os.path.join(DOCS, name)
        if not os.path.exists(path) or open(path).read() != text:
            fail(f"docs/{name} is not what docs/perf/data makes: run `make perf-doc`")
    for rec in records:
        if plot_spec(rec) and not os.path.exists(os.path.join(HERE, rec["_file"] + ".png")):
            fail(f"docs/perf/{rec['_file']}.png is missing: run `make perf-doc`")
    print(f"make_performance: {', '.join(pages)} match {len(records)} records")


if __name__ == "__main__":
    main()
