#!/usr/bin/env python3
"""Greedy-Rate1 against SciPy's average linkage on the same rows.

Kingman's coalescent with Brownian diffusion and an isotropic Lambda.

For each n the script draws one data set (d = 20, a seeded mixture of 10 spherical
Gaussians), then in the same process times ``rt.KingmanCoalescent(Lambda=1.0).fit(X)`` and
``scipy.cluster.hierarchy.linkage(pdist(X), "average")`` alternately, ``--repeat`` times
each, and reports the best time of each and their ratio.

    python benchmarks/bench_coalescent.py --sizes 1000 2000 4000 8000 --repeat 3
"""

from __future__ import annotations

import argparse
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


def best(f, repeat: int) -> float:
    """The least of ``repeat`` wall-clock times of ``f()``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    """Time both methods for every size and print a Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000])
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-jobs", type=int, default=None)
    args = ap.parse_args()
    print("| n | d | Greedy-Rate1 s | SciPy average s | ratio |")
    print("|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        X = data(n, args.d)
        est = rt.KingmanCoalescent(Lambda=1.0, n_jobs=args.n_jobs)
        t_rt = best(lambda est=est, X=X: est.fit(X), args.repeat)
        t_sp = best(lambda X=X: linkage(pdist(X), "average"), args.repeat)
        print(f"| {n} | {args.d} | {t_rt:.3f} | {t_sp:.3f} | {t_rt / t_sp:.2f} |", flush=True)


if __name__ == "__main__":
    main()
