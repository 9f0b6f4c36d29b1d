#!/usr/bin/env python3
r"""The diffusion tree's greedy-EM default against learning every hyperparameter, on labelled data.

scikit-learn's iris, wine, breast_cancer and digits (digits: the held-out set, not used while
choosing the default), ``--n`` rows of each drawn with seed 0, standardized (digits: its
first 10 principal components, standardized). For each set, in the same run: SciPy average
linkage; ``PitmanYorDiffusionTree(random_state=0)`` (the default, ``sigma2`` learnt); and the
same with ``learn_hyperparameters=True`` (``alpha``, ``beta``, ``c``, ``sigma2`` learnt, the
former default). Reported: dendrogram purity (``rosetree.metrics``), branch points, the
learnt ``beta`` and wall seconds.

    python benchmarks/bench_pydt_defaults.py --n 100
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import rosetree as rt
from scipy.cluster.hierarchy import linkage
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler


def sets(n: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``n`` standardized rows of each labelled set (seed 0)."""
    out = {}
    for name, load in (
        ("iris", load_iris),
        ("wine", load_wine),
        ("breast_cancer", load_breast_cancer),
        ("digits (held out)", load_digits),
    ):
        X, y = load(return_X_y=True)
        idx = np.sort(np.random.default_rng(0).choice(len(X), min(n, len(X)), replace=False))
        X, y = X[idx], y[idx]
        if name.startswith("digits"):
            X = PCA(10, random_state=0).fit_transform(X)
        out[name] = (StandardScaler().fit_transform(X), y)
    return out


def main() -> None:
    """Print one Markdown row per set and method."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100, help="rows per set")
    args = parser.parse_args()
    print("| set | method | purity | branch points | beta | s |")
    print("|---|---|---:|---:|---:|---:|")
    for name, (X, y) in sets(args.n).items():
        start = time.perf_counter()
        Z = linkage(X, "average")
        seconds = time.perf_counter() - start
        purity = rt.metrics.dendrogram_purity(Z, y)
        print(f"| {name} | SciPy average | {purity:.3f} | {len(X) - 1} | | {seconds:.3f} |")
        for method, options in (
            ("PYDT default (sigma2 learnt)", {}),
            ("PYDT, all learnt", {"learn_hyperparameters": True}),
        ):
            start = time.perf_counter()
            est = rt.PitmanYorDiffusionTree(random_state=0, **options).fit(X)
            seconds = time.perf_counter() - start
            purity = rt.metrics.dendrogram_purity(est.tree_, y)
            print(
                f"| {name} | {method} | {purity:.3f} | {len(est.tree_.internal_nodes)} | "
                f"{est.beta_:.3f} | {seconds:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
