#!/usr/bin/env python3
"""Coalescent SMC: time against n for each proposal, and the growth exponent.

Kingman's coalescent with Brownian diffusion and an isotropic Lambda, ``S`` particles. For
each n the script draws one data set (d = 20, the seeded mixture of ``bench_coalescent``)
and, in the same process, times each proposal's fit alternately (``--repeat`` times, the
best time kept) together with Greedy-Rate1 on the same rows. The growth exponent of each
method is the least-squares slope of log time against log n. SMC-PostPost (every pair's
integral over the duration) and SMC-PriorPost (every pair's likelihood at the drawn time)
score all live pairs at every step, so they are cubic in n per particle; SMC-PriorPrior
draws the pair from the prior and is quadratic.

    python benchmarks/bench_smc.py --sizes 100 200 400 --particles 50
"""

from __future__ import annotations

import argparse

import numpy as np
import rosetree as rt
from bench_coalescent import best, data

METHODS = ("smc-postpost", "smc-priorpost", "smc-priorprior", "greedy-rate1")


def main() -> None:
    """Time every method for every size and print a Markdown table and the exponents."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400])
    ap.add_argument("--d", type=int, default=20)
    ap.add_argument("--particles", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--n-jobs", type=int, default=None)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    args = ap.parse_args()
    print("| n | d | S | " + " | ".join(f"{m} s" for m in args.methods) + " |")
    print("|---:|---:|---:|" + "---:|" * len(args.methods))
    times = {m: [] for m in args.methods}
    for n in args.sizes:
        X = data(n, args.d)
        row = []
        for m in args.methods:
            est = rt.KingmanCoalescent(
                Lambda=1.0,
                inference=m,
                n_particles=args.particles,
                random_state=0,
                n_jobs=args.n_jobs,
            )
            t = best(lambda est=est, X=X: est.fit(X), args.repeat)
            times[m].append(t)
            row.append(f"{t:.2f}")
        print(f"| {n} | {args.d} | {args.particles} | " + " | ".join(row) + " |", flush=True)
    if len(args.sizes) > 1:
        logn = np.log(args.sizes)
        for m in args.methods:
            slope = np.polyfit(logn, np.log(times[m]), 1)[0]
            print(f"growth exponent of {m}: {slope:.2f}")


if __name__ == "__main__":
    main()
