#!/usr/bin/env python3
"""Figures 2–4 of Knowles & Ghahramani (2011): the Pitman–Yor diffusion tree prior.

**Figure 2.** The log probability of tree structures as α varies (β = 0 and β = 0.2), with
the divergence times integrated out. Writing ``u = -ln(1 - t)``, each branch point's time
factor ``c (1 - t)^(c J - 1) dt`` (eq 12) is ``c exp(-c J u) du``, and integrating the
times from the leaves up (each parent earlier than its children) gives, for a structure T,

    P(T) = prod_b S_b / (sum of J over the branch points in b's subtree, b included),

``S_b`` the structure factor of eq 7 (with the erratum) — independent of c. The script
checks this against numerical integration of ``rt.pydt_log_prior`` for three points before
drawing. The structures: a binary tree and the star with one multi-way branch point, for 3
and for 4 points (the balanced binary tree for 4).

**Figures 3–4.** Draws from the generative process (``rt.sample_pydt``, c = 1, σ² = 1,
β = 0): the tree of N = 20 points with α = 1, and N = 1,000 points in 2-D for several α
(more α, more multi-way branching and more visible clusters). α stops at 1.5: at α = 2
with c = 1, some of 1,000 points diverge so close to t = 1 that double precision cannot
store the time (``sample_pydt`` then raises ``NumericalError``).

    python experiments/pydt_figures.py
"""

from __future__ import annotations

from typing import Any

import numpy as np
import rosetree as rt
from common import parser, pyplot, save_figure, write_json
from scipy import integrate
from scipy.special import gammaln

STRUCTURES: dict[str, Any] = {
    "3 points, binary": [[0, 1], 2],
    "3 points, 3-way": [0, 1, 2],
    "4 points, balanced binary": [[0, 1], [2, 3]],
    "4 points, 4-way": [0, 1, 2, 3],
}


def w(m: np.ndarray | int, alpha: float, beta: float) -> Any:
    """Γ(m - β) / Γ(m + 1 + α)."""
    return np.exp(gammaln(np.asarray(m) - beta) - gammaln(np.asarray(m) + 1 + alpha))


def harmonic(n: int, alpha: float, beta: float) -> float:
    """H_n = w_1 + ... + w_n (0 for n = 0)."""
    return float(np.sum(w(np.arange(1, n + 1), alpha, beta))) if n > 0 else 0.0


def log_structure(nested: Any, alpha: float, beta: float) -> float:
    """The log probability of a structure, its times integrated out (module docstring)."""

    def visit(node: Any) -> tuple[int, float, float]:
        """(leaves below, sum of J in the subtree, log of the product so far)."""
        if isinstance(node, int):
            return 1, 0.0, 0.0
        parts = [visit(child) for child in node]
        counts = [p[0] for p in parts]
        m, k = sum(counts), len(counts)
        log_s = float(
            sum(np.log(alpha + (j - 1) * beta) for j in range(3, k + 1))
            + sum(gammaln(n - beta) for n in counts)
            - gammaln(m + alpha)
            - (k - 1) * gammaln(1 - beta)
        )
        j_b = harmonic(m - 1, alpha, beta) - sum(harmonic(n - 1, alpha, beta) for n in counts)
        j_sub = j_b + sum(p[1] for p in parts)
        return m, j_sub, log_s - np.log(j_sub) + sum(p[2] for p in parts)

    return visit(nested)[2]


def check_against_quadrature(alpha: float, beta: float, c: float) -> None:
    """The closed form against ∫ exp(pydt_log_prior) for the 3-point structures."""

    def star(t: float) -> float:
        tree = {"t": t, "children": [0, 1, 2]}
        return float(np.exp(rt.pydt_log_prior(tree, alpha=alpha, beta=beta, c=c)))

    def binary(t_inner: float, t_root: float) -> float:
        tree = {"t": t_root, "children": [{"t": t_inner, "children": [0, 1]}, 2]}
        return float(np.exp(rt.pydt_log_prior(tree, alpha=alpha, beta=beta, c=c)))

    got_star = integrate.quad(star, 0, 1)[0]
    got_binary = integrate.dblquad(binary, 0, 1, lambda t: t, 1)[0]
    for got, nested in ((got_star, [0, 1, 2]), (got_binary, [[0, 1], 2])):
        want = np.exp(log_structure(nested, alpha, beta))
        assert abs(got - want) < 1e-6 * want, (alpha, beta, nested, got, want)
    # The four 3-point structures (three labelled binary trees and the star) sum to one.
    assert abs(3 * got_binary + got_star - 1.0) < 1e-6


def figure_2(path: Any) -> dict[str, Any]:
    """Structure log probabilities against α, after checking the closed form."""
    for alpha, beta, c in ((0.5, 0.0, 1.0), (1.5, 0.2, 0.7), (0.2, 0.6, 2.0)):
        check_against_quadrature(alpha, beta, c)
    alphas = np.linspace(0.02, 5.0, 250)
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    out: dict[str, Any] = {"alpha": alphas.tolist()}
    for ax, beta in zip(axes, (0.0, 0.2), strict=True):
        for (name, nested), style in zip(STRUCTURES.items(), ("-", "--", "-", "--"), strict=True):
            values = [log_structure(nested, a, beta) for a in alphas]
            out[f"{name}, beta={beta}"] = values
            color = "C0" if name.startswith("3") else "C3"
            ax.plot(alphas, values, style, color=color, label=name)
        ax.set_title(f"β = {beta}")
        ax.set_xlabel("α")
    axes[0].set_ylabel("log probability of the structure")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    return out


def figure_3(path: Any) -> None:
    """One draw of 20 points in 1-D, its tree drawn with the divergence times."""
    X, tree = rt.sample_pydt(n=20, d=1, alpha=1.0, beta=0.0, c=1.0, sigma2=1.0, random_state=3)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    rt.plot.plot_tree(tree, [f"{v:.2f}" for v in X[:, 0]], ax=ax, orientation="top", heights="tree")
    ax.set_ylabel("1 − divergence time")
    ax.set_title("a PYDT draw, N = 20, α = 1, β = 0, c = 1 (leaves labelled by their value)")
    save_figure(fig, path)


def figure_4(path: Any) -> None:
    """1,000 points in 2-D for several α."""
    alphas = (0.0, 0.5, 1.0, 1.5)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(alphas), figsize=(14, 3.6))
    for ax, alpha in zip(axes, alphas, strict=True):
        X, _ = rt.sample_pydt(n=1000, d=2, alpha=alpha, beta=0.0, c=1.0, sigma2=1.0, random_state=0)
        ax.scatter(X[:, 0], X[:, 1], s=2)
        ax.set_title(f"α = {alpha}")
        ax.set_aspect("equal")
    fig.suptitle("N = 1,000 draws from the PYDT in 2-D (β = 0, c = 1, σ² = 1)")
    fig.tight_layout()
    save_figure(fig, path)


def main() -> None:
    """Draw the three figures and save Figure 2's values."""
    p = parser(__doc__ or "")
    args = p.parse_args()
    results = {
        "command": "python experiments/pydt_figures.py",
        "figure_2": figure_2(args.figures / "pydt_structures.png"),
    }
    figure_3(args.figures / "pydt_sample_20.png")
    figure_4(args.figures / "pydt_samples_1000.png")
    if not args.quick:
        write_json(args.out / "pydt_figures.json", results)


if __name__ == "__main__":
    main()
