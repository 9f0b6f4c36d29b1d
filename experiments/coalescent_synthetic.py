#!/usr/bin/env python3
"""Figure 2 of Teh, Daumé & Roy (2007): SMC and greedy inference on synthetic coalescent data.

Each data set is drawn from the model itself: a tree from Kingman's n-coalescent and
Brownian diffusion with Λ = I down its branches (the root value is 0; the flat-root model
is translation invariant). One entry, at a random row and column, is withheld; every
method is fitted to the rest with the flat root and scores the withheld value by its log
predictive density (``KingmanCoalescent.log_predictive_missing``; for SMC the particles'
weighted mixture). A fifth line is the oracle: the same density under the true tree and
Λ = I (the Gaussian conditional of the entry given its column, by generalised least
squares), the best any method could do on average.

Panels, as in the paper: (a) the number of dimensions D, (b) of observations n, (c) the
rate λ the model assumes (Λ = λI, the data keeping Λ = I), (d) the number of particles S;
the other settings at their middle values (D = 4, n = 16, λ = 1, S = 50). The paper does
not print its axis values; these are ours (D starts at 2: with D = 1 the withheld entry is
a whole row, which Greedy-Rate1 merges at time 0, predicting it with zero variance). Each
point is the mean over ``--runs`` data sets (100 in the paper), the same data sets for
every method within a panel, independent data between panels.

    python experiments/coalescent_synthetic.py --runs 100
"""

from __future__ import annotations

import json
from multiprocessing import Pool
from typing import Any

import numpy as np
import rosetree as rt
from common import parser, print_table, pyplot, save_figure, write_json

METHODS = ("greedy-rate1", "smc-priorprior", "smc-priorpost", "smc-postpost")
LABELS = {
    "greedy-rate1": "Greedy-Rate1",
    "smc-priorprior": "SMC-PriorPrior",
    "smc-priorpost": "SMC-PriorPost",
    "smc-postpost": "SMC-PostPost",
    "oracle": "true tree",
}
FLOOR = -14.0  # the plots' lower limit
MIDDLE = {"D": 4, "n": 16, "lambda": 1.0, "S": 50}
PANELS = {
    "D": [2, 3, 4, 6, 8],
    "n": [4, 8, 16, 32, 64],
    "lambda": [0.25, 0.5, 1.0, 2.0, 4.0],
    "S": [10, 25, 50, 100, 200],
}


