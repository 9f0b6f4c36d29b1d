#!/usr/bin/env python3
"""Optimality of greedily found trees: Δ_l of BRT eq 1.31 (the BRT chapter's Figure 1.7).

For every data-set size l = 2 … 8 and each of ``N_DATASETS`` seeded data sets:

1. draw a rose tree over the l items uniformly from all rose trees with l labelled leaves
   (1, 4, 26, 236, 2752, 39208, 660032 of them for l = 2 … 8; every internal node has two
   or more children);
2. draw a partition from that tree's BRT mixture: top-down, a node's leaves form one cluster
   with probability π_T = 1 − (1 − γ)^(n_c − 1) (eq 1.7), otherwise its children are visited,
   which gives partition φ the weight m(φ | T) of eq 1.6;
3. per cluster, draw θ_d ~ Beta(α, β) for each of the 64 features and the cluster's rows
   x_d ~ Bernoulli(θ_d);
4. fit greedy BRT (``mixing="brt"``), BHC-γ (``binary=True, mixing="gamma"``) and BHC-DP
   (``binary=True, mixing="dp"``), and find the maximum-likelihood rose tree T* under BRT by
   exhaustive search (``rt.optimal_tree``).

Δ_l = (1 / l n) Σ_i log2 p(D_i | T*_i) − log2 p(D_i | T_i) (eq 1.31) is reported for each
method with its standard error over the data sets (each method's p(D | T) under its own
mixing rule; BHC-DP's is the tree's marginal likelihood, not the DP lower bound), and how
often greedy BRT finds the optimum: its log evidence equals that of T* within a relative
1e-9. Generation and fitting use the same hyperparameters (``HYPERPARAMETERS`` below).

A second run repeats l = 8 with the clusters' prior Beta(a, a) for a few a (the same prior
again for generation and fitting), to show how the rate at which greedy BRT finds T* depends
on how separable the clusters are.

Run ``python experiments/delta_l.py`` (a few seconds) or with ``--quick``.
"""

from __future__ import annotations

import math
import time
from functools import cache
from pathlib import Path

import numpy as np
import rosetree as rt
from common import parser, print_table, pyplot, save_figure, write_json

SIZES = range(2, 9)
N_DATASETS = 100
N_FEATURES = 64
SEED = 20100
#: Used both to generate the data and to fit every method.
HYPERPARAMETERS = {"alpha": 1.0, "beta": 1.0, "gamma": 0.5, "dp_alpha": 1.0}
#: Relative tolerance on log evidence for "greedy BRT found the optimum".
FOUND_RTOL = 1e-9
#: Cluster priors Beta(a, a) of a second run at the largest l only: the larger a, the closer
#: the clusters' θ lie to 1/2 and the harder the clusters are to tell apart.
SENSITIVITY_A = (1.0, 2.0, 5.0, 20.0)
METHODS = {
    "BRT": {"mixing": "brt", "binary": False},
    "BHC-gamma": {"mixing": "gamma", "binary": True},
    "BHC-DP": {"mixing": "dp", "binary": True},
}


# ---------------------------------------------------------------- uniform random rose trees
@cache
def n_trees(n: int) -> int:
    """Rose trees with n labelled leaves (internal nodes have ≥ 2 children)."""
    # A tree over n ≥ 2 items is a root whose children split the items into ≥ 2 blocks; the
    # block holding the first item has b < n items, the rest form a forest.
    if n == 1:
        return 1
    return sum(math.comb(n - 1, b - 1) * n_trees(b) * n_forests(n - b) for b in range(1, n))


@cache
def n_forests(m: int) -> int:
    """Sets of rose trees whose leaves are m labelled items (one tree or more)."""
    if m == 0:
        return 1
    return sum(math.comb(m - 1, b - 1) * n_trees(b) * n_forests(m - b) for b in range(1, m + 1))


def _first_block(items: list[int], sizes: range, total: int, rng: np.random.Generator):
    """The block holding ``items[0]`` and the rest, drawn in proportion to their counts."""
    n = len(items)
    weights = [math.comb(n - 1, b - 1) * n_trees(b) * n_forests(n - b) for b in sizes]
    assert sum(weights) == total
    b = int(sizes[rng.choice(len(weights), p=np.array(weights, dtype=float) / total)])
    rest = list(items[1:])
    pick = set(rng.choice(len(rest), size=b - 1, replace=False).tolist()) if b > 1 else set()
    block = [items[0]] + [x for k, x in enumerate(rest) if k in pick]
    return block, [x for k, x in enumerate(rest) if k not in pick]


