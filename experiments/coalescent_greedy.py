#!/usr/bin/env python3
"""The three greedy coalescent searches against each other (Teh et al. §4.2, footnote 2).

Dendrogram purity of Greedy-Rate1, Greedy-MaxProb and Greedy-MinDuration on the first
``--subsets`` subsets of MNIST and SPAMBASE used by ``coalescent_tables.py`` (the same
seeds), hyperparameters fixed: Brownian diffusion with Λ = the mean feature variance times I
for MNIST, multinomial mutation with rate 1 for SPAMBASE.

    python experiments/coalescent_greedy.py --subsets 20
"""

from __future__ import annotations

import sys

import numpy as np
import rosetree as rt
from common import ROOT, parser

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_quality import Source

INFERENCES = ("greedy-rate1", "greedy-maxprob", "greedy-minduration")


def main() -> None:
    """Print mean ± standard error of the purity per data set and search."""
    p = parser(__doc__ or "")
    p.add_argument("--subsets", type=int, default=20)
    args = p.parse_args()
    source = Source(ROOT.parent / "shared" / "data")
    n = 2 if args.quick else args.subsets
    for name in ("mnist", "spambase"):
        purity: dict[str, list[float]] = {inf: [] for inf in INFERENCES}
        for i in range(n):
            X, y = source.subset(name, i)
            if name == "mnist":
                options = {"Lambda": float(X.var(axis=0).mean()), "noise": 0.0}
            else:
                options = {"likelihood": "multinomial"}
            for inf in INFERENCES:
                tree = rt.KingmanCoalescent(inference=inf, **options).fit(X).tree_
                purity[inf].append(rt.dendrogram_purity(tree, y))
        for inf, v in purity.items():
            se = np.std(v, ddof=1) / np.sqrt(len(v))
            print(f"{name:9s} {inf:19s} {np.mean(v):.3f} ± {se:.3f}")


if __name__ == "__main__":
    main()