def sample(n: int, d: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows from the n-coalescent with Brownian diffusion (Λ = I), and their tree's C.

    ``C[a, b] = t(lca(a, b)) - t(root)``, the path lengths that rows share.
    """
    lineages = [[i] for i in range(n)]
    times = np.zeros(n)  # the time each lineage was formed
    lca = np.zeros((n, n))
    # Values are drawn top-down afterwards; record merges bottom-up first.
    merges: list[tuple[list[int], list[int], float, float, float]] = []
    t = 0.0
    while len(lineages) > 1:
        m = len(lineages)
        t -= rng.exponential(1.0 / (m * (m - 1) / 2))
        a, b = sorted(rng.choice(m, 2, replace=False))
        left, right = lineages[a], lineages[b]
        for i in left:
            lca[i, right] = t
            lca[right, i] = t
        merges.append((left, right, t, times[a], times[b]))
        lineages = [x for k, x in enumerate(lineages) if k not in (a, b)] + [left + right]
        times = np.append(np.delete(times, [a, b]), t)
    root = t
    # Down the tree: each merge's value, then the leaves'.
    x = np.zeros((n, d))
    for left, right, t_merge, t_left, t_right in reversed(merges):
        for group, t_child in ((left, t_left), (right, t_right)):
            x[group] += rng.normal(scale=np.sqrt(t_child - t_merge), size=d)
    c = lca - root
    np.fill_diagonal(c, -root)
    return x, c


def oracle(x: np.ndarray, c: np.ndarray, i: int, j: int) -> float:
    """Ln p(x_ij | the rest of column j, true tree, Λ = I, flat root)."""
    rows = np.arange(len(x)) != i
    c_oo, k, x_o = c[np.ix_(rows, rows)], c[i, rows], x[rows, j]
    ones = np.ones(rows.sum())
    inv_k, inv_1 = np.linalg.solve(c_oo, k), np.linalg.solve(c_oo, ones)
    mu = (inv_1 @ x_o) / (inv_1 @ ones)
    mean = mu + inv_k @ (x_o - mu * ones)
    var = c[i, i] - k @ inv_k + (1.0 - k @ inv_1) ** 2 / (inv_1 @ ones)
    return float(-0.5 * (np.log(2 * np.pi * var) + (x[i, j] - mean) ** 2 / var))


def one_run(task: tuple[str, Any, int]) -> dict[str, float]:
    """Every method's log predictive density of the withheld entry of one data set."""
    panel, value, run = task
    s = {**MIDDLE, panel: value}
    # Independent data per panel and run; the same data for every value of λ and S.
    key = [list(PANELS).index(panel), run] + ([] if panel in ("lambda", "S") else [value])
    rng = np.random.default_rng(key)
    x, c = sample(int(s["n"]), int(s["D"]), rng)
    i, j = int(rng.integers(s["n"])), int(rng.integers(s["D"]))
    held = x.copy()
    held[i, j] = np.nan
    out = {"oracle": oracle(x, c, i, j)}
    for method in METHODS:
        est = rt.KingmanCoalescent(
            Lambda=float(s["lambda"]),
            noise=0.0,
            inference=method,
            n_particles=int(s["S"]),
            random_state=run,
            n_jobs=1,
        ).fit(held)
        out[method] = est.log_predictive_missing(x, [i], [j])
    return out


def main() -> None:
    """Run the four panels, print them, write the JSON and the figure."""
    p = parser(__doc__ or "")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--plot-only", action="store_true", help="redraw from the saved JSON")
    args = p.parse_args()
    if args.plot_only:
        saved = json.loads((args.out / "coalescent_synthetic.json").read_text(encoding="utf-8"))
        plot(saved, args.figures / "coalescent_synthetic.png")
        return
    runs = 3 if args.quick else args.runs
    tasks = [(panel, v, r) for panel, values in PANELS.items() for v in values for r in range(runs)]
    with Pool(args.processes) as pool:
        outcomes = pool.map(one_run, tasks, chunksize=4)
    results: dict[str, Any] = {
        "command": f"python experiments/coalescent_synthetic.py --runs {runs}",
        "runs": runs,
        "middle": MIDDLE,
        "panels": {},
    }
    for panel, values in PANELS.items():
        rows = []
        table: dict[str, Any] = {"values": values}
        for method in (*METHODS, "oracle"):
            means, ses = [], []
            for v in values:
                scores = [
                    o[method]
                    for (pn, pv, _), o in zip(tasks, outcomes, strict=True)
                    if pn == panel and pv == v
                ]
                means.append(float(np.mean(scores)))
                ses.append(float(np.std(scores, ddof=1) / np.sqrt(len(scores))))
            table[method] = {"mean": means, "se": ses}
            rows.append(
                [LABELS[method]] + [f"{m:.3f} ± {e:.3f}" for m, e in zip(means, ses, strict=True)]
            )
        results["panels"][panel] = table
        print(f"\n{panel}")
        print_table(["method", *map(str, values)], rows)
    if not args.quick:
        write_json(args.out / "coalescent_synthetic.json", results)
        plot(results, args.figures / "coalescent_synthetic.png")


def plot(results: dict[str, Any], path: Any) -> None:
    """Four panels of mean log predictive density with standard errors.

    Means below the axis (Greedy-Rate1's at small D) are written at its foot.
    """
    plt = pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.4), sharey=False)
    titles = {
        "D": "(a) dimensions D",
        "n": "(b) observations n",
        "lambda": "(c) model rate λ",
        "S": "(d) particles S",
    }
    for ax, (panel, table) in zip(axes, results["panels"].items(), strict=True):
        values = table["values"]
        for method in (*METHODS, "oracle"):
            style = {"color": "0.4", "linestyle": "--"} if method == "oracle" else {}
            ax.errorbar(
                values,
                table[method]["mean"],
                yerr=table[method]["se"],
                label=LABELS[method],
                capsize=2,
                marker="o",
                markersize=3,
                **style,
            )
        ax.set_ylim(FLOOR, 1.5)
        for method in METHODS:
            for v, m in zip(values, table[method]["mean"], strict=True):
                if m < FLOOR:
                    ax.annotate(
                        f"{LABELS[method]}\n{m:.0f}",
                        (v, FLOOR),
                        xytext=(0, 8),
                        textcoords="offset points",
                        ha="center",
                        fontsize=6,
                        arrowprops={"arrowstyle": "->"},
                    )
        ax.set_xscale("log", base=2)
        ax.set_xticks(values, [str(v) for v in values])
        ax.set_title(titles[panel])
    axes[0].set_ylabel("log predictive density of the held-out entry")
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