def random_tree(items: list[int], rng: np.random.Generator):
    """A rose tree over ``items`` drawn uniformly, as nested lists."""
    if len(items) == 1:
        return items[0]
    block, rest = _first_block(items, range(1, len(items)), n_trees(len(items)), rng)
    return [random_tree(block, rng), *random_forest(rest, rng)]


def random_forest(items: list[int], rng: np.random.Generator) -> list:
    """One or more rose trees over ``items`` (empty for none), drawn uniformly."""
    if not items:
        return []
    block, rest = _first_block(items, range(1, len(items) + 1), n_forests(len(items)), rng)
    return [random_tree(block, rng), *random_forest(rest, rng)]


# ---------------------------------------------------------------- data from the BRT mixture
def leaves_of(tree) -> list[int]:
    """Items of a nested-list tree."""
    return [tree] if isinstance(tree, int) else [x for c in tree for x in leaves_of(c)]


def sample_partition(tree, gamma: float, rng: np.random.Generator) -> list[list[int]]:
    """A partition drawn from m(φ | T) (eq 1.6) with the BRT rule π_T (eq 1.7)."""
    if isinstance(tree, int):
        return [[tree]]
    if rng.random() < 1.0 - (1.0 - gamma) ** (len(tree) - 1):
        return [sorted(leaves_of(tree))]
    return [block for child in tree for block in sample_partition(child, gamma, rng)]


def sample_dataset(n_items: int, rng: np.random.Generator, hp: dict) -> np.ndarray:
    """Binary data of ``n_items`` rows from the BRT mixture of a uniform random rose tree."""
    tree = random_tree(list(range(n_items)), rng)
    partition = sample_partition(tree, hp["gamma"], rng)
    X = np.empty((n_items, N_FEATURES))
    for block in partition:
        theta = rng.beta(hp["alpha"], hp["beta"], size=N_FEATURES)
        X[block] = rng.random((len(block), N_FEATURES)) < theta
    return X


# ---------------------------------------------------------------- the experiment
def run(sizes: range, n_datasets: int, hp: dict) -> tuple[list[dict], float]:
    """Δ_l of the three methods and BRT's rate of finding T*, for every size in ``sizes``.

    Also returns the mean time of ``rt.optimal_tree`` at the largest size, in seconds.
    """
    model = rt.BetaBernoulli(alpha=hp["alpha"], beta=hp["beta"])
    results = []
    optimal_seconds = 0.0
    for n_items in sizes:
        opt = np.empty(n_datasets)
        found = {name: np.empty(n_datasets) for name in METHODS}
        for i in range(n_datasets):
            rng = np.random.default_rng([SEED, n_items, i])
            X = sample_dataset(n_items, rng, hp)
            t0 = time.perf_counter()
            opt[i] = rt.optimal_tree(X, model=model, mixing="brt", gamma=hp["gamma"]).log_evidence
            if n_items == max(sizes):
                optimal_seconds += time.perf_counter() - t0
            for name, kind in METHODS.items():
                est = rt.BayesianRoseTree(
                    model, gamma=hp["gamma"], dp_alpha=hp["dp_alpha"], **kind
                ).fit(X)
                found[name][i] = est.log_evidence_
        gap = opt - found["BRT"]
        if np.any(gap < -FOUND_RTOL * np.abs(opt)):
            raise RuntimeError(f"l={n_items}: greedy BRT beat the exhaustive optimum")
        row: dict = {"l": n_items, "n_datasets": n_datasets, "delta_bits": {}}
        for name, ev in found.items():
            per_item = (opt - ev) / (n_items * math.log(2.0))
            row["delta_bits"][name] = {
                "mean": rt.excess_bits(opt, ev, n_items),
                "se": float(per_item.std(ddof=1) / math.sqrt(n_datasets)),
            }
        n_found = int(np.sum(gap <= FOUND_RTOL * np.abs(opt)))
        row["brt_found_optimum"] = {"count": n_found, "fraction": n_found / n_datasets}
        results.append(row)
    return results, optimal_seconds / n_datasets


def sensitivity(n_items: int, n_datasets: int, hp: dict) -> list[dict]:
    """:func:`run` at one size for each cluster prior Beta(a, a) of ``SENSITIVITY_A``."""
    out = []
    for a in SENSITIVITY_A:
        hp_a = {**hp, "alpha": a, "beta": a}
        (row,), _ = run(range(n_items, n_items + 1), n_datasets, hp_a)
        out.append({"hyperparameters": hp_a, **row})
    return out


