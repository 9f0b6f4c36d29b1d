#!/usr/bin/env python3
"""Choosing the data-driven defaults of ``rt.NormalGamma`` by dendrogram purity.

Candidate rules ``b0_j = scale · a0 · var_j`` (``m0`` = column means) over a grid of
``kappa0``, ``a0`` and ``scale`` are fitted with the default BRT search (``mixing="brt"``,
``gamma=0.5``) to labelled continuous data, and scored by dendrogram purity (Heller &
Ghahramani 2005: the mean, over pairs of leaves of one class, of the fraction of that class
among the leaves under their lowest common ancestor, taken in the rose tree itself). For
reference: SciPy's average linkage (Euclidean) and ``rt.NormalInverseWishart()``.

Data (``shared/data`` beside the checkout, or ``$ROSETREE_DATA``): MNIST 20 per digit, PCA to
20 dimensions (the shipped subset and four more draws from the 5000 images, PCA fitted on each
draw as the shipped one was);
optdigits 12 per class, raw 0–16 counts (the shipped 120-row subset's rows and four more
draws); digits024 (BHC's 0/2/4 set, 120 × 64 raw grey levels).

The defaults of ``rt.NormalGamma()`` (κ0 = 1, a0 = 5, scale = 0.2) are the grid's best mean
purity. Run ``python experiments/normal_gamma_defaults.py`` (about a minute).
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import numpy as np
import rosetree as rt
from scipy.cluster.hierarchy import linkage

DATA = Path(
    os.environ.get("ROSETREE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
KAPPA0 = (0.01, 0.1, 1.0)
A0 = (0.5, 1.0, 2.0, 5.0, 10.0)
SCALE = (1.0, 0.5, 0.2, 0.1, 0.05, 0.02)


def purity_rose(children: list[list[int]], n: int, y: np.ndarray) -> float:
    """Dendrogram purity of a rose tree given by the child lists of every node."""
    parent = np.full(len(children), -1)
    for v, kids in enumerate(children):
        for c in kids:
            parent[c] = v
    classes, y = np.unique(y, return_inverse=True)
    counts = np.zeros((len(children), len(classes)))
    counts[np.arange(n), y] = 1
    for v in range(n, len(children)):  # children before parents
        counts[v] = counts[list(children[v])].sum(axis=0)
    ancestors = []
    for i in range(n):
        path, v = [], i
        while v >= 0:
            path.append(v)
            v = parent[v]
        ancestors.append(path)
    total, pairs = 0.0, 0
    for i, j in itertools.combinations(range(n), 2):
        if y[i] != y[j]:
            continue
        on_path = set(ancestors[i])
        lca = next(v for v in ancestors[j] if v in on_path)
        total += counts[lca, y[i]] / counts[lca].sum()
        pairs += 1
    return total / pairs


def purity_linkage(Z: np.ndarray, y: np.ndarray) -> float:
    """Dendrogram purity of the binary tree of a SciPy linkage matrix ``Z``."""
    n = len(y)
    children = [[] for _ in range(n)] + [[int(a), int(b)] for a, b in Z[:, :2]]
    return purity_rose(children, n, y)


def pca(X: np.ndarray, k: int) -> np.ndarray:
    """Project the centred rows of ``X`` on their first ``k`` principal components."""
    centred = X - X.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:k].T


def datasets() -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The labelled data sets as ``(name, X, y)``; the family is the name's first word."""
    out = []
    m200 = np.loadtxt(DATA / "mnist/mnist200_pca20.csv", delimiter=",", skiprows=1)
    out.append(("mnist-pca20 #0", m200[:, 2:], m200[:, 1]))
    big = np.load(DATA / "mnist/mnist5k.npz")
    for seed in range(1, 5):
        rng = np.random.default_rng(seed)
        idx = np.concatenate(
            [rng.choice(np.flatnonzero(big["y"] == k), 20, replace=False) for k in range(10)]
        )
        out.append((f"mnist-pca20 #{seed}", pca(big["X"][idx] / 255.0, 20), big["y"][idx]))
    digits = np.loadtxt(DATA / "digits_optdigits/digits10.csv", delimiter=",", skiprows=1)
    sub = np.loadtxt(DATA / "digits_optdigits/digits10_bin_120.csv", delimiter=",", skiprows=1)
    rows = sub[:, 0].astype(int)
    out.append(("optdigits-120 #0", digits[rows, 2:], digits[rows, 1]))
    for seed in range(1, 5):
        rng = np.random.default_rng(100 + seed)
        idx = np.concatenate(
            [rng.choice(np.flatnonzero(digits[:, 1] == k), 12, replace=False) for k in range(10)]
        )
        out.append((f"optdigits-120 #{seed}", digits[idx, 2:], digits[idx, 1]))
    d024 = np.loadtxt(DATA / "digits024/digits024.csv", delimiter=",", skiprows=1)
    out.append(("digits024 raw", d024[:, 2:], d024[:, 1]))
    return out


def fit_purity(X: np.ndarray, y: np.ndarray, model: rt.ClusterModel) -> tuple[float, float]:
    """Fit the default BRT search with ``model``: (dendrogram purity, ln p(D | T))."""
    est = rt.BayesianRoseTree(model=model).fit(X)
    tree = est.tree_
    return purity_rose([list(c) for c in tree.children], tree.n_leaves, y), est.log_evidence_


def main() -> None:
    """Score every candidate rule, print the table and write it to ``results/``."""
    start = time.time()
    data = datasets()
    names = [name for name, _, _ in data]
    families = sorted({n.split(" ")[0] for n in names})
    rows: list[tuple[str, dict[str, float], float]] = []

    def record(label: str, scores: list[tuple[float, float]]) -> None:
        by_family = {
            f: float(np.mean([s[0] for n, s in zip(names, scores, strict=True) if n.startswith(f)]))
            for f in families
        }
        rows.append((label, by_family, float(np.mean([s[1] for s in scores]))))

    record(
        "average linkage",
        [(purity_linkage(linkage(X, "average"), y), np.nan) for _, X, y in data],
    )
    for label, model in (
        ("NormalInverseWishart()", rt.NormalInverseWishart()),
        ("NormalGamma() (the defaults)", rt.NormalGamma()),
    ):
        record(label, [fit_purity(X, y, model) for _, X, y in data])
    for kappa0, a0, scale in itertools.product(KAPPA0, A0, SCALE):
        scores = []
        for _, X, y in data:
            b0 = scale * a0 * (X.var(axis=0, ddof=1) + 1e-6 * X.var(axis=0, ddof=1).mean())
            model = rt.NormalGamma(kappa0=kappa0, a0=a0, b0=b0)
            scores.append(fit_purity(X, y, model))
        record(f"NG kappa0={kappa0:<5} a0={a0:<4} scale={scale:<4}", scores)
    lines = [f"{'rule':<40}" + "".join(f"{f:>15}" for f in families) + "    mean   mean ln p"]
    for label, by_family, ev in rows:
        mean = np.mean(list(by_family.values()))
        lines.append(
            f"{label:<40}"
            + "".join(f"{by_family[f]:>15.3f}" for f in families)
            + f"{mean:>8.3f}{ev:>12.1f}"
        )
    lines.append(f"\n{len(data)} data sets: {', '.join(names)}")
    text = "\n".join(lines) + "\n"
    print(text + f"{time.time() - start:.0f} s")
    (Path(__file__).parent / "results" / "normal_gamma_defaults.txt").write_text(text)


if __name__ == "__main__":
    main()
