#!/usr/bin/env python3
r"""Greedy-Rate1 against SciPy's average linkage on the same rows.

Kingman's coalescent with Brownian diffusion and an isotropic Lambda.

For each n the script draws one data set (d = 20, a seeded mixture of 10 spherical
Gaussians), then in the same process times ``rt.KingmanCoalescent(Lambda=1.0).fit(X)`` and
``scipy.cluster.hierarchy.linkage(pdist(X), "average")`` alternately, ``--repeat`` times
each, and reports the best wall-clock time of each, their ratio, and the ratio of the best
CPU times (``process_time``; with ``--n-jobs 1``, one core's work against one core's).

    python benchmarks/bench_coalescent.py --sizes 1000 2000 4000 8000 --repeat 3 --n-jobs 1

With ``--binary`` the rows are instead ``--d`` bits drawn from 16 random prototypes with
10 % of the bits flipped, fitted by the default ``rt.KingmanCoalescent()`` (whose
``likelihood="auto"`` takes the mutation model for 0/1 rows) against
``linkage(pdist(X, "hamming"), "average")``:

    python benchmarks/bench_coalescent.py --binary --d 64 --sizes 1000 2000 4000 \
        --repeat 1 --n-jobs 1

With ``--inference greedy-maxprob greedy-minduration`` it instead times those cubic
searches against Greedy-Rate1 on the same data in the same run (best of ``--repeat``),
and reports each one's time, its ratio to Greedy-Rate1, and the growth exponent
``log(t_k / t_{k-1}) / log(n_k / n_{k-1})`` between successive sizes:

    python benchmarks/bench_coalescent.py --sizes 250 500 1000 --repeat 1 \
        --inference greedy-maxprob greedy-minduration
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import rosetree as rt
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import pdist


def data(n: int, d: int, seed: int = 0) -> np.ndarray:
    """A seeded mixture of 10 spherical Gaussians, ``n`` rows of ``d`` columns."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 4.0, size=(10, d))
    return means[rng.integers(0, 10, size=n)] + rng.normal(size=(n, d))


def bits(n: int, d: int, seed: int = 0) -> np.ndarray:
    """``n`` rows of ``d`` bits from 16 seeded prototypes, 10 % of the bits flipped."""
    rng = np.random.default_rng(seed)
    prototypes = rng.random((16, d)) < 0.5
    flips = rng.random((n, d)) < 0.1
    return (prototypes[rng.integers(0, 16, size=n)] ^ flips).astype(np.float64)


def best(f, repeat: int) -> float:
    """The least of ``repeat`` wall-clock times of ``f()``."""
    return best_times(f, repeat)[0]


def best_times(f, repeat: int) -> tuple[float, float]:
    """The least of ``repeat`` wall-clock times and the least CPU time of ``f()``."""
    wall, cpu = [], []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        f()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return min(wall), min(cpu)


def main() -> None:
    """Time both methods for every size and print a Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument(
        "--binary",
        action="store_true",
        help="binary rows and the default (mutation) model against Hamming average linkage",
    )
    ap.add_argument(
        "--inference",
        nargs="+",
        default=None,
        help="time these inferences against Greedy-Rate1 instead of SciPy",
    )
    args = ap.parse_args()
    if args.inference:
        compare_inferences(args)
        return
    print("| n | d | Greedy-Rate1 s | SciPy average s | ratio | CPU ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        if args.binary:
            X, metric = bits(n, args.d), "hamming"
            est = rt.KingmanCoalescent(n_jobs=args.n_jobs, verbose=False)
        else:
            X, metric = data(n, args.d), "euclidean"
            est = rt.KingmanCoalescent(Lambda=1.0, n_jobs=args.n_jobs)
        t_rt, c_rt = best_times(lambda est=est, X=X: est.fit(X), args.repeat)
        t_sp, c_sp = best_times(
            lambda X=X, metric=metric: linkage(pdist(X, metric), "average"), args.repeat
        )
        print(
            f"| {n} | {args.d} | {t_rt:.3f} | {t_sp:.3f} | {t_rt / t_sp:.2f} | {c_rt / c_sp:.2f} |",
            flush=True,
        )


def compare_inferences(args: argparse.Namespace) -> None:
    """Time ``args.inference`` against Greedy-Rate1 for every size; print a Markdown table."""
    names = ["greedy-rate1", *[i for i in args.inference if i != "greedy-rate1"]]
    header = " | ".join(f"{name} s" for name in names)
    ratios = " | ".join(f"{name} / rate1" for name in names[1:])
    growth = " | ".join(f"{name} exponent" for name in names)
    print(f"| n | d | {header} | {ratios} | {growth} |")
    print("|---:|---:|" + "---:|" * (3 * len(names) - 1))
    for name in names:  # warm-up: thread pools, first-call costs
        rt.KingmanCoalescent(inference=name, n_jobs=args.n_jobs).fit(data(20, args.d))
    previous: tuple[int, list[float]] | None = None
    for n in args.sizes:
        X = data(n, args.d)
        times = []
        for name in names:
            est = rt.KingmanCoalescent(Lambda=1.0, inference=name, n_jobs=args.n_jobs)
            times.append(best(lambda est=est, X=X: est.fit(X), args.repeat))
        cells = [f"{t:.3f}" for t in times] + [f"{t / times[0]:.1f}" for t in times[1:]]
        if previous is None:
            cells += ["–"] * len(names)
        else:
            n0, t0 = previous
            pairs = zip(times, t0, strict=True)
            cells += [f"{math.log(t / s) / math.log(n / n0):.2f}" for t, s in pairs]
        print(f"| {n} | {args.d} | " + " | ".join(cells) + " |", flush=True)
        previous = (n, times)


if __name__ == "__main__":
    main()
