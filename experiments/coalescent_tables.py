#!/usr/bin/env python3
"""Table 1 of Teh, Daumé & Roy (2007): MNIST and SPAMBASE against average linkage and BHC.

Dendrogram purity, subtree score and leave-one-out accuracy (``rosetree.metrics``) of

- ``average linkage``: SciPy's ``linkage(pdist(X), "average")`` (Euclidean for MNIST,
  Hamming for the binary SPAMBASE rows),
- ``BHC``: ``rt.BayesianRoseTree(model, binary=True)`` with the default model for the data
  (``NormalInverseWishart()`` for MNIST, ``BetaBernoulli()`` for SPAMBASE),
- ``coalescent``: ``rt.KingmanCoalescent`` with Greedy-Rate1 and 10 iterations of
  hyperparameter re-estimation (the paper's setting): for MNIST Brownian diffusion with
  ``Λ = λI``, starting from the mean per-feature variance of the rows, and the same with a
  full ``Λ`` (the paper's inverse-Wishart MAP; it does worse here); for SPAMBASE the
  multinomial mutation model with one rate per feature, starting from 1; and each without
  re-estimation, to show what it does,

as mean ± standard error over random subsets, all systems on the same subsets:

- MNIST: 20 images per digit from ``mnist/mnist5k.npz``, pixels / 255, PCA to 20
  dimensions fitted on the 200 images (50 subsets, as the paper);
- SPAMBASE: 50 spam + 50 other rows of the binarised ``spambase/spambase_bin.csv``
  (20 subsets, as the paper; it does not say whether it binarised).

The subsets are those of ``benchmarks/bench_quality.py`` (same seeds). Run
``python experiments/coalescent_tables.py`` (``--subsets N`` for fewer, ``--quick`` for a
smoke run); results go to ``experiments/results/coalescent_tables.{json,md}``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from common import ROOT, parser, print_table, write_json

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_quality import _TABLE_1, SCORES, Source, mean_se, scipy_tree

DATA_DIR = ROOT.parent / "shared" / "data"

#: Teh et al. (2007), Table 1: (mean, standard error) of purity, subtree score, LOO accuracy.
PAPER = {
    name: {system.removesuffix(" (Greedy-Rate1)"): cells for system, cells in systems.items()}
    for name, systems in _TABLE_1.items()
}
SUBSETS = {"mnist": 50, "spambase": 20}


def coalescent(X: np.ndarray, name: str, learn: bool, full: bool = False) -> rt.Tree:
    """Greedy-Rate1, with or without 10 iterations of hyperparameter re-estimation."""
    if name == "mnist":
        scale = float(X.var(axis=0).mean())
        options: dict[str, Any] = {"likelihood": "brownian", "noise": 0.0}
        options["Lambda"] = scale * np.eye(X.shape[1]) if full else scale
    else:
        options = {"likelihood": "multinomial", "Lambda": np.ones(X.shape[1])}
    if learn:
        options.update(learn_hyperparameters=True, hyper_iter=10)
    return rt.KingmanCoalescent(**options).fit(X).tree_


def systems(name: str) -> dict[str, Any]:
    """Label -> function of the rows that returns a tree."""
    binary = name == "spambase"
    model = rt.BetaBernoulli() if binary else rt.NormalInverseWishart()
    return {
        "average linkage": lambda X: scipy_tree(X, "average", "hamming" if binary else "euclidean"),
        "BHC": lambda X: rt.BayesianRoseTree(model, binary=True).fit(X).tree_,
        "coalescent": lambda X: coalescent(X, name, learn=True),
        "coalescent, fixed hyperparameters": lambda X: coalescent(X, name, learn=False),
    } | (
        {"coalescent, full Λ learned": lambda X: coalescent(X, name, learn=True, full=True)}
        if name == "mnist"
        else {}
    )


def main() -> None:
    """Run every system on every subset and write the tables."""
    p = parser(__doc__ or "")
    p.add_argument("--subsets", type=int, default=None, help="subsets per data set")
    p.add_argument("--data", nargs="*", default=list(SUBSETS), choices=list(SUBSETS))
    args = p.parse_args()
    source = Source(DATA_DIR)
    results: dict[str, Any] = {}
    lines = []
    for name in args.data:
        n_subsets = 2 if args.quick else (args.subsets or SUBSETS[name])
        raw: dict[str, dict[str, list[float]]] = {}
        for i in range(n_subsets):
            X, y = source.subset(name, i)
            for label, build in systems(name).items():
                start = time.perf_counter()
                tree = build(X)
                cell = raw.setdefault(label, {s: [] for s in [*SCORES, "seconds"]})
                cell["seconds"].append(time.perf_counter() - start)
                for score, fn in SCORES.items():
                    cell[score].append(fn(tree, y))
            print(f"{name}: subset {i + 1}/{n_subsets}", flush=True)
        summary = {
            label: {s: mean_se(v[s]) for s in SCORES} | {"seconds": float(np.mean(v["seconds"]))}
            for label, v in raw.items()
        }
        results[name] = {"n_subsets": n_subsets, "systems": summary, "raw": raw}
        rows = []
        lines += [f"**{name}** ({n_subsets} subsets; ours, paper in brackets)", ""]
        lines.append("| system | " + " | ".join(SCORES) + " | s per fit |")
        lines.append("|---|" + "---:|" * (len(SCORES) + 1))
        for label, cells in summary.items():
            paper = PAPER[name].get(label)
            shown = []
            for k, s in enumerate(SCORES):
                mean, se = cells[s]
                text = f"{mean:.3f} ± {se or 0:.3f}"
                if paper:
                    text += f" ({paper[k][0]:.3f} ± {paper[k][1]:.3f})"
                shown.append(text)
            rows.append([label, *shown, f"{cells['seconds']:.2f}"])
            lines.append(f"| {label} | " + " | ".join(shown) + f" | {cells['seconds']:.2f} |")
        lines.append("")
        print_table(["system", *SCORES, "s per fit"], rows)
    suffix = "_quick" if args.quick else ""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"coalescent_tables{suffix}.md").write_text("\n".join(lines), encoding="utf-8")
    command = "python experiments/coalescent_tables.py" + (" --quick" if args.quick else "")
    write_json(out / f"coalescent_tables{suffix}.json", {"command": command, **results})


if __name__ == "__main__":
    main()
