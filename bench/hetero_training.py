"""Does a mixed job train faster than its fastest part? The same training
(tests/train/train_gpt.py's GPT, DDP, AdamW, fp32 with TF32 off, the same
seeded data and global batch) run as (a) each part alone, one process on the
whole global batch; (b) all parts together, an equal split; (c) all parts
together, balanced by hetccl_torch.balance. Layouts:

  mps       two processes on GPU 0 under CUDA MPS, each limited by
            CUDA_MPS_ACTIVE_THREAD_PERCENTAGE (--mps-percent, default 75,25:
            a fast and a slow GPU), groups g0 and g1; torch's nccl backend on
            hetccl's drop-in libnccl.so.2 (--backend nccl) or the native
            backend (--backend hetccl). A model large enough to be
            compute-bound (about 117M parameters; --dim, --layers, ...).
  cuda-cpu  a CUDA rank and a CPU rank (--threads), hetccl's native backend:
            docs/training's layout and its 3.3M parameter model.
  cpu       host ranks, each slowed by a per-sample sleep in its forward
            (--delays): a stand-in that runs anywhere, not a GPU figure.

    python3 bench/hetero_training.py --layout mps --build build-gpu [--prepare]
    python3 bench/hetero_training.py --layout cuda-cpu --build build-gpu
    python3 bench/hetero_training.py --layout cpu --pysite build/pysite

--prepare builds what a layout needs where it is missing (libhetccl and the
drop-in with CMake into --build, hetccl_torch into BUILD/pysite). Prints, as
make_performance.py reads them:

  ratio hetero_training_runs LABEL alone PART samples_per_s=.. tokens_per_s=.. step_ms=..
  ratio hetero_training_runs LABEL mixed_equal samples_per_s=.. ...
  ratio hetero_training_runs LABEL mixed_balanced samples_per_s=.. ... shares=.. nosync_step_ms=..
  ratio hetero_training LABEL summary balanced/sum=.. balanced/fastest=.. equal/fastest=.. sync/nosync=..
        plan_cost_1000=.. loss_diff=.. equal_loss_diff=.. predicted/measured=..

where LABEL is LAYOUT-BACKEND-bBATCH (mps-nccl-b96), and one `target` line
per goal, met or not (the exit status is 0 either way
unless a run failed).
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import traceback
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "train"))
sys.path.insert(0, os.path.join(ROOT, "tests", "pyutil"))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from gpu_jobs import Mps  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from spawn_ranks import collect  # noqa: E402
from train_gpt import GPT, make_tokens  # noqa: E402

LAYOUTS = {  # model and batch of each layout (overridable)
    "mps": dict(dim=1024, layers=8, heads=16, seq=256, vocab=8192, batch=96),
    "cuda-cpu": dict(dim=256, layers=4, heads=4, seq=64, vocab=256, batch=32),
    "cpu": dict(dim=32, layers=1, heads=2, seq=16, vocab=64, batch=32),
}


class Slow(nn.Module):
    """The model, slowed by `delay` seconds a sample in its forward (the cpu layout's stand-in)."""

    def __init__(self, inner, delay):
        super().__init__()
        self.inner, self.delay = inner, delay

    def forward(self, x):
        if self.delay:
            time.sleep(self.delay * x.shape[0])
        return self.inner(x)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def slowest(value, dev):
    t = torch.tensor([value], dtype=torch.float64, device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def worker(rank, cfg, port, q):
    try:
        part = cfg["parts"][rank]
        world = len(cfg["parts"])
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), HETCCL_DEVICE=part["device"],
                          HETCCL_GROUP=part["group"], NCCL_NVLS_ENABLE="0")
        if part.get("mps_percent"):  # read when this process's CUDA context is made, so before any CUDA call
            os.environ["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(part["mps_percent"])
        cuda = part["device"] == "cuda"
        if cuda:
            torch.cuda.set_device(0)
            torch.backends.cuda.matmul.allow_tf32 = cfg["tf32"]
            torch.backends.cudnn.allow_tf32 = cfg["tf32"]
        dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
        torch.set_num_threads(part["threads"])
        m = cfg["model"]
        if world > 1:
            import hetccl_torch  # noqa: F401  the hetccl backend, and balance
            dist.init_process_group(cfg["backend"], rank=rank, world_size=world, timeout=timedelta(seconds=300))
        from hetccl_torch import balance
        steps = cfg["warmup"] + cfg["steps"]
        data = make_tokens(min(steps, 16), m["batch"], m["seq"], m["vocab"], seed=1234)
        torch.manual_seed(0)
        inner = GPT(m["vocab"], m["seq"], m["dim"], m["layers"], m["heads"]).to(dev)
        params = sum(p.numel() for p in inner.parameters())
        model = Slow(inner, part.get("delay", 0.0))
        net = nn.parallel.DistributedDataParallel(model, device_ids=[0] if cuda else None) if world > 1 else model

        def loss_of(batch):
            batch = batch.to(dev)
            logits = net(batch[:, :-1])
            return F.cross_entropy(logits.reshape(-1, m["vocab"]), batch[:, 1:].reshape(-1))

        plan, plan_s = None, 0.0
        if cfg["split"] == "balanced":
            t0 = time.perf_counter()
            plan = balance.plan(net, lambda n: loss_of(data[0, :n]).backward(), m["batch"],
                                replan_every=cfg["replan_every"], log=print if rank == 0 else None)
            plan_s = time.perf_counter() - t0
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=0.01)
        per = m["batch"] // world
        losses, times = [], []
        for step in range(steps):
            if step == cfg["warmup"]:
                if cuda:
                    torch.cuda.synchronize()
                if world > 1:
                    dist.barrier()
                start = time.perf_counter()
            t0 = time.perf_counter()
            batch = data[step % len(data)]
            if plan is not None:
                batch = plan.cut(batch)
            elif world > 1:
                batch = batch[rank * per:(rank + 1) * per]
            loss = loss_of(batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if plan is not None:
                losses.append(plan.mean(loss))
            elif world > 1:
                t = loss.detach().reshape(1)
                dist.all_reduce(t)
                losses.append(t.item() / world)
            else:
                losses.append(loss.item())
            times.append(time.perf_counter() - t0)
        wall = time.perf_counter() - start
        nosync = None
        if world > 1 and cfg["nosync_steps"]:  # the same split with the gradient exchange left out
            batch = data[0][plan.offset:plan.offset + plan.share] if plan is not None else data[0][:per]
            nts = []
            for _ in range(cfg["nosync_steps"]):
                t0 = time.perf_counter()
                with net.no_sync():
                    loss = loss_of(batch)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                opt.step()
                loss.item()
                nts.append(time.perf_counter() - t0)
            nosync = statistics.median(nts)
            nosync = slowest(nosync, dev if cfg["backend"] == "nccl" else torch.device("cpu"))
        if world > 1:
            wall = slowest(wall, dev if cfg["backend"] == "nccl" else torch.device("cpu"))
        out = dict(wall=wall, losses=losses, step=statistics.median(times[cfg["warmup"]:]), params=params,
                   nosync=nosync, plan_s=plan_s, shares=plan.shares if plan else None,
                   predicted=plan.numbers.get("step_s") if plan else None,
                   costs_more=plan.numbers.get("costs_more") if plan else None,
                   without=plan.numbers.get("without") if plan else None)
        if world > 1:
            dist.barrier()
            dist.destroy_process_group()
        q.put((rank, "ok", out))
    except Exception as e:  # report to the parent, never hang it
        q.put((rank, f"FAILED: {type(e).__name__}: {e}\n{traceback.format_exc()}", None))


def run(cfg, parts, split, env):
    cfg = dict(cfg, parts=parts, split=split)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    saved = dict(os.environ)
    os.environ.update(env)  # the spawned interpreters start with it (LD_PRELOAD before anything loads)
    try:
        port = free_port()
        procs = [ctx.Process(target=worker, args=(r, cfg, port, q)) for r in range(len(parts))]
        for p in procs:
            p.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    results = collect(procs, q, cfg["deadline"])
    bad = [r for r in results if r[1] != "ok"]
    if bad or len(results) != len(parts):
        for r in bad:
            print(f"rank {r[0]}: {r[1]}", file=sys.stderr)
        raise SystemExit(f"hetero_training: the {split} run on {[p['group'] for p in parts]} failed")
    return next(r[2] for r in results if r[0] == 0)


def prepare(a, need_dropin):
    """Builds libhetccl (and the drop-in) into --build and hetccl_torch into BUILD/pysite where missing."""
    if not os.path.exists(os.path.join(a.build, "libhetccl.so")) or (need_dropin and not os.path.exists(a.dropin)):
        fresh = [] if os.path.exists(os.path.join(a.build, "CMakeCache.txt")) else [
            "-DCMAKE_BUILD_TYPE=Release", "-DHETCCL_BUILD_TESTS=OFF"]  # a configured tree keeps its settings
        subprocess.check_call(["cmake", "-S", ROOT, "-B", a.build] + fresh)
        subprocess.check_call(["cmake", "--build", a.build, "-j", str(os.cpu_count() or 2), "--target", "hetccl"] +
                              (["nccl_dropin"] if need_dropin else []))
    if not os.path.isdir(os.path.join(a.pysite, "hetccl_torch", "balance")):
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                               "--no-cache-dir", "--upgrade", "--target", a.pysite, os.path.join(ROOT, "python")],
                              env={**os.environ, "HETCCL_HOME": a.build})


