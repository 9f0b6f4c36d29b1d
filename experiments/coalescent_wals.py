#!/usr/bin/env python3
"""Figure 3 of Teh, Daumé & Roy (2007): WALS, the Indo-European tree and data restoration.

Data: ``wals/`` (the 2013 online edition of the World Atlas of Language Structures; see its
README). Features are the 142 ``wals2005_candidate`` ones; each feature's observed value
codes are renumbered ``0 .. K_d - 1`` (categories, not binarised: the multinomial mutation
model takes them as they are), empty cells are missing (NaN).

**Figure 3a.** The coalescent tree (Greedy-Rate1, multinomial mutation, one rate per feature
re-estimated with the tree, ``hyper_iter`` iterations) of the 48 Indo-European languages with
the most observed values (``wals_ie48.csv``; the paper's rule, at most 30 unknown features,
leaves only 9 languages in this edition), drawn with each language's genus; the dendrogram
purity of the genera against average linkage on the same rows.

**Figure 3b.** Restoring withheld entries. Languages and features are sorted by how many
cells they have observed; the densest ``p`` % of both (p = 10 … 50) form a subset. In each of
five folds a different random 5 % of the observed cells is hidden, every method predicts
them from the rest, and the accuracy is the share predicted exactly. Methods:

- ``coalescent``: Greedy-Rate1 on the subset with the hidden cells missing, then the mode of
  each hidden cell's posterior predictive distribution at its leaf (``impute``);
- ``nearest neighbour``: the value of the language nearest (share of disagreeing features
  among those both observe) among those that observe the feature;
- ``average linkage``: the nearest languages in SciPy's average-linkage tree (same distance)
  that observe the feature, the most common value among them;
- ``PPCA``: probabilistic PCA of the one-hot coded cells, fitted by EM with the missing cells
  integrated out (Tipping & Bishop 1999; Ilin & Raiko 2010), the largest reconstructed
  category of each hidden cell; latent dimensions 5, 10, 20 and 40, the best of them per
  fold ("chosen optimistically", as the paper);
- ``mode``: the most common value of the feature.

Run ``python experiments/coalescent_wals.py`` (``--quick`` for a smoke run). Results go to
``experiments/results/coalescent_wals.json`` and ``docs/figures/wals_*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import rosetree as rt
from common import ROOT, parser, pyplot, save_figure, write_json
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform

DATA = ROOT.parent / "shared" / "data" / "wals"
PERCENTS = (10, 20, 30, 40, 50)
PPCA_DIMS = (5, 10, 20, 40)


# --------------------------------------------------------------------------- data
def features() -> list[str]:
    """The 142 ``wals2005_candidate`` feature ids."""
    f = pd.read_csv(DATA / "wals_features.csv")
    return f.feature_id[f.wals2005_candidate == 1].tolist()


def codes(frame: pd.DataFrame) -> np.ndarray:
    """Each column's observed values renumbered ``0 .. K - 1`` in order; NaN where empty."""
    out = np.full(frame.shape, np.nan)
    for j, col in enumerate(frame.columns):
        values = frame[col].to_numpy(dtype=float)
        seen = np.unique(values[~np.isnan(values)])
        observed = ~np.isnan(values)
        out[observed, j] = np.searchsorted(seen, values[observed])
    return out


