#!/usr/bin/env python3
"""Hierarchies of Gaussian-process experts on two interlaced sine curves (BRT Figure 1.9).

The BRT chapter's section 1.6.5 fits one Gaussian process, a BHC-γ mixture of GP experts and
a BRT mixture of GP experts to two noisy interlaced sine waves, and reports ln p(D | T) of
-1037 (GP), -801 (BHC-γ: 149 non-singleton clusters, 7,527,281 partitions) and 59 (BRT: 3
non-singleton clusters, 5 partitions). The paper does not give its data or hyperparameters;
this script makes its own, so only the comparison between the models carries over.

Data (``make_data``): 150 points (the paper's 149 non-singleton BHC clusters are the internal
nodes of a binary tree over 150 leaves), 75 on each curve, x ~ Uniform(0, 10) drawn
independently for every point, y = sin(x) on curve A and y = -sin(x) on curve B, plus
Gaussian noise of standard deviation 0.05; NumPy seed 0. Rows are ``(x, y)``.

Cluster model: ``rt.GPExperts`` (eqs 1.20-1.21): a Normal-inverse-Wishart marginal over the
inputs times a squared-exponential GP over the outputs. Hyperparameters (``hyperparameters``),
the same for all three models:

- kernel fixed at values that describe the generating process: signal variance 1 (unit
  amplitude), noise variance 0.05² (the true noise), lengthscale 1.5 (``--lengthscale``;
  the BRT evidence of lengthscales 1 and 2 is reported as a sensitivity check);
- input prior from the data (``GPExperts.from_data``): μ0 = mean of x, Ψ0 = (ν0 - 2) var(x),
  with κ0 = n and ν0 = n + 2, i.e. worth n pseudo-observations of the whole data set's
  input distribution. A vague input prior (κ0 = 0.01, ν0 = 3, the library's default) is
  also fitted and reported: it cuts the input range into many local experts, because a
  rose tree's partition prior charges nothing per item for the assignment, so narrow input
  Gaussians fitted to short segments of x always look more probable than one broad one.
- γ = 0.5 for both mixtures.

The single GP is also reported with its own kernel, maximising its output marginal
likelihood (``GPExperts.fit_kernel``, type-II maximum likelihood from the fixed values).

Reported per model: ln p(D | T) (for the single GP, ln f(D) of all data as one cluster,
inputs included, and its output part alone), the number of internal nodes (the paper's
"non-singleton clusters": 149 = n - 1 for BHC, and 3 internal nodes with 5 partitions for
BRT's root over two flat clusters), the non-singleton clusters of the r ≥ 0.5 cut, the
number of tree-consistent partitions, how the root's children split the two curves, and the
mean log predictive density ln p(y | x, D, T) (eq 1.25) of 200 held-out points.

The figure has three panels like Figure 1.9: the predictive density p(y | x) as grey-scale
background, the data as crosses, and the posterior mean curves of the single GP (top) and of
the clusters at the top of the BRT tree (bottom: the root and its children).

Run ``python experiments/gp_sines.py`` (about a minute) or ``--quick`` (40 points, no
sensitivity fits).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from common import parser, print_table, pyplot, save_figure, write_json

N_POINTS = 150
NOISE_SD = 0.05
X_RANGE = (0.0, 10.0)
SEED = 0
GAMMA = 0.5
PAPER = {
    "GP": {"log_evidence": -1037},
    "BHC-gamma": {"log_evidence": -801, "non_singleton_clusters": 149, "partitions": 7527281},
    "BRT": {"log_evidence": 59, "non_singleton_clusters": 3, "partitions": 5},
}
METHODS = {
    "BHC-gamma": {"mixing": "gamma", "binary": True},
    "BRT": {"mixing": "brt", "binary": False},
}


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows ``(x, y)`` alternating between the curves, and each row's curve (0 or 1)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(*X_RANGE, size=n)
    curve = np.arange(n) % 2
    y = np.where(curve == 0, 1.0, -1.0) * np.sin(x) + NOISE_SD * rng.normal(size=n)
    return np.column_stack([x, y]), curve


def hyperparameters(
    X: np.ndarray, *, lengthscale: float, vague_inputs: bool = False
) -> rt.GPExperts:
    """The cluster model: fixed kernel, input prior from the data (see the module notes)."""
    n = X.shape[0]
    prior = {"kappa0": 0.01, "nu0": None} if vague_inputs else {"kappa0": n, "nu0": n + 2.0}
    return rt.GPExperts.from_data(
        X,
        **prior,
        signal_variance=1.0,
        lengthscale=lengthscale,
        noise_variance=NOISE_SD**2,
    )


def curve_counts(rows: list[int], curve: np.ndarray) -> list[int]:
    """How many of ``rows`` lie on curve A and on curve B."""
    return np.bincount(curve[rows], minlength=2).tolist()


def describe(tree: rt.RoseTree, curve: np.ndarray) -> dict[str, Any]:
    """Structure of a fitted tree: node and partition counts, the root's children."""
    log_r = tree.log_r
    cut, map_ = tree.cut(), tree.map_partition()
    return {
        "log_evidence": tree.log_evidence,
        "n_internal_nodes": tree.n_nodes - tree.n_leaves,
        "n_cut_clusters_non_singleton": int(np.sum(np.bincount(cut) > 1)),
        "n_map_clusters_non_singleton": int(np.sum(np.bincount(map_) > 1)),
        "n_partitions": str(tree.n_partitions()),
        "log10_n_partitions": tree.n_partitions(log10=True),
        "depth": tree.depth(),
        "root_r": math.exp(log_r[tree.root]),
        "root_children": [
            {
                "n": int(tree.sizes[c]),
                "curve_A_B": curve_counts(tree.leaves(c), curve),
                "r": math.exp(log_r[c]),
                "n_children": len(tree.children[c]),
            }
            for c in sorted(tree.children[tree.root], key=lambda c: -tree.sizes[c])
        ],
    }


