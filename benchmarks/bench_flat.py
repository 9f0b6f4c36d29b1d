#!/usr/bin/env python3
"""How many flat clusters each rule reads off a fitted tree, and how well they match the truth.

What is measured
----------------
For every data set one tree is fitted (``rt.BayesianRoseTree``, BRT by default; BHC with
``--binary``), and four rules read flat clusters off that same tree:

* ``dp``: the top-down cut ``r >= 0.5`` with ``r`` under the Dirichlet-process prior
  (``tree_.remix("dp").cut()``, the default ``labels_``),
* ``cut``: Heller & Ghahramani's top-down cut ``r >= 0.5`` under the tree's own mixing
  rule (``tree_.cut()``),
* ``map``: the most probable tree-consistent partition (``tree_.map_partition()``),
* ``k``: at most the true number of classes, the lowest cut of the tree's heights that gives
  no more (``tree_.max_clusters(k)``, SciPy's ``"maxclust"``).

For each: the number of clusters and the adjusted Rand index (ARI; Hubert & Arabie 1985)
against the known classes.

Data
----
* ``blobs``: five spherical Gaussian blobs in d = 8, means 12 units apart on the axes of
  the first five coordinates (``12 * e_k``; nearest means are ~17 apart, each blob has unit
  variance), n / 5 rows each, seeded. Model: ``NormalInverseWishart()`` (data-driven
  defaults). Sizes ``--sizes`` (default 150 1000 3000 10000).
* ``toy`` (48 x 12, 3 classes), ``digits024`` (120 x 64 binarised, 3 classes), ``spambase``
  (100-row binary subset, 2 classes) from ``shared/data`` beside the checkout (``--data``). Model:
  ``BetaBernoulli()`` (its prior from the data).

Usage::

    python3 benchmarks/bench_flat.py                   # BRT, every data set
    python3 benchmarks/bench_flat.py --binary          # BHC
    python3 benchmarks/bench_flat.py --sizes 150 1000 --json out.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import rosetree as rt

LABELLED = {
    "toy": ("toy/toy.csv", "id"),
    "digits024": ("digits024/digits024_bin.csv", "id"),
    "spambase": ("spambase/spambase_bin_100.csv", "source_index"),
}


def adjusted_rand_index(truth: np.ndarray, pred: np.ndarray) -> float:
    """The adjusted Rand index of two labellings (Hubert & Arabie 1985), from the contingency table.

    ARI = (Σ_ij C(n_ij, 2) − E) / (½(Σ_i C(a_i, 2) + Σ_j C(b_j, 2)) − E), with
    E = Σ_i C(a_i, 2) Σ_j C(b_j, 2) / C(n, 2), n_ij the contingency table and a, b its row
    and column sums. Two identical trivial labellings (one cluster each, or singletons each)
    score 1.
    """
    truth, pred = np.asarray(truth), np.asarray(pred)
    if truth.shape != pred.shape or truth.ndim != 1:
        raise ValueError("the labellings must be 1-D arrays of the same length")
    _, t = np.unique(truth, return_inverse=True)
    _, p = np.unique(pred, return_inverse=True)
    table = np.zeros((t.max() + 1, p.max() + 1), dtype=np.int64)
    np.add.at(table, (t, p), 1)

    def pairs(x: np.ndarray) -> float:
        x = x.astype(np.float64)
        return float(np.sum(x * (x - 1) / 2))

    index = pairs(table)
    rows, cols = pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    expected = rows * cols / pairs(np.array([len(truth)]))
    best = (rows + cols) / 2
    if best == expected:
        return 1.0
    return (index - expected) / (best - expected)


def blobs(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Five unit-variance Gaussian blobs in d = 8 with means 12 * e_k, n / 5 rows each."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(5), -(-n // 5))[:n]
    means = np.zeros((5, 8))
    means[np.arange(5), np.arange(5)] = 12.0
    return means[y] + rng.standard_normal((n, 8)), y


def labelled(root: Path, name: str) -> tuple[np.ndarray, np.ndarray]:
    """A labelled CSV from the shared data: (binary rows, class labels)."""
    path, index_col = LABELLED[name]
    with open(root / path) as fh:
        header = fh.readline().strip().split(",")
    table = np.loadtxt(root / path, delimiter=",", skiprows=1)
    keep = [k for k, h in enumerate(header) if h not in (index_col, "label")]
    return table[:, keep], table[:, header.index("label")].astype(int)


def evaluate(name: str, X: np.ndarray, y: np.ndarray, model: object, binary: bool) -> dict:
    """Fit one tree to ``X`` and score the four flat-cluster rules against the classes ``y``.

    Returns one table row: the data set's shape, the fit time and tree depth, and for each
    rule ``<rule>_clusters`` (number of clusters) and ``<rule>_ari`` (adjusted Rand index).
    """
    t0 = time.perf_counter()
    est = rt.BayesianRoseTree(model=model, binary=binary).fit(X)
    seconds = time.perf_counter() - t0
    tree = est.tree_
    k = len(np.unique(y))
    rules = {
        "dp": est.labels_,
        "cut": tree.cut(),
        "map": tree.map_partition(),
        "k": tree.max_clusters(k),
    }
    row = {
        "data": name,
        "n": int(X.shape[0]),
        "d": int(X.shape[1]),
        "classes": k,
        "system": "BHC" if binary else "BRT",
        "fit_s": round(seconds, 2),
        "depth": tree.depth(),
    }
    for rule, labels in rules.items():
        row[f"{rule}_clusters"] = len(np.unique(labels))
        row[f"{rule}_ari"] = round(adjusted_rand_index(y, labels), 4)
    return row


def main(argv: list[str] | None = None) -> int:
    """Run every data set, print the table and optionally write it as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[150, 1000, 3000, 10000])
    parser.add_argument("--binary", action="store_true", help="BHC instead of BRT")
    default_data = Path(__file__).resolve().parents[2] / "shared" / "data"
    parser.add_argument("--data", type=Path, default=default_data)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args(argv)

    cases = [("blobs", *blobs(n), rt.NormalInverseWishart()) for n in args.sizes]
    for name in LABELLED:
        if (args.data / LABELLED[name][0]).exists():
            cases.append((name, *labelled(args.data, name), rt.BetaBernoulli()))
        else:
            print(f"skipping {name}: {args.data / LABELLED[name][0]} not found", file=sys.stderr)

    head = (
        "| data | n | classes | system | depth | dp: K | ARI | cut: K | ARI | map: K | ARI "
        "| k: K | ARI | fit s |"
    )
    print(" ".join(sys.argv))
    print(f"rosetree {rt.__version__}, Python {platform.python_version()}, {platform.machine()}")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    rows = []
    for name, X, y, model in cases:
        r = evaluate(name, X, y, model, args.binary)
        rows.append(r)
        print(
            f"| {r['data']} | {r['n']:,} | {r['classes']} | {r['system']} | {r['depth']} "
            f"| {r['dp_clusters']} | {r['dp_ari']:.3f} "
            f"| {r['cut_clusters']} | {r['cut_ari']:.3f} | {r['map_clusters']} "
            f"| {r['map_ari']:.3f} | {r['k_clusters']} | {r['k_ari']:.3f} | {r['fit_s']} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"argv": sys.argv, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
