"""Compares train_gpt.py runs against a reference run, step by step.

    python3 compare.py --ref a=a.csv --run b=b.csv --run c=c.csv [--tol 1e-3]
                       [--ratio b/c] [--csv losses.csv] [--png losses.png]

Fails (exit 1) when any run's loss differs from the reference's by more than
--tol relative at any step, or has a different number of steps. --ratio X/Y
prints the median step time of run X over run Y (steps after the first 20%).
--csv writes the merged losses and step times; --png plots the losses (needs
matplotlib).
"""
import argparse
import csv
import sys


def load(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [(int(r["step"]), float(r["loss"]), float(r["step_seconds"])) for r in rows]


def median_step(rows):
    steady = sorted(s for _, _, s in rows[len(rows) // 5:])
    return steady[len(steady) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", required=True, help="NAME=CSV of the reference run")
    ap.add_argument("--run", action="append", default=[], help="NAME=CSV of a run to check (repeatable)")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--ratio", action="append", default=[], help="X/Y: median step time of X over Y")
    ap.add_argument("--csv")
    ap.add_argument("--png")
    ap.add_argument("--title", default="train_gpt.py loss")
    args = ap.parse_args()
    runs = {}
    for spec in [args.ref] + args.run:
        name, _, path = spec.partition("=")
        runs[name] = load(path)
    ref_name = args.ref.partition("=")[0]
    ref = runs[ref_name]
    ok = True
    for name, rows in runs.items():
        if name == ref_name:
            continue
        if len(rows) != len(ref):
            print(f"{name}: {len(rows)} steps, the reference has {len(ref)}")
            ok = False
            continue
        worst, at = 0.0, 0
        for (s, l, _), (_, lr, _) in zip(rows, ref):
            rel = abs(l - lr) / max(abs(lr), 1e-12)
            if rel > worst:
                worst, at = rel, s
        verdict = "ok" if worst <= args.tol else "FAILED"
        ok &= worst <= args.tol
        print(f"{name} vs {ref_name}: largest relative loss difference {worst:.3g} at step {at} "
              f"(tolerance {args.tol:g}): {verdict}")
    for name, rows in runs.items():
        print(f"{name}: loss {rows[0][1]:.4f} -> {rows[-1][1]:.4f}, median step {1e3 * median_step(rows):.2f} ms")
    for spec in args.ratio:
        x, _, y = spec.partition("/")
        print(f"step-time ratio {x}/{y}: {median_step(runs[x]) / median_step(runs[y]):.3f} "
              f"({1e3 * median_step(runs[x]):.2f} ms / {1e3 * median_step(runs[y]):.2f} ms)")
    names = list(runs)
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("step," + ",".join(f"loss_{n}" for n in names) + "," +
                    ",".join(f"step_seconds_{n}" for n in names) + "\n")
            for i in range(len(ref)):
                f.write(f"{ref[i][0]}," + ",".join(f"{runs[n][i][1]:.9g}" if i < len(runs[n]) else "" for n in names)
                        + "," + ",".join(f"{runs[n][i][2]:.6f}" if i < len(runs[n]) else "" for n in names) + "\n")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
        for n in names:
            ax1.plot([r[0] for r in runs[n]], [r[1] for r in runs[n]], label=n, linewidth=1)
            if n != ref_name:
                ax2.plot([r[0] for r in runs[n]],
                         [abs(a[1] - b[1]) / abs(b[1]) for a, b in zip(runs[n], ref)], label=f"{n} vs {ref_name}",
                         linewidth=1)
        ax1.set_xlabel("step")
        ax1.set_ylabel("loss")
        ax1.set_title(args.title)
        ax1.legend(fontsize=7)
        ax2.axhline(args.tol, color="red", linestyle="--", label="tolerance")
        ax2.set_yscale("log")
        ax2.set_xlabel("step")
        ax2.set_ylabel("relative difference")
        ax2.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.png, dpi=110)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
