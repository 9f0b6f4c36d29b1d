#!/usr/bin/env python3
"""Table 2 of Teh, Daumé & Roy (2007): flat clusters of NIPS papers from a coalescent tree.

Data: ``nips/nips12_bin_df100.npz`` — the 1,740 NIPS papers of 1987–1999 with the 2,182
words that occur in at least 100 of them, as presence/absence (full papers: the paper used
abstracts, and so kept fewer words; author lists are not in our copy, so the paper's top
authors are not reported). The model is the multinomial mutation model with ``K = 2`` per
word and one mutation rate shared by all words, fitted by Greedy-Rate1 with one iteration of
rate re-estimation (the paper's setting). The flat clusters are the paper's §5 rule
(``KingmanCoalescent.labels_``): going down from the root, a node splits while the log
likelihood ratio of two independent subtrees against one exceeds the threshold (0).

Each cluster is listed with its size, the ratio that made its parent split, the papers'
years and its top words: those whose share of papers in the cluster most exceeds their share
in the whole collection (the difference of the smoothed log odds, among words present in at
least a fifth of the cluster's papers).

Run ``python experiments/coalescent_nips.py`` (``--threshold`` for another cut, ``--quick``
for a 300-paper smoke run); results go to ``experiments/results/coalescent_nips.json``.
"""

from __future__ import annotations

import time

import numpy as np
import rosetree as rt
from common import ROOT, parser, print_table, write_json

DATA = ROOT.parent / "shared" / "data" / "nips" / "nips12_bin_df100.npz"


def top_words(X: np.ndarray, rows: np.ndarray, vocab: np.ndarray, k: int = 10) -> list[str]:
    """The ``k`` words most over-represented in ``rows`` (smoothed log-odds difference)."""
    inside = (X[rows].sum(0) + 0.5) / (len(rows) + 1.0)
    overall = (X.sum(0) + 0.5) / (X.shape[0] + 1.0)
    lift = np.log(inside / (1 - inside)) - np.log(overall / (1 - overall))
    lift[inside < 0.2] = -np.inf
    return [str(vocab[j]) for j in np.argsort(-lift, kind="stable")[:k]]


def main() -> None:
    """Fit the tree, cut it, and print the clusters."""
    p = parser(__doc__ or "")
    p.add_argument("--threshold", type=float, default=0.0, help="LLR threshold (default 0)")
    p.add_argument("--hyper-iter", type=int, default=1, help="rate re-estimations (0: none)")
    args = p.parse_args()
    with np.load(DATA, allow_pickle=True) as z:
        X, vocab, year = z["X"].astype(np.float64), z["vocab"], z["year"]
    if args.quick:
        X, year = X[::6], year[::6]
    start = time.perf_counter()
    est = rt.KingmanCoalescent(
        likelihood="multinomial",
        Lambda=1.0,
        learn_hyperparameters=args.hyper_iter > 0,
        hyper_iter=max(args.hyper_iter, 1),
        llr_threshold=args.threshold,
        flat_clusters="llr",
    ).fit(X)
    seconds = time.perf_counter() - start
    tree = est.tree_
    clusters = []
    for c in range(est.n_clusters_):
        rows = np.flatnonzero(est.labels_ == c)
        node = next(v for v in range(tree.n_nodes) if sorted(tree.leaves(v)) == list(rows))
        parent = int(tree.parent[node])
        clusters.append(
            {
                "size": int(rows.size),
                "node": node,
                "parent_split_llr": float(est.split_llr_[parent]) if parent >= 0 else None,
                "own_split_llr": float(est.split_llr_[node]),
                "years": [int(year[rows].min()), int(np.median(year[rows])), int(year[rows].max())],
                "top_words": top_words(X, rows, vocab),
            }
        )
    clusters.sort(key=lambda c: -c["size"])
    print(f"{X.shape[0]} papers, {X.shape[1]} words: {est.n_clusters_} clusters in {seconds:.0f} s")
    print_table(
        ["size", "parent LLR", "years", "top words"],
        [
            [
                c["size"],
                f"{c['parent_split_llr']:.3f}" if c["parent_split_llr"] is not None else "-",
                "–".join(map(str, c["years"][::2])),
                " ".join(c["top_words"]),
            ]
            for c in clusters
        ],
    )
    suffix = "_quick" if args.quick else ""
    write_json(
        args.out / f"coalescent_nips{suffix}.json",
        {
            "command": "python experiments/coalescent_nips.py" + (" --quick" if args.quick else ""),
            "n_papers": int(X.shape[0]),
            "n_words": int(X.shape[1]),
            "threshold": args.threshold,
            "hyper_iter": args.hyper_iter,
            "rate": np.asarray(est.Lambda_).tolist(),
            "log_joint": est.log_joint_,
            "seconds": seconds,
            "n_clusters": est.n_clusters_,
            "clusters": clusters,
        },
    )


if __name__ == "__main__":
    main()
