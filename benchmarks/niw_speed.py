#!/usr/bin/env python3
"""Time Normal-inverse-Wishart BRT fits with a fixed, explicit prior.

The prior is given explicitly (``mu0`` = data mean, ``kappa0 = 0.01``, ``nu0 = d + 2``, and
``psi0`` either the diagonal of the data variances or the full data covariance, each with a
ridge of 1e-6 times the mean variance), so that two builds of rosetree fit the same model and
find the same tree: the times then compare the code only. Data: ``k`` well-separated
unit-variance Gaussians (means ~ N(0, 8²)), as in ``bench_brt.py``'s ``gauss`` case.

Run it with each build's interpreter, alternating, and compare the best times::

    python3 benchmarks/niw_speed.py --repeat 5
    python3 benchmarks/niw_speed.py --cases 50x5000 --scale diag
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import rosetree as rt


def make_gauss(n: int, d: int, k: int = 10, seed: int = 20240601) -> np.ndarray:
    """``n`` rows from ``k`` unit-variance Gaussians in ``d`` dimensions, means ~ N(0, 8² I)."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=8.0, size=(k, d))
    return means[rng.integers(k, size=n)] + rng.normal(size=(n, d))


def prior(X: np.ndarray, scale: str) -> rt.NormalInverseWishart:
    """The explicit prior fitted to ``X``; ``scale`` is ``"full"`` or ``"diag"`` (see above)."""
    d = X.shape[1]
    C = np.atleast_2d(np.cov(X, rowvar=False))
    ridge = 1e-6 * np.trace(C) / d
    psi0 = np.diag(np.diag(C) + ridge) if scale == "diag" else C + ridge * np.eye(d)
    return rt.NormalInverseWishart(mu0=X.mean(axis=0), kappa0=0.01, nu0=d + 2.0, psi0=psi0)


def main() -> None:
    """Time each case and prior, printing the best of ``--repeat`` fits."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--cases", nargs="+", default=["1000x10", "500x64", "200x200"], help="n x d of each case"
    )
    ap.add_argument("--scale", nargs="+", default=["full", "diag"], choices=["full", "diag"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"rosetree {rt.__file__}")
    print(f"{'case':>10s} {'psi0':>5s} {'best s':>9s} {'log evidence':>16s}")
    for case in args.cases:
        n, d = (int(v) for v in case.split("x"))
        X = make_gauss(n, d)
        for scale in args.scale:
            model = prior(X, scale)
            best = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                est = rt.BayesianRoseTree(model=model).fit(X)
                best = min(best, time.perf_counter() - t0)
            print(f"{case:>10s} {scale:>5s} {best:9.4f} {est.log_evidence_:16.6f}", flush=True)


if __name__ == "__main__":
    main()