def single_gp_log_density(
    model: rt.GPExperts, X: np.ndarray, xq: np.ndarray, yq: np.ndarray
) -> np.ndarray:
    """Log predictive density ln p(y | x, D) of one GP fitted to all of ``X``."""
    mean, var = model.output_predictive(X, xq)
    return -0.5 * (np.log(2 * np.pi * var) + (yq - mean) ** 2 / var)


def figure(panels: list[dict[str, Any]], X: np.ndarray, grid: tuple, path: Path) -> None:
    """Three stacked panels: predictive density background, data, posterior mean curves."""
    plt = pyplot()
    gx, gy = grid
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.0, 3.0 * len(panels)), sharex=True)
    colours = ["tab:green", "tab:red", "tab:orange", "tab:blue", "tab:purple"]
    for ax, panel in zip(axes, panels, strict=True):
        dens = panel["density"]
        im = ax.imshow(
            dens,
            origin="lower",
            aspect="auto",
            extent=(gx[0], gx[-1], gy[0], gy[-1]),
            cmap="Greys",
            vmin=0.0,
            vmax=float(np.quantile(dens, 0.995)),
            interpolation="nearest",
        )
        fig.colorbar(im, ax=ax, pad=0.01, label="p(y | x)")
        ax.plot(X[:, 0], X[:, 1], "x", color="tab:blue", ms=4, mew=0.8, alpha=0.9)
        for k, (label, mean) in enumerate(panel.get("means", [])):
            ax.plot(gx, mean, "-", color=colours[k % len(colours)], lw=1.6, label=label)
        if panel.get("means"):
            ax.legend(loc="upper right", fontsize=7, framealpha=0.8)
        ax.set_title(panel["title"], fontsize=9)
        ax.set_ylabel("y")
        ax.set_ylim(gy[0], gy[-1])
    axes[-1].set_xlabel("x")
    fig.tight_layout()
    save_figure(fig, path)


