#!/usr/bin/env python3
"""Figures 5 and 7 of Knowles & Ghahramani (2011): the trees found on two data sets.

**Figure 5.** 100 points in 2-D from the density of §6.1, an equal mixture of four
Gaussians at (±1, ±1) with variance 1/8 in each coordinate (seed 0). Greedy EM (100
iterations) fits the DDT (α = β = 0, learning c and σ²) and the PYDT (from α = 0.5,
β = 0.2, learning all four). The DDT must split the four equidistant clusters by a binary
tree; the PYDT can join them at one four-way branch point. The script reports, for each
tree, its highest branch point and the clusters below each of its children (by the
component that drew each point, and whether the children are the four quadrants: a point
can fall nearer another component's centre), and draws both trees with the leaves coloured
by component.

**Figure 7.** The 33 animals × 102 binary features (``rt.datasets.load_animals``) with the
probit likelihood (σ² = 1 fixed; α, β, c learnt from α = 0.5, β = 0.2, c = 1), fitted as
in the paper by greedy EM with expectation propagation on the probit factors (at most 100
passes); the figure draws the best tree, leaves coloured by biological class. For
comparison, MCMC (2,000 sweeps, every 10th of the second half kept, the kept tree with the
highest ln p(X, T, t), EP for ln p(X | T, t)) on the same data.

    python experiments/pydt_tree_figures.py
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import rosetree as rt
from common import parser, pyplot, save_figure, write_json

CENTRES = np.array([[-1.0, -1.0], [-1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])


def four_clusters(n: int = 100, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points from the density of §6.1 and the cluster each came from."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, size=n)
    return CENTRES[labels] + rng.normal(scale=np.sqrt(1 / 8), size=(n, 2)), labels


def quadrants(X: np.ndarray) -> np.ndarray:
    """The quadrant of each point, numbered as ``CENTRES``: the cluster of its nearest centre."""
    return 2 * (X[:, 0] > 0) + (X[:, 1] > 0)


def top_split(tree: rt.Tree, labels: np.ndarray) -> dict[str, Any]:
    """The highest node with several children, and the clusters below each child."""
    node = tree.n_nodes - 1
    while len(tree.children[node]) == 1:
        node = tree.children[node][0]
    children = tree.children[node]
    parts = [sorted({int(labels[i]) for i in tree.leaves(k)}) for k in children]
    pure = all(len(p) == 1 for p in parts) and len({p[0] for p in parts}) == len(parts)
    return {
        "n_children": len(children),
        "time": float(tree.heights[node]),
        "clusters_below_each_child": parts,
        "children_are_the_clusters": pure and len(parts) == 4,
    }


def figure_5(args: Any, plt: Any) -> dict[str, Any]:
    """Greedy EM trees of the DDT and the PYDT on the four clusters."""
    X, labels = four_clusters()
    out: dict[str, Any] = {}
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, (name, alpha, beta) in zip(axes, (("DDT", 0.0, 0.0), ("PYDT", 0.5, 0.2)), strict=True):
        est = rt.PitmanYorDiffusionTree(
            alpha=alpha,
            beta=beta,
            inference="greedy-em",
            learn_hyperparameters=True,  # the paper's EM learns alpha and beta
            n_iter=10 if args.quick else 100,
            random_state=0,
        ).fit(X)
        split = top_split(est.tree_, labels)
        by_quadrant = top_split(est.tree_, quadrants(X))
        out[name] = {
            "log_joint": est.log_joint_,
            "alpha": est.alpha_,
            "beta": est.beta_,
            "c": est.c_,
            "sigma2": est.sigma2_,
            "n_branch_points": est.tree_.n_nodes - est.tree_.n_leaves,
            "top_split": split,
            "children_are_the_quadrants": by_quadrant["children_are_the_clusters"],
        }
        print(f"{name}: {out[name]}")
        rt.plot.plot_tree(est.tree_, ax=ax, orientation="top", heights="tree", max_leaf_labels=0)
        order = rt.plot.leaf_order(est.tree_)
        ax.scatter(
            range(len(order)),
            np.zeros(len(order)),
            c=[f"C{labels[i]}" for i in order],
            s=12,
            zorder=3,
        )
        ax.set_title(
            f"{name}: top branch point has {split['n_children']} branches "
            f"(α = {est.alpha_:.2f}, β = {est.beta_:.2f})"
        )
    axes[0].set_ylabel("1 − divergence time")
    fig.tight_layout()
    save_figure(fig, args.figures / "pydt_em_four_clusters.png")
    return out


def subtrees_of_classes(tree: rt.Tree, target: np.ndarray) -> dict[str, bool]:
    """Whether the members of each class are exactly the leaves of one node."""
    nodes = [set(tree.leaves(v)) for v in range(tree.n_nodes)]
    return {str(c): set(np.flatnonzero(target == c)) in nodes for c in sorted(set(target))}


def figure_7(args: Any, plt: Any) -> dict[str, Any]:
    """The animals tree from probit EM, leaves coloured by class; MCMC for comparison."""
    animals = rt.datasets.load_animals()
    start = time.perf_counter()
    est = rt.PitmanYorDiffusionTree(
        likelihood="probit",
        n_iter=5 if args.quick else 100,
        learn_hyperparameters=True,  # the paper's EM learns alpha and beta
        random_state=0,
    ).fit(animals.data)
    em_seconds = time.perf_counter() - start
    start = time.perf_counter()
    mcmc = rt.PitmanYorDiffusionTree(
        likelihood="probit",
        inference="mcmc",
        n_iter=100 if args.quick else 2000,
        thin=10,
        random_state=0,
    ).fit(animals.data)
    mcmc_seconds = time.perf_counter() - start
    classes = sorted(set(animals.target))
    colour = {c: f"C{i}" for i, c in enumerate(classes)}
    fig, ax = plt.subplots(figsize=(7, 9))
    rt.plot.plot_tree(est.tree_, list(animals.names), ax=ax, heights="tree")
    for tick in ax.get_yticklabels():
        name = tick.get_text()
        tick.set_color(colour[animals.target[list(animals.names).index(name)]])
    ax.set_title("PYDT, probit greedy EM: animals (colour: class)")
    ax.set_xlabel("1 − divergence time")
    for c in classes:
        ax.plot([], [], color=colour[c], label=c)
    ax.legend(loc="lower left", fontsize=8)
    save_figure(fig, args.figures / "pydt_animals.png")
    return {
        name: {
            "seconds": seconds,
            "log_joint": fit.log_joint_,
            "alpha": fit.alpha_,
            "beta": fit.beta_,
            "c": fit.c_,
            "n_branch_points": fit.tree_.n_nodes - fit.tree_.n_leaves,
            "classes_are_subtrees": subtrees_of_classes(fit.tree_, animals.target),
            "newick": fit.tree_.to_newick(labels=list(animals.names)),
        }
        for name, fit, seconds in (("EM", est, em_seconds), ("MCMC", mcmc, mcmc_seconds))
    }


def main() -> None:
    """Run both figures and write their numbers."""
    args = parser(__doc__ or "").parse_args()
    plt = pyplot()
    results = {"figure_5": figure_5(args, plt), "figure_7": figure_7(args, plt)}
    write_json(args.out / "pydt_tree_figures.json", results)


if __name__ == "__main__":
    main()
