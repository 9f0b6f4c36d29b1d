#!/usr/bin/env python3
"""Compare candidate data-driven default priors for ``rt.NormalInverseWishart()``.

For candidate default rules this script fits a greedy Bayesian rose tree
(``rt.BayesianRoseTree(model, mixing="brt", gamma=0.5)``) to labelled continuous data and
reports

* **dendrogram purity** (Heller & Ghahramani 2005, §5): for every pair of rows with the same
  label, the fraction of rows with that label under their lowest common ancestor, averaged
  over all such pairs (1 is perfect);
* **clusters**: the number of clusters of ``labels_`` (BRT's own cut, r_k ≥ 0.5), against the
  number of true classes;

and the same purity for SciPy's average linkage on Euclidean distances, the usual baseline.

Candidate rules (``d`` features; ``C`` the sample covariance, ``V = diag(C)``; zero variances
are floored at 10⁻⁶ times the mean variance): ``Ψ0 = s (ν0 − d − 1) C`` ("full") or
``s (ν0 − d − 1) V`` ("diag"), so that the prior mean of Σ is ``s C`` or ``s V``;
``μ0`` = the data mean; ``ν0 ∈ {d + 2, …}``; ``κ0 ∈ {0.01, 1, …}``.

Data (``shared/data`` beside the checkout, or ``--data``): MNIST, three draws of 20 images per
digit from ``mnist5k.npz`` (seeds 1–3, pixels scaled to [0, 1]), each projected on its own
first 20 principal components; optdigits, three draws of 12 images per digit (seeds 1–3) with
the raw 0–16 values (d = 64); ``digits024`` (120 × 64, raw 0–255 values, digits 0/2/4); five
Gaussian blobs in d = 8 (three seeds: 20 rows each, means ~ N(0, 4² I), unit covariance).
Average over the data sets of one family, then over families.

Usage::

    python3 benchmarks/niw_defaults.py              # the default grid
    python3 benchmarks/niw_defaults.py --quick      # one draw per family
    python3 benchmarks/niw_defaults.py --forms full diag --scales 1 --seed-offset 3
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import pdist

# ``shared/data`` beside the checkout or beside any folder above it.
DATA = next(
    (
        p / "shared" / "data"
        for p in Path(__file__).resolve().parents
        if (p / "shared" / "data").is_dir()
    ),
    Path("shared/data"),
)


# ---------------------------------------------------------------------------- data sets
def mnist(seed: int, data: Path) -> tuple[np.ndarray, np.ndarray]:
    """20 images per digit drawn with ``seed``, projected on their own first 20 PCs."""
    z = np.load(data / "mnist" / "mnist5k.npz")
    X, y = z["X"].astype(np.float64) / 255.0, z["y"]
    rng = np.random.default_rng(seed)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == k), 20, replace=False) for k in range(10)])
    Xs = X[idx] - X[idx].mean(axis=0)
    _, _, vt = np.linalg.svd(Xs, full_matrices=False)
    return Xs @ vt[:20].T, y[idx]


def optdigits(seed: int, data: Path) -> tuple[np.ndarray, np.ndarray]:
    """12 images per digit (raw 0–16 counts) drawn with ``seed``."""
    a = np.loadtxt(data / "digits_optdigits" / "digits10.csv", delimiter=",", skiprows=1)
    X, y = a[:, 2:], a[:, 1].astype(int)
    rng = np.random.default_rng(seed)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == k), 12, replace=False) for k in range(10)])
    return X[idx], y[idx]


def digits024(_seed: int, data: Path) -> tuple[np.ndarray, np.ndarray]:
    """The BHC paper's 120 digits 0/2/4 (raw 0–255 values)."""
    a = np.loadtxt(data / "digits024" / "digits024.csv", delimiter=",", skiprows=1)
    return a[:, 2:], a[:, 1].astype(int)


def blobs(seed: int, _data: Path) -> tuple[np.ndarray, np.ndarray]:
    """Five spherical unit-variance Gaussian blobs in d = 8, 20 rows each."""
    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 4.0, size=(5, 8))
    y = np.repeat(np.arange(5), 20)
    return means[y] + rng.normal(size=(100, 8)), y


FAMILIES = {
    "mnist-pca20": (mnist, [1, 2, 3]),
    "optdigits": (optdigits, [1, 2, 3]),
    "digits024": (digits024, [0]),
    "blobs-d8": (blobs, [1, 2, 3]),
}


# ---------------------------------------------------------------------------- purity
def dendrogram_purity(children: list[list[int]], n: int, y: np.ndarray) -> float:
    """Dendrogram purity of a tree given as children lists (node ``n + k`` = ``children[k]``).

    Pairs whose lowest common ancestor is node ``v`` with label ``c`` number
    ``C(m_v[c], 2) − Σ_children C(m_child[c], 2)``; each contributes ``m_v[c] / |v|``.
    """
    classes, yi = np.unique(y, return_inverse=True)
    counts = np.zeros((n + len(children), len(classes)))
    counts[np.arange(n), yi] = 1.0
    total = 0.0
    for k, ch in enumerate(children):
        v = n + k
        counts[v] = counts[ch].sum(axis=0)
        pairs = counts[v] * (counts[v] - 1) / 2 - (counts[ch] * (counts[ch] - 1) / 2).sum(axis=0)
        total += float(np.sum(pairs * counts[v] / counts[v].sum()))
    m = np.bincount(yi)
    return total / float(np.sum(m * (m - 1) / 2))