def figure(results: list[dict], path: Path) -> None:
    """Δ_l against l with standard-error bars, one line per method (as Figure 1.7)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    ls = [r["l"] for r in results]
    styles = {"BRT": ("C0", "o"), "BHC-gamma": ("C1", "s"), "BHC-DP": ("C2", "^")}
    labels = {"BRT": "BRT", "BHC-gamma": "BHC-γ", "BHC-DP": "BHC-DP"}
    for k, name in enumerate(METHODS):
        mean = [r["delta_bits"][name]["mean"] for r in results]
        se = [r["delta_bits"][name]["se"] for r in results]
        x = np.array(ls) + (k - 1) * 0.06  # small offsets so error bars do not overlap
        c, m = styles[name]
        ax.errorbar(x, mean, yerr=se, color=c, marker=m, ms=4, capsize=3, label=labels[name])
    ax.axhline(0.0, color="0.6", lw=0.8, zorder=0)
    ax.set_xticks(ls)
    ax.set_xlabel("number of data items l")
    ax.set_ylabel(r"$\Delta_l$ (bits per data item)")
    ax.set_title("Excess code length relative to the optimal BRT (eq 1.31)", fontsize=9)
    ax.legend(frameon=False)
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> None:
    """Run the experiment, print the tables, write the JSON and the figure."""
    args = parser(__doc__).parse_args(argv)
    sizes, n_datasets = (range(2, 6), 10) if args.quick else (SIZES, N_DATASETS)
    start = time.perf_counter()
    results, optimal_seconds = run(sizes, n_datasets, HYPERPARAMETERS)
    rows = []
    for r in results:
        d = r["delta_bits"]
        cell = [f"{d[n]['mean']:.5f} ± {d[n]['se']:.5f}" for n in METHODS]
        rows.append([r["l"], *cell, f"{100 * r['brt_found_optimum']['fraction']:.0f}%"])
    print_table(["l", "Δ BRT", "Δ BHC-γ", "Δ BHC-DP", "BRT = T*"], rows)
    l_sens = max(sizes)
    sens = sensitivity(l_sens, n_datasets, HYPERPARAMETERS)
    print(f"\nl = {l_sens}, clusters' prior Beta(a, a) for generation and fitting:")
    print_table(
        ["a", "Δ BRT", "Δ BHC-γ", "Δ BHC-DP", "BRT = T*"],
        [
            [
                r["hyperparameters"]["alpha"],
                *(f"{r['delta_bits'][n]['mean']:.5f}" for n in METHODS),
                f"{100 * r['brt_found_optimum']['fraction']:.0f}%",
            ]
            for r in sens
        ],
    )
    print(
        f"\nrt.optimal_tree at l = {max(sizes)}: {1e3 * optimal_seconds:.2f} ms per data set; "
        f"whole run {time.perf_counter() - start:.1f} s"
    )
    write_json(
        args.out / ("delta_l_quick.json" if args.quick else "delta_l.json"),
        {
            "experiment": "BRT chapter section 1.6.1 / Figure 1.7: Δ_l (eq 1.31) of greedy "
            "BRT, BHC-γ and BHC-DP relative to the exhaustive maximum-likelihood BRT tree",
            "data": f"per data set: a uniform random rose tree over l items, a partition from "
            f"its BRT mixture (eq 1.6, π of eq 1.7), θ ~ Beta(α, β) per cluster and feature, "
            f"{N_FEATURES} binary features per item",
            "hyperparameters": {**HYPERPARAMETERS, "n_features": N_FEATURES},
            "hyperparameters_note": "used both to generate the data and to fit every method; "
            "BetaBernoulli(alpha, beta) clusters, γ for BRT and BHC-γ, dp_alpha for BHC-DP",
            "seed": SEED,
            "n_datasets": n_datasets,
            "found_optimum_rule": f"|ln p(D|T_BRT) - ln p(D|T*)| <= {FOUND_RTOL} |ln p(D|T*)|",
            "delta_units": "bits per data item; mean over data sets, se = standard error",
            "results": results,
            "sensitivity_note": f"l = {l_sens} again with BetaBernoulli(a, a) for generation "
            "and fitting, other hyperparameters unchanged",
            "sensitivity": sens,
            "paper": {"brt_found_optimum_fraction_at_l8": 0.70},
        },
    )
    figure(results, args.figures / ("delta_l_quick.png" if args.quick else "delta_l.png"))


if __name__ == "__main__":
    main()
