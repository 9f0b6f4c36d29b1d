#!/usr/bin/env python3
r"""The coalescent's defaults on ordinary labelled data, against SciPy's average linkage.

On scikit-learn's iris, wine, breast_cancer and digits (a seeded subset of 400 rows where a
set is larger, rows in a seeded random order) and on
``../shared/data/spambase/spambase_120.csv`` (held out: never used to choose a default),
each standardized (constant columns dropped) and raw, the script fits

- ``KingmanCoalescent()``, the default (``likelihood="auto"``: the mutation model for the
  binary spambase rows), and ``KingmanCoalescent(**options)`` for each ``--noise`` value
  (Brownian, ``Lambda="auto"``), with and without ``learn_hyperparameters``; the noiseless
  Brownian ``Lambda=1.0, noise=0`` model of the paper where it fits (it refuses equal rows);
- ``BayesianRoseTree(model=NormalGamma())`` (its default labels);
- SciPy average linkage (its tree; its labels cut at the true number of classes);

and prints dendrogram purity (``rosetree.metrics``) and the adjusted Rand index of the flat
clusters (``labels_``; for the coalescent also the old ``flat_clusters="llr"`` rule).

    python benchmarks/bench_coalescent_defaults.py --noise 0.01 0.1
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np
import rosetree as rt
from rosetree.metrics import dendrogram_purity
from scipy.cluster.hierarchy import fcluster, linkage
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.metrics import adjusted_rand_score

SPAMBASE = pathlib.Path(__file__).resolve().parents[2] / "shared/data/spambase/spambase_120.csv"


def data_sets(max_rows: int = 400) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The labelled sets: name -> (X, y), a seeded subset of ``max_rows`` rows."""
    rng = np.random.default_rng(0)
    out = {}
    for name, load in [
        ("iris", load_iris),
        ("wine", load_wine),
        ("breast_cancer", load_breast_cancer),
        ("digits", load_digits),
    ]:
        X, y = load(return_X_y=True)
        # Rows in random order: the files list them class by class, which would favour a
        # method that breaks ties by row index.
        keep = rng.choice(len(X), min(max_rows, len(X)), replace=False)
        out[name] = (X[keep].astype(float), y[keep])
    if SPAMBASE.exists():
        raw = np.genfromtxt(SPAMBASE, delimiter=",", skip_header=1)
        raw = raw[rng.permutation(len(raw))]
        out["spambase_120 (held out)"] = (raw[:, 2:], raw[:, 1].astype(int))
    return out


def standardize(X: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit variance, constant columns dropped."""
    sd = X.std(axis=0)
    keep = sd > 0
    return (X[:, keep] - X[:, keep].mean(axis=0)) / sd[keep]


def row(label: str, tree, labels, y, seconds: float) -> None:
    """Print one method's purity, ARI, number of clusters and time."""
    purity = dendrogram_purity(tree, y) if tree is not None else float("nan")
    ari = adjusted_rand_score(y, labels) if labels is not None else float("nan")
    k = len(set(labels)) if labels is not None else 0
    print(f"  {label:<34} purity {purity:.3f}  ARI {ari:6.3f}  k {k:4d}  {seconds:6.2f} s")


def main() -> None:
    """Run every method on every set."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noise", type=float, nargs="+", default=[0.01])
    args = parser.parse_args()
    for name, (X0, y) in data_sets().items():
        for scaled in (True, False):
            X = standardize(X0) if scaled else X0[:, X0.std(axis=0) > 0]
            print(f"{name} ({'standardized' if scaled else 'raw'}), {X.shape}")
            t = time.perf_counter()
            Z = linkage(X, "average")
            k = len(set(y))
            row(
                "scipy average (cut at true k)",
                Z,
                fcluster(Z, k, "maxclust"),
                y,
                time.perf_counter() - t,
            )
            t = time.perf_counter()
            brt = rt.BayesianRoseTree(model=rt.NormalGamma()).fit(X)
            row("BRT NormalGamma default", brt.tree_, brt.labels_, y, time.perf_counter() - t)
            try:
                t = time.perf_counter()
                paper = rt.KingmanCoalescent(likelihood="brownian", Lambda=1.0, noise=0.0).fit(X)
                row(
                    "coalescent Lambda=1 noise=0 (llr)",
                    paper.tree_,
                    paper.cluster_labels(),
                    y,
                    time.perf_counter() - t,
                )
            except rt.InvalidDataError as exc:
                print(f"  coalescent Lambda=1 noise=0: refused ({str(exc)[:40]}...)")
            t = time.perf_counter()
            default = rt.KingmanCoalescent().fit(X)
            tag = f"coalescent default ({default.likelihood_})"
            row(tag, default.tree_, default.labels_, y, time.perf_counter() - t)
            for noise in args.noise:
                for learn in (False, True):
                    t = time.perf_counter()
                    est = rt.KingmanCoalescent(noise=noise, learn_hyperparameters=learn)
                    est.fit(X)
                    seconds = time.perf_counter() - t
                    tag = f"coalescent noise={noise}{' learn' if learn else ''}"
                    row(tag, est.tree_, est.labels_, y, seconds)
                    row(tag + " (llr)", est.tree_, est.cluster_labels(), y, 0.0)


if __name__ == "__main__":
    main()