def rose_children(tree: rt.RoseTree) -> list[list[int]]:
    """Children lists of a fitted tree, parents after children, leaves 0..n−1."""
    n = tree.n_leaves
    out: list[list[int]] = []

    def visit(t: Any) -> int:
        if isinstance(t, int):
            return t
        ids = [visit(c) for c in t]
        out.append(ids)
        return n + len(out) - 1

    visit(tree.to_nested())
    return out


def linkage_purity(X: np.ndarray, y: np.ndarray) -> float:
    """Dendrogram purity of SciPy's average linkage on Euclidean distances."""
    Z = linkage(pdist(X), "average")
    n = X.shape[0]
    return dendrogram_purity([[int(a), int(b)] for a, b in Z[:, :2]], n, y)


# ---------------------------------------------------------------------------- candidate rules
def prior(
    X: np.ndarray, form: str, s: float, nu_extra: float, kappa0: float
) -> rt.NormalInverseWishart:
    """``Ψ0 = s (ν0 − d − 1) · (C or diag C)``, ``ν0 = d + 1 + nu_extra``, ``μ0`` = the mean."""
    d = X.shape[1]
    C = np.atleast_2d(np.cov(X, rowvar=False))
    var = np.diag(C).copy()
    floor = 1e-6 * max(var.mean(), 1e-300)
    if form == "diag":
        base = np.diag(np.maximum(var, floor))
    else:
        base = C + floor * np.eye(d)
    nu0 = d + 1 + nu_extra
    return rt.NormalInverseWishart(
        mu0=X.mean(axis=0), kappa0=kappa0, nu0=nu0, psi0=s * nu_extra * base
    )


def evaluate(X: np.ndarray, y: np.ndarray, model: rt.ClusterModel) -> tuple[float, int]:
    """Fit BRT (``gamma=0.5``) with ``model``: (dendrogram purity, number of flat clusters)."""
    est = rt.BayesianRoseTree(model=model, mixing="brt", gamma=0.5).fit(X)
    return dendrogram_purity(rose_children(est.tree_), X.shape[0], y), len(np.unique(est.labels_))


def main() -> int:
    """Fit every candidate rule to every data set and print purity and clusters per family."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--quick", action="store_true", help="one data set per family")
    ap.add_argument("--forms", nargs="+", default=["full", "diag"])
    ap.add_argument("--scales", nargs="+", type=float, default=[1.0, 0.5, 0.2, 0.1, 0.05])
    ap.add_argument(
        "--nu-extra",
        nargs="+",
        type=float,
        default=[1.0],
        help="ν0 − d − 1 values (1 is ν0 = d + 2)",
    )
    ap.add_argument("--kappa0", nargs="+", type=float, default=[0.01])
    ap.add_argument(
        "--seed-offset",
        type=int,
        default=0,
        help="add to every draw's seed: fresh draws to confirm a choice on",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    sets = []
    for fam, (load, seeds) in FAMILIES.items():
        for seed in seeds[:1] if args.quick else seeds:
            seed += args.seed_offset if load is not digits024 else 0
            X, y = load(seed, args.data)
            sets.append((fam, seed, X, y))
    print(
        f"rosetree {rt.__version__}; data sets: "
        + ", ".join(f"{f}#{s} {X.shape}" for f, s, X, _ in sets)
    )

    rows: list[dict[str, Any]] = []
    base = {(f, s): linkage_purity(X, y) for f, s, X, y in sets}
    classes = {(f, s): len(np.unique(y)) for f, s, _, y in sets}
    configs = [("current", 1.0, 1.0, 0.01)]  # rt.NormalInverseWishart() as installed
    configs += list(itertools.product(args.forms, args.scales, args.nu_extra, args.kappa0))
    fams = list(FAMILIES)
    print(f"\n{'rule':34s} " + " ".join(f"{f:>16s}" for f in fams) + f" {'mean':>6s}  time")
    line = " ".join(
        f"{np.mean([base[k] for k in base if k[0] == f]):6.3f}"
        f" /{np.mean([classes[k] for k in classes if k[0] == f]):4.1f} cl"
        for f in fams
    )
    print(
        f"{'average linkage (purity / classes)':34s} {line}"
        f" {np.mean([np.mean([base[k] for k in base if k[0] == f]) for f in fams]):6.3f}"
    )
    for form, s, nu_extra, kappa0 in configs:
        t0 = time.perf_counter()
        per: dict[str, list[tuple[float, int]]] = {f: [] for f in fams}
        for fam, seed, X, y in sets:
            model = (
                rt.NormalInverseWishart()
                if form == "current"
                else prior(X, form, s, nu_extra, kappa0)
            )
            pur, k = evaluate(X, y, model)
            per[fam].append((pur, k))
            rows.append(
                dict(
                    rule=form,
                    s=s,
                    nu_extra=nu_extra,
                    kappa0=kappa0,
                    family=fam,
                    seed=seed,
                    purity=pur,
                    clusters=k,
                    linkage_purity=base[(fam, seed)],
                )
            )
        name = (
            "current default"
            if form == "current"
            else (f"{form} s={s:g} ν0=d+{1 + nu_extra:g} κ0={kappa0:g}")
        )
        cells = " ".join(
            f"{np.mean([p for p, _ in per[f]]):6.3f} /{np.mean([k for _, k in per[f]]):4.1f} cl"
            for f in fams
        )
        mean = np.mean([np.mean([p for p, _ in per[f]]) for f in fams])
        print(f"{name:34s} {cells} {mean:6.3f} {time.perf_counter() - t0:5.1f}s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