def line(layout, what, r, batch, seq):
    sps = batch * r["steps"] / r["wall"]
    return sps, (f"ratio hetero_training_runs {layout} {what} samples_per_s={sps:.2f} tokens_per_s={sps * seq:.0f} "
                 f"step_ms={1e3 * r['step']:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layout", required=True, choices=sorted(LAYOUTS))
    ap.add_argument("--backend", help="mps: nccl (drop-in, default) or hetccl; cuda-cpu: hetccl; cpu: hetccl or gloo")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--pysite", help="where hetccl_torch is installed (default BUILD/pysite)")
    ap.add_argument("--dropin", help="the drop-in (default BUILD/dropin/libnccl.so.2)")
    ap.add_argument("--prepare", action="store_true", help="build what is missing first")
    ap.add_argument("--mps-percent", default="75,25")
    ap.add_argument("--threads", type=int, default=12, help="cuda-cpu: the CPU rank's torch threads")
    ap.add_argument("--delays", default="0.002,0.006", help="cpu: seconds a sample each rank's forward sleeps")
    ap.add_argument("--steps", type=int, default=20, help="timed steps a run")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--nosync-steps", type=int, default=5)
    ap.add_argument("--replan-every", type=int, default=0)
    ap.add_argument("--tf32", action="store_true", help="allow TF32 (off by default: the loss check needs fp32)")
    ap.add_argument("--deadline", type=int, default=540, help="seconds a run may take")
    for k in ("dim", "layers", "heads", "seq", "vocab", "batch"):
        ap.add_argument(f"--{k}", type=int)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    a.pysite = os.path.abspath(a.pysite or os.path.join(a.build, "pysite"))
    a.dropin = os.path.realpath(a.dropin or os.path.join(a.build, "dropin", "libnccl.so.2"))
    model = {k: getattr(a, k) or v for k, v in LAYOUTS[a.layout].items()}
    backend = a.backend or {"mps": "nccl", "cuda-cpu": "hetccl", "cpu": "hetccl"}[a.layout]
    if a.prepare:
        prepare(a, backend == "nccl")
    if not os.path.isdir(os.path.join(a.pysite, "hetccl_torch", "balance")):
        raise SystemExit(f"no hetccl_torch with balance in {a.pysite} (pass --pysite, or --prepare)")
    env = {"PYTHONPATH": a.pysite + os.pathsep + os.environ.get("PYTHONPATH", ""), "NCCL_NVLS_ENABLE": "0"}
    sys.path.insert(0, a.pysite)
    if backend == "nccl":
        if not os.path.exists(a.dropin):
            raise SystemExit(f"no drop-in at {a.dropin} (build it, pass --dropin, or --prepare)")
        env["LD_PRELOAD"] = a.dropin
    if a.layout == "mps":
        parts = [dict(device="cuda", group=f"g{i}", mps_percent=int(p), threads=4)
                 for i, p in enumerate(a.mps_percent.split(","))]
    elif a.layout == "cuda-cpu":
        parts = [dict(device="cuda", group="cuda", threads=4), dict(device="host", group="host", threads=a.threads)]
    else:
        parts = [dict(device="host", group=f"h{i}", delay=float(d), threads=1)
                 for i, d in enumerate(a.delays.split(","))]
    cfg = dict(backend=backend, model=model, steps=a.steps, warmup=a.warmup, nosync_steps=a.nosync_steps,
               replan_every=a.replan_every, tf32=a.tf32, deadline=a.deadline)
    batch, seq = model["batch"], model["seq"]
    label = f"{a.layout}-{backend}-b{batch}"  # the records' row names: one record may hold several runs
    mps = Mps("hetero") if a.layout == "mps" else None
    if mps:
        mps.__enter__()
        env.update(mps.env)
    try:
        alone = []
        for p in parts:
            r = dict(run(cfg, [p], "alone", env), steps=a.steps)
            sps, text = line(label, f"alone {p['group']}", r, batch, seq)
            print(text, flush=True)
            alone.append((p["group"], sps, r))
        eq = dict(run(cfg, parts, "equal", env), steps=a.steps)
        eq_sps, text = line(label, "mixed_equal", eq, batch, seq)
        print(text + f" nosync_step_ms={1e3 * eq['nosync']:.2f}", flush=True)
        bal = dict(run(cfg, parts, "balanced", env), steps=a.steps)
        bal_sps, text = line(label, "mixed_balanced", bal, batch, seq)
        print(text + f" nosync_step_ms={1e3 * bal['nosync']:.2f} shares={','.join(map(str, bal['shares']))} "
              f"plan_s={bal['plan_s']:.2f} predicted_step_ms={1e3 * bal['predicted']:.2f}", flush=True)
    finally:
        if mps:
            mps.__exit__()
    fastest = max(alone, key=lambda x: x[1])
    ref = fastest[2]["losses"]

    def diff(losses):
        return max(abs(x - y) / abs(y) for x, y in zip(losses, ref))

    s = dict(sum=bal_sps / sum(x[1] for x in alone), fastest=bal_sps / fastest[1], equal_fastest=eq_sps / fastest[1],
             sync=bal["step"] / bal["nosync"], cost=bal["plan_s"] / (1000 * bal["step"]), loss=diff(bal["losses"]),
             eq_loss=diff(eq["losses"]), predicted=bal["predicted"] / bal["step"])
    print(f"ratio hetero_training {label} summary balanced/sum={s['sum']:.3f} balanced/fastest={s['fastest']:.3f} "
          f"equal/fastest={s['equal_fastest']:.3f} balanced/equal={bal_sps / eq_sps:.3f} sync/nosync={s['sync']:.3f} "
          f"plan_cost_1000={s['cost']:.4f} loss_diff={s['loss']:.3g} equal_loss_diff={s['eq_loss']:.3g} "
          f"predicted/measured={s['predicted']:.3f}", flush=True)
    print(f"hetero_training: {a.layout}, {backend} backend, GPT of {bal['params'] / 1e6:.3g}M parameters (dim "
          f"{model['dim']}, {model['layers']} layers, seq {seq}, vocab {model['vocab']}), global batch {batch}, "
          f"{a.steps} timed steps after {a.warmup}; parts {[p['group'] for p in parts]}; loss reference: "
          f"{fastest[0]} alone" + (" (a CPU stand-in: not a GPU figure)" if a.layout == "cpu" else ""))
    goals = [("balanced/sum >= 0.9", s["sum"] >= 0.9), ("balanced/fastest >= 1.2", s["fastest"] >= 1.2),
             ("sync/nosync <= 1.05", s["sync"] <= 1.05), ("loss_diff <= 1e-3 (compare.py's tolerance)",
                                                          s["loss"] <= 1e-3),
             ("plan_cost_1000 <= 0.02", s["cost"] <= 0.02)]
    if a.layout == "cuda-cpu":
        told = "host" in (bal["costs_more"] or [])
        alone_ms, mixed_ms = 1e3 * fastest[2]["step"], 1e3 * bal["step"]
        without = (bal["without"] or {}).get("host")
        right = told == (alone_ms < mixed_ms)
        verdict = "right" if right else "WRONG"
        goals[0:2] = [(f"balanced/fastest >= 0.9, or the report says the CPU rank costs more: it says so: {told} "
                       f"(predicted: {1e3 * bal['predicted']:.2f} ms a step with it, "
                       f"{'?' if without is None else f'{1e3 * without:.2f}'} ms without); measured: {mixed_ms:.2f} "
                       f"ms with it, {alone_ms:.2f} ms the CUDA rank alone: the report is {verdict}",
                       s["fastest"] >= 0.9 or (told and right))]
    for what, ok in goals:
        print(f"target {label} {what}: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
