"""The arithmetic of hetccl_torch.balance, in one process: shares, fits, bad
input and the worth-it report, against numbers worked out by hand.

    PYTHONPATH=BUILD/pysite python3 tests/torch/balance_solve.py

Prints "balance_solve: ok" and exits 0 when all passed.
"""
import itertools
import math
import sys

from hetccl_torch.balance import BalanceError, report, solve


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def expect_error(fn, words, what):
    try:
        fn()
    except BalanceError as e:
        check(all(w in str(e) for w in words), f"{what}: {e} lacks {words}")
        return
    raise AssertionError(f"{what}: no error")


def brute_force(global_batch, models, caps):
    """The least makespan over every split (small cases only)."""
    best = math.inf
    for split in itertools.product(*[range(1, c + 1) for c in caps]):
        if sum(split) == global_batch:
            best = min(best, solve.makespan(models, split))
    return best


def main():
    # proportional to speed: 3:1 rates split 64 as 48:16
    check(solve.shares(64, [(0.0, 1 / 3000), (0.0, 1 / 1000)], [64, 64]) == [48, 16], "3:1 rates")
    check(solve.shares(7, [(0.0, 1.0)] * 3, [7] * 3) == [3, 2, 2], "equal speeds: the remainder to the first ranks")
    # every rank at least 1, none above its cap, the sum exact
    s = solve.shares(10, [(0.0, 1.0), (0.0, 1000.0), (0.0, 1000.0)], [10, 10, 10])
    check(s == [8, 1, 1], f"a very slow rank still gets 1: {s}")
    s = solve.shares(10, [(0.0, 1.0), (0.0, 1.0)], [3, 10])
    check(s == [3, 7], f"a cap holds: {s}")
    # a fixed cost per step moves samples to the rank without one
    s = solve.shares(20, [(0.010, 0.001), (0.0, 0.001)], [20, 20])
    check(s == [5, 15], f"fixed cost 10 ms on rank 0: {s}")
    # optimal against brute force on small cases
    cases = [(9, [(0.002, 0.003), (0.0, 0.001), (0.001, 0.002)], [9, 4, 9]),
             (12, [(0.0, 0.005), (0.004, 0.001), (0.0, 0.002)], [12, 12, 3]),
             (6, [(0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (0.0, 7.0)], [6, 6, 6, 6])]
    for batch, models, caps in cases:
        s = solve.shares(batch, models, caps)
        check(sum(s) == batch and all(1 <= b <= c for b, c in zip(s, caps)), f"bounds {s}")
        check(abs(solve.makespan(models, s) - brute_force(batch, models, caps)) < 1e-12, f"optimal {s}")
    # the same numbers, the same plan
    check(solve.shares(1000, [(0.0, 1 / 3.7), (0.1, 1 / 9.1)], [1000, 1000]) ==
          solve.shares(1000, [(0.0, 1 / 3.7), (0.1, 1 / 9.1)], [1000, 1000]), "deterministic")
    # fits: two sizes give the line, one size or a bad line the proportional model
    a, c = solve.fit([(16, 0.010), (48, 0.026)])
    check(abs(a - 0.002) < 1e-12 and abs(c - 0.0005) < 1e-12, f"line through two points: {a}, {c}")
    check(solve.fit([(10, 0.05)]) == (0.0, 0.005), "one point")
    check(solve.fit([(10, 0.05), (11, 0.2)]) == (0.0, 0.2 / 11), "sizes too close: the newest point")
    check(solve.fit([(10, 0.05), (20, 0.04)]) == (0.0, 0.002), "a falling line: the newest point")
    # bad input names the rank and the numbers
    names = ["rank 0 (a, cuda)", "rank 1 (b, host)", "rank 2 (b, host)"]
    expect_error(lambda: solve.check(2, [(0.0, 1.0)] * 3, [9] * 3, names), ["2 samples", "3 ranks"], "small batch")
    expect_error(lambda: solve.check(9, [(0.0, 1.0), (0.0, math.inf), (0.0, 1.0)], [9] * 3, names),
                 ["rank 1 (b, host)", "0 samples/s"], "zero speed")
    expect_error(lambda: solve.check(9, [(0.0, 1.0)] * 3, [2, 3, 0], names), ["rank 2 (b, host)", "0 samples"],
                 "a cap of 0")
    expect_error(lambda: solve.check(9, [(0.0, 1.0)] * 3, [2, 3, 3], names), ["hold 8 samples", "global batch of 9",
                                                                              "rank 0 (a, cuda): 2"], "small caps")
    # the report: a CPU rank 20x slower than a GPU rank, an exchange of 6 ms
    models = [(0.0, 0.001), (0.0, 0.020)]
    plan = solve.shares(32, models, [32, 32])
    text, numbers = report.build(32, models, [32, 32], ["none", "none"], ["gpu", "cpu"], ["cuda", "host"], plan,
                                 {(0, 1): 0.006}, 13 << 20, "hetccl")
    check(plan == [31, 1], f"plan {plan}")
    check(numbers["costs_more"] == ["cpu"] and "group cpu (rank 1) costs more than it gives" in text, text)
    check(abs(numbers["without"]["cpu"] - 0.032) < 1e-12 and abs(numbers["step_s"] - 0.037) < 1e-12, str(numbers))
    # and a rank that pays: two equal GPUs and a cheap exchange
    text, numbers = report.build(32, [(0.0, 0.001)] * 2, [32, 32], ["none"] * 2, ["g0", "g1"], ["cuda"] * 2, [16, 16],
                                 {(0, 1): 0.002}, 13 << 20, "nccl")
    check(numbers["costs_more"] == [] and "every group pays" in text, text)
    print(text)
    print("balance_solve: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
