#!/usr/bin/env python3
"""Which diffusion-tree fit for hierarchical clustering: purity on digits, against SciPy.

150 rows of the UCI optical digits (15 of each digit, drawn with seed 1 from
``../shared/data/digits_optdigits/digits10.csv``, or ``$ROSETREE_DATA``), projected on their
first 10 principal components and scaled to unit variance. Dendrogram purity against the digit
labels (``rt.metrics.dendrogram_purity``) and fit time for SciPy's average and Ward linkage,
the DDT by greedy EM, the PYDT by greedy EM (learning α and β, or holding them at 0.5 and
0.2), and the PYDT by MCMC (400 sweeps), all in one run.

    python experiments/pydt_digits_purity.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import rosetree as rt
from common import ROOT, parser, write_json
from scipy.cluster.hierarchy import linkage

DATA_DIR = Path(os.environ.get("ROSETREE_DATA", ROOT.parent / "shared" / "data"))


def digits(per_class: int = 15, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The rows, reduced to 10 standardised principal components, and their digits."""
    df = pd.read_csv(DATA_DIR / "digits_optdigits" / "digits10.csv")
    rng = np.random.default_rng(seed)
    label = df["label"].to_numpy()
    rows = np.concatenate(
        [rng.choice(np.flatnonzero(label == k), per_class, replace=False) for k in range(10)]
    )
    X = df.drop(columns=["id", "label"]).to_numpy(float)[rows]
    X -= X.mean(axis=0)
    _, _, vt = np.linalg.svd(X, full_matrices=False)
    X = X @ vt[:10].T
    return X / X.std(axis=0), label[rows]


def main() -> None:
    """Fit every method and print and write its purity and time."""
    args = parser(__doc__ or "").parse_args()
    X, y = digits(per_class=5 if args.quick else 15)
    n = len(y)
    rows: dict[str, Any] = {}
    for method in ("average", "ward"):
        start = time.perf_counter()
        Z = linkage(X, method)
        seconds = time.perf_counter() - start
        tree = rt.Tree(n, [[int(a), int(b)] for a, b, *_ in Z])
        rows[f"SciPy {method} linkage"] = {
            "purity": rt.metrics.dendrogram_purity(tree, y),
            "seconds": seconds,
        }
    fits = {
        "DDT, greedy EM": dict(alpha=0.0, beta=0.0),
        "PYDT, greedy EM (the default: sigma2 learnt)": {},
        "PYDT, greedy EM, alpha, beta, c and sigma2 learnt": dict(learn_hyperparameters=True),
        "PYDT, greedy EM, alpha and beta fixed": dict(learn_hyperparameters=["c", "sigma2"]),
        "PYDT, MCMC 400 sweeps": dict(inference="mcmc", n_iter=400),
    }
    for name, options in fits.items():
        start = time.perf_counter()
        est = rt.PitmanYorDiffusionTree(random_state=0, **options).fit(X)
        seconds = time.perf_counter() - start
        tree = est.tree_
        rows[name] = {
            "purity": rt.metrics.dendrogram_purity(tree, y),
            "seconds": seconds,
            "log_joint": est.log_joint_,
            "alpha": est.alpha_,
            "beta": est.beta_,
            "branch_points": tree.n_nodes - tree.n_leaves,
        }
    for name, row in rows.items():
        print(f"{name:40s} purity {row['purity']:.3f}  {row['seconds']:8.3f} s")
    write_json(args.out / "pydt_digits_purity.json", rows)


if __name__ == "__main__":
    main()