# --------------------------------------------------------------------------- Figure 3a
def genus_tree(hyper_iter: int, figures: Path) -> dict[str, Any]:
    """The Indo-European tree with genus labels, and purity against average linkage."""
    ie = pd.read_csv(DATA / "wals_ie48.csv")
    feats = [c for c in features() if c in ie.columns]
    X = codes(ie[feats])
    keep = ~np.all(np.isnan(X), axis=0)
    X = X[:, keep]
    genus = ie.genus.to_numpy()
    est = fit_coalescent(X, hyper_iter)
    avg = linkage(squareform(distances(X), checks=False), "average")
    labels = [f"{n} [{g}]" for n, g in zip(ie.name, genus, strict=True)]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 10))
    rt.plot.plot_tree(est.tree_, labels, ax=ax, heights="tree", clusters=cluster_nodes(est))
    ax.set_title("WALS, 48 Indo-European languages: Greedy-Rate1 coalescent")
    ax.set_xlabel("time before present")
    save_figure(fig, figures / "wals_ie48.png")
    return {
        "n_languages": int(X.shape[0]),
        "n_features": int(X.shape[1]),
        "observed": float(np.mean(~np.isnan(X))),
        "purity_coalescent": rt.dendrogram_purity(est.tree_, genus),
        "purity_average_linkage": rt.dendrogram_purity(avg, genus),
        "llr_clusters": [
            [str(ie.name[i]) for i in np.flatnonzero(est.labels_ == k)]
            for k in range(est.n_clusters_)
        ],
        "newick": est.tree_.to_newick(labels=list(ie.name), lengths=True),
    }


def cluster_nodes(est: rt.KingmanCoalescent) -> list[int]:
    """The internal nodes that are flat clusters of ``labels_`` (for colouring)."""
    tree = est.tree_
    out = []
    for v in tree.internal_nodes:
        parent = tree.parent[v]
        rows = tree.leaves(v)
        if len(set(est.labels_[rows])) == 1 and (
            parent < 0 or len(set(est.labels_[tree.leaves(int(parent))])) > 1
        ):
            out.append(v)
    return out


# --------------------------------------------------------------------------- Figure 3b
def densest(X: np.ndarray, percent: int) -> np.ndarray:
    """The densest ``percent`` % of languages (rows) and features (columns)."""
    observed = ~np.isnan(X)
    rows = np.argsort(-observed.sum(axis=1), kind="stable")[: round(X.shape[0] * percent / 100)]
    cols = np.argsort(-observed.sum(axis=0), kind="stable")[: round(X.shape[1] * percent / 100)]
    return X[np.ix_(np.sort(rows), np.sort(cols))]


def one_hot(X: np.ndarray) -> tuple[np.ndarray, list[slice]]:
    """One-hot blocks per column (NaN rows of a block where the cell is missing)."""
    blocks, out, start = [], [], 0
    for j in range(X.shape[1]):
        k = int(np.nanmax(X[:, j])) + 1 if np.any(~np.isnan(X[:, j])) else 1
        block = np.full((X.shape[0], k), np.nan)
        seen = ~np.isnan(X[:, j])
        block[seen] = np.eye(k)[X[seen, j].astype(int)]
        blocks.append(block)
        out.append(slice(start, start + k))
        start += k
    return np.hstack(blocks), out


def distances(X: np.ndarray) -> np.ndarray:
    """Share of disagreeing features among those both languages observe (1 if none)."""
    Y, _ = one_hot(X)
    E = np.nan_to_num(Y)
    seen_mask = (~np.isnan(X)).astype(float)
    agree = E @ E.T
    both = seen_mask @ seen_mask.T
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.where(both > 0, 1.0 - agree / both, 1.0)
    np.fill_diagonal(d, 0.0)
    return d


