#!/usr/bin/env python3
"""The cost model (hetccl-plan) on clusters of 16 to 10,000 GPUs of two
vendors: half the hosts NVIDIA, half AMD, 8 GPUs and 8 x 400 Gb/s NICs a
host, NVLink 450 GB/s / xGMI 350 GB/s inside a host, PCIe 5 (50 GB/s each
way) between a GPU and host memory; all on one site, or the NVIDIA hosts on
one site and the AMD hosts on another, 400 Gb/s and 1 ms between them.
AllReduce of 64 MiB and 1 GiB: hetccl's plan (each vendor's library inside
its group, only the border share between the groups) against one flat ring
over every GPU in host memory, and the border's share of hetccl's time.

  /usr/bin/python3 bench/model_scaling.py [BUILD] [--png docs/perf/model-scaling.png]

  ratio model_scaling <bytes> layout=.. gpus=.. hosts=.. hetccl_us=.. flat_ring_us=.. ring/hetccl=.. border_share=..
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

GPUS = [16, 64, 256, 1024, 4096, 10000]
SIZES = [64 << 20, 1 << 30]

CLUSTER = """vendors:
  nvidia: {{intra_gbps: 3600, intra_latency_us: 3, host_gbps: 400, host_latency_us: 5}}
  amd: {{intra_gbps: 2800, intra_latency_us: 4, host_gbps: 400, host_latency_us: 5}}
wan: {{gbps: 400, latency_us: 1000}}
hosts:
  - {{name: nv, count: {nv}, site: a, ranks: {{nvidia: 8}}, nic_gbps: 400, nics: 8, nic_latency_us: 5}}
  - {{name: mi, count: {mi}, site: {site}, ranks: {{amd: 8}}, nic_gbps: 400, nics: 8, nic_latency_us: 5}}
"""
LAYOUTS = [("one-site", "a"), ("two-sites", "b")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--png", default="")
    a = ap.parse_args()
    plan = os.path.join(a.build, "tools", "hetccl-plan")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for (layout, site), gpus in [(l, g) for l in LAYOUTS for g in GPUS]:
            hosts = gpus // 8
            path = os.path.join(d, f"{layout}{gpus}.yaml")
            with open(path, "w") as f:
                f.write(CLUSTER.format(nv=hosts // 2, mi=hosts - hosts // 2, site=site))
            out = os.path.join(d, f"{layout}{gpus}.json")
            subprocess.run([plan, path, "--json", out, "--colls", "allreduce", "--sizes",
                            ",".join(str(s) for s in SIZES)], check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                got = json.load(f)
            if got["ranks"] != gpus:
                sys.exit(f"model_scaling: {gpus} GPUs asked, the model has {got['ranks']}")
            for r in got["rows"]:
                share = r["border_us"] / r["us"] if r["us"] else 0
                rows.append((r["bytes"], gpus, hosts, r["us"], r["flat_ring_us"], share, layout))
    for b, gpus, hosts, us, ring, share, layout in rows:
        print(f"ratio model_scaling {b} layout={layout} gpus={gpus} hosts={hosts} hetccl_us={us:.0f} "
              f"flat_ring_us={ring:.0f} ring/hetccl={ring / us:.2f} border_share={share:.3f}")
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7.5, 5))
        b = SIZES[-1]
        for (layout, _), style in zip(LAYOUTS, ("o", "s")):
            pts = [r for r in rows if r[0] == b and r[6] == layout]
            ax.plot([r[1] for r in pts], [r[3] / 1e3 for r in pts], "-" + style, label=f"hetccl, {layout}")
            ax.plot([r[1] for r in pts], [r[4] / 1e3 for r in pts], "--" + style, label=f"flat ring, {layout}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("GPUs (half NVIDIA, half AMD; 8 a host, 8 x 400 Gb/s NICs)")
        ax.set_ylabel(f"AllReduce {b >> 30} GiB, ms (model)")
        ax.set_title("hetccl-plan: hetccl's plan against one flat ring")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)
        print(f"# wrote {a.png}")


if __name__ == "__main__":
    main()