def main(argv: list[str] | None = None) -> None:
    """Fit the three models, print the table, write the JSON and the figure."""
    p = parser(__doc__)
    p.add_argument("--lengthscale", type=float, default=1.5, help="GP lengthscale (1.5)")
    args = p.parse_args(argv)
    n = 40 if args.quick else N_POINTS
    suffix = "_quick" if args.quick else ""
    X, curve = make_data(n, SEED)
    X_test, _ = make_data(200, SEED + 1)
    model = hyperparameters(X, lengthscale=args.lengthscale)

    gx = np.linspace(*X_RANGE, 200)
    gy = np.linspace(-2.0, 2.0, 161)
    qx, qy = np.repeat(gx, gy.size), np.tile(gy, gx.size)  # every (x, y) of the grid

    results: dict[str, Any] = {}
    log_f = model.log_marginal(X)
    results["GP"] = {
        "log_evidence": log_f,
        "log_evidence_outputs_only": model.log_marginal_outputs(X),
        "n_internal_nodes": 0,
        "n_partitions": "1",
        "log10_n_partitions": 0.0,
        "test_mean_log_predictive": float(
            single_gp_log_density(model, X, X_test[:, :1], X_test[:, 1]).mean()
        ),
    }
    # The single GP with its own kernel: type-II maximum likelihood of its output part.
    ml2 = model.fit_kernel(X)
    results["GP (ML-II kernel)"] = {
        "log_evidence": ml2.log_marginal(X),
        "log_evidence_outputs_only": ml2.log_marginal_outputs(X),
        "kernel": {
            "signal_variance": ml2.signal_variance,
            "lengthscale": ml2.lengthscale,
            "noise_variance": ml2.noise_variance,
        },
        "n_internal_nodes": 0,
        "n_partitions": "1",
        "log10_n_partitions": 0.0,
        "test_mean_log_predictive": float(
            single_gp_log_density(ml2, X, X_test[:, :1], X_test[:, 1]).mean()
        ),
    }
    panels = [
        {
            "title": f"Gaussian process: ln p(D) = {log_f:.1f}",
            "density": np.exp(single_gp_log_density(model, X, qx[:, None], qy))
            .reshape(gx.size, gy.size)
            .T,
            "means": [("GP posterior mean", model.posterior_mean(X, gx))],
        }
    ]

    for name, kind in METHODS.items():
        t0 = time.perf_counter()
        est = rt.BayesianRoseTree(model=model, gamma=GAMMA, **kind).fit(X)
        seconds = time.perf_counter() - t0
        tree = est.tree_
        r = describe(tree, curve)
        r["test_mean_log_predictive"] = float(
            model.predictive_density(tree, X, X_test[:, 0], X_test[:, 1]).mean()
        )
        print(f"{name}: fitted in {seconds:.1f} s")
        results[name] = r
        density = np.exp(model.predictive_density(tree, X, qx, qy)).reshape(gx.size, gy.size).T
        label = "BHC-γ" if name == "BHC-gamma" else "BRT"
        panel = {
            "title": f"{label} mixture of GP experts: ln p(D|T) = {r['log_evidence']:.1f}, "
            f"{r['n_internal_nodes']} non-singleton clusters, "
            f"{float(r['n_partitions']):,.0f} partitions",
            "density": density,
        }
        if name == "BRT":
            top = [tree.root, *sorted(tree.children[tree.root], key=lambda c: -tree.sizes[c])]
            panel["means"] = [
                (
                    ("root" if v == tree.root else "root child") + f" ({tree.sizes[v]} points)",
                    model.posterior_mean(X[tree.leaves(v)], gx),
                )
                for v in top
            ]
        panels.append(panel)

    sensitivity = []
    if not args.quick:
        for ls, vague in [(1.0, False), (2.0, False), (args.lengthscale, True)]:
            m = hyperparameters(X, lengthscale=ls, vague_inputs=vague)
            tree = rt.BayesianRoseTree(model=m, gamma=GAMMA, **METHODS["BRT"]).fit(X).tree_
            sensitivity.append(
                {
                    "lengthscale": ls,
                    "input_prior": "vague (kappa0=0.01, nu0=3)" if vague else "kappa0=n, nu0=n+2",
                    "single_gp_log_evidence": m.log_marginal(X),
                    **describe(tree, curve),
                }
            )

    rows = []
    for name, r in results.items():
        paper = PAPER.get(name, {"log_evidence": "-"})
        rows.append(
            [
                name,
                f"{r['log_evidence']:.1f}",
                paper["log_evidence"],
                r["n_internal_nodes"],
                paper.get("non_singleton_clusters", "-"),
                r.get("n_cut_clusters_non_singleton", "-"),
                r["n_partitions"]
                if len(r["n_partitions"]) < 16
                else f"1e{r['log10_n_partitions']:.1f}",
                f"{paper['partitions']:,}" if "partitions" in paper else "-",
                f"{r['test_mean_log_predictive']:.3f}",
            ]
        )
    print_table(
        [
            "model",
            "ln p(D|T)",
            "paper",
            "internal",
            "paper",
            "cut>1",
            "partitions",
            "paper",
            "test lpd",
        ],
        rows,
    )
    for name in METHODS:
        kids = " ".join(str(c["curve_A_B"]) for c in results[name]["root_children"])
        print(f"{name} root's children, points on curves (A, B): {kids}")
    if sensitivity:
        print("\nBRT sensitivity:")
        print_table(
            ["lengthscale", "input prior", "ln p(D|T)", "internal", "partitions", "root children"],
            [
                [
                    s["lengthscale"],
                    s["input_prior"],
                    f"{s['log_evidence']:.1f}",
                    s["n_internal_nodes"],
                    s["n_partitions"],
                    " ".join(str(c["curve_A_B"]) for c in s["root_children"]),
                ]
                for s in sensitivity
            ],
        )

    figure(panels, X, (gx, gy), args.figures / f"gp_sines{suffix}.png")
    write_json(
        args.out / f"gp_sines{suffix}.json",
        {
            "experiment": "BRT chapter section 1.6.5 / Figure 1.9: one GP, BHC-γ and BRT "
            "mixtures of GP experts on two interlaced noisy sine curves",
            "data": {
                "n_points": n,
                "x": f"Uniform{X_RANGE}, independent per point",
                "curves": "y = sin(x) (A, even rows), y = -sin(x) (B, odd rows)",
                "noise_sd": NOISE_SD,
                "seed": SEED,
                "test_points": "200 more from the same process, seed 1",
            },
            "hyperparameters": {
                "model": repr(model),
                "gamma": GAMMA,
                "how_chosen": "kernel fixed at the generating process (signal variance 1, "
                "noise variance = true noise sd², lengthscale from --lengthscale); input prior "
                "from the data with kappa0 = n, nu0 = n + 2",
            },
            "counts": {
                "n_internal_nodes": "internal nodes of the tree (the paper's 'non-singleton "
                "clusters': 149 = n - 1 for its binary BHC tree, 3 for BRT with 5 partitions)",
                "n_cut_clusters_non_singleton": "clusters with more than one point in the "
                "r >= 0.5 cut (RoseTree.cut)",
                "n_map_clusters_non_singleton": "the same for the MAP partition",
            },
            "results": results,
            "sensitivity_brt": sensitivity,
            "paper": PAPER,
        },
    )


if __name__ == "__main__":
    main()