def nearest_neighbour(X: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """The value of the nearest language that observes the feature, per hidden cell."""
    d = distances(X)
    np.fill_diagonal(d, np.inf)
    out = np.empty(len(hidden))
    for k, (i, j) in enumerate(hidden):
        seen = np.flatnonzero(~np.isnan(X[:, j]))
        out[k] = X[seen[np.argmin(d[i, seen])], j]
    return out


def average_linkage(X: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """The most common value among the nearest languages in the average-linkage tree."""
    n = X.shape[0]
    Z = linkage(squareform(distances(X), checks=False), "average")
    parent = np.full(2 * n - 1, -1)
    members: list[list[int]] = [[i] for i in range(n)]
    for k, (a, b) in enumerate(Z[:, :2].astype(int)):
        parent[a] = parent[b] = n + k
        members.append(members[a] + members[b])
    out = np.empty(len(hidden))
    for k, (i, j) in enumerate(hidden):
        v = i
        while True:
            v = parent[v]
            values = X[members[v], j]
            values = values[~np.isnan(values)]
            if values.size:
                out[k] = np.bincount(values.astype(int)).argmax()
                break
    return out


def ppca(Y: np.ndarray, q: int, n_iter: int = 50, seed: int = 0) -> np.ndarray:
    """Reconstruction ``W E[z] + mu`` of every row by PPCA fitted with missing cells (EM)."""
    n, m = Y.shape
    seen_mask = ~np.isnan(Y)
    Yz = np.where(seen_mask, Y, 0.0)
    rng = np.random.default_rng(seed)
    mu = Yz.sum(0) / np.maximum(seen_mask.sum(0), 1)
    W = rng.normal(scale=0.1, size=(m, q))
    s2 = 1.0
    for _ in range(n_iter):
        # E-step, per row over its observed cells.
        Ez = np.empty((n, q))
        Ezz = np.empty((n, q, q))
        for i in range(n):
            Wo = W[seen_mask[i]]
            M = Wo.T @ Wo + s2 * np.eye(q)
            Minv = np.linalg.inv(M)
            Ez[i] = Minv @ Wo.T @ (Y[i, seen_mask[i]] - mu[seen_mask[i]])
            Ezz[i] = s2 * Minv + np.outer(Ez[i], Ez[i])
        # M-step, per column over its observed rows.
        S = (seen_mask.T.astype(float) @ Ezz.reshape(n, q * q)).reshape(m, q, q)
        R = np.einsum("ij,ik->jk", np.where(seen_mask, Yz - mu, 0.0), Ez)
        W = np.linalg.solve(S + 1e-9 * np.eye(q), R[..., None])[..., 0]
        mu = np.where(seen_mask, Yz - Ez @ W.T, 0.0).sum(0) / np.maximum(seen_mask.sum(0), 1)
        resid = np.where(seen_mask, Yz - mu - Ez @ W.T, 0.0)
        trace = np.einsum("jk,jl,ikl->ij", W, W, Ezz) - np.einsum("ij,ij->ij", Ez @ W.T, Ez @ W.T)
        s2 = float((resid**2 + np.where(seen_mask, trace, 0.0)).sum() / seen_mask.sum())
        s2 = max(s2, 1e-6)
    return Ez @ W.T + mu


def ppca_predict(X: np.ndarray, hidden: np.ndarray, q: int) -> np.ndarray:
    """The largest reconstructed category of each hidden cell under PPCA with ``q`` dims."""
    Y, blocks = one_hot(X)
    rec = ppca(Y, min(q, Y.shape[1] - 1))
    return np.array([rec[i, blocks[j]].argmax() for i, j in hidden], dtype=float)


def fit_coalescent(X: np.ndarray, hyper_iter: int) -> rt.KingmanCoalescent:
    """Greedy-Rate1, multinomial mutation, per-feature rates re-estimated ``hyper_iter`` times."""
    return rt.KingmanCoalescent(
        likelihood="multinomial",
        Lambda=np.ones(X.shape[1]),
        learn_hyperparameters=hyper_iter > 0,
        hyper_iter=max(hyper_iter, 1),
        flat_clusters="llr",  # the paper's rule (§5)
    ).fit(X)


def coalescent_predict(X: np.ndarray, hidden: np.ndarray, hyper_iter: int) -> np.ndarray:
    """The posterior predictive mode of each hidden cell under the Greedy-Rate1 tree."""
    filled = fit_coalescent(X, hyper_iter).impute()
    return filled[hidden[:, 0], hidden[:, 1]]


def mode_predict(X: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """The most common observed value of each hidden cell's feature."""
    modes = [np.bincount(c[~np.isnan(c)].astype(int)).argmax() for c in X.T]
    return np.array([modes[j] for _, j in hidden], dtype=float)


def restoration(percents: tuple[int, ...], folds: int, hyper_iter: int) -> dict[str, Any]:
    """Accuracy of every method on every subset and fold."""
    full = codes(pd.read_csv(DATA / "wals_matrix.csv")[features()])
    results: dict[str, Any] = {}
    for p in percents:
        X = densest(full, p)
        observed = np.argwhere(~np.isnan(X))
        acc: dict[str, list[float]] = {}
        for fold in range(folds):
            rng = np.random.default_rng([p, fold])
            pick = rng.choice(
                len(observed), size=max(1, round(0.05 * len(observed))), replace=False
            )
            hidden = observed[np.sort(pick)]
            truth = X[hidden[:, 0], hidden[:, 1]]
            train = X.copy()
            train[hidden[:, 0], hidden[:, 1]] = np.nan
            start = time.perf_counter()
            guesses = {
                "coalescent": coalescent_predict(train, hidden, hyper_iter),
                "nearest neighbour": nearest_neighbour(train, hidden),
                "average linkage": average_linkage(train, hidden),
                "mode": mode_predict(train, hidden),
            }
            middle = time.perf_counter()
            ppca_acc = [float(np.mean(ppca_predict(train, hidden, q) == truth)) for q in PPCA_DIMS]
            for name, guess in guesses.items():
                acc.setdefault(name, []).append(float(np.mean(guess == truth)))
            acc.setdefault("PPCA (best of 5, 10, 20, 40)", []).append(max(ppca_acc))
            for q, a in zip(PPCA_DIMS, ppca_acc, strict=True):
                acc.setdefault(f"PPCA q={q}", []).append(a)
            print(
                f"{p}%: fold {fold + 1}/{folds} ({middle - start:.0f} s, PPCA "
                f"{time.perf_counter() - middle:.0f} s): "
                + ", ".join(f"{k} {v[-1]:.3f}" for k, v in acc.items()),
                flush=True,
            )
        results[str(p)] = {
            "n_languages": int(X.shape[0]),
            "n_features": int(X.shape[1]),
            "observed": float(np.mean(~np.isnan(X))),
            "accuracy": {
                k: [float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(len(v)))]
                for k, v in acc.items()
            },
            "folds": acc,
        }
    return results


def plot_restoration(results: dict[str, Any], path: Path) -> None:
    """Accuracy against the percentage of the data set (Figure 3b)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    percents = [int(p) for p in results]
    shown = ["coalescent", "nearest neighbour", "average linkage", "PPCA (best of 5, 10, 20, 40)"]
    for name in shown:
        mean = [results[str(p)]["accuracy"][name][0] for p in percents]
        se = [results[str(p)]["accuracy"][name][1] for p in percents]
        ax.errorbar(percents, mean, yerr=se, marker="o", capsize=3, label=name)
    ax.set_xlabel("percentage of the data set (densest languages and features)")
    ax.set_ylabel("accuracy on 5% withheld cells")
    ax.legend()
    save_figure(fig, path)


def main() -> None:
    """Figure 3a and 3b."""
    p = parser(__doc__ or "")
    p.add_argument("--hyper-iter", type=int, default=10, help="rate re-estimations (0: none)")
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--percents", type=int, nargs="+", default=list(PERCENTS))
    args = p.parse_args()
    percents = (10,) if args.quick else tuple(args.percents)
    folds = 1 if args.quick else args.folds
    start = time.perf_counter()
    tree = genus_tree(args.hyper_iter, args.figures)
    print(
        f"IE48: purity (genus) coalescent {tree['purity_coalescent']:.3f}, "
        f"average linkage {tree['purity_average_linkage']:.3f}"
    )
    restored = restoration(percents, folds, args.hyper_iter)
    plot_restoration(restored, args.figures / "wals_restoration.png")
    suffix = "_quick" if args.quick else ""
    write_json(
        args.out / f"coalescent_wals{suffix}.json",
        {
            "command": "python experiments/coalescent_wals.py"
            + (" --quick" if args.quick else "")
            + f" --folds {folds} --hyper-iter {args.hyper_iter}"
            + " --percents "
            + " ".join(map(str, percents)),
            "seconds": time.perf_counter() - start,
            "figure_3a": tree,
            "figure_3b": restored,
        },
    )


if __name__ == "__main__":
    main()
