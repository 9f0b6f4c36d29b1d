#!/usr/bin/env python3
"""Figure 6 of Knowles & Ghahramani (2011): density modelling with MCMC, PYDT against DDT.

The paper models the 10-dimensional macaque skull measurements (Adams et al. 2008; N = 228,
three splits of 200 training and 28 test rows), which are not available here. The stand-in
is the same shape: 228 rows drawn (seed 0) from the UCI optical digits
(``../shared/data/digits_optdigits/digits10.csv``, 8×8 counts 0–16, all ten classes); for
each of three splits (seeds 0, 1, 2) into 200 training and 28 test rows, the rows are
centred on the training mean and projected on the training rows' first 10 principal
components, each scaled to unit variance over the training rows (the model's Brownian
motion starts at the origin).

On each split two chains run for ``--sweeps`` sweeps from a prior draw, in chunks of
``--chunk`` sweeps (each chunk continues from the last state of the one before):

* the PYDT, learning α, β, c and σ² (starting at α = 0.5, β = 0.2, c = 1, σ² = 1);
* the DDT (α = β = 0), learning c and σ².

After each chunk the script records the sampling time so far, the log joint of the current
state, and the test log predictive density per row (§5.3) averaged over the states kept so
far (every ``--chunk // 5``-th sweep after the first quarter of the run). The baseline is a
Gaussian kernel density estimate on the training rows, its bandwidth chosen by
leave-one-out log likelihood on them. Top: the improvement of the test log predictive
density per row over the kernel estimate; bottom: the marginal likelihood of the current
tree, ln p(X | T, t, σ²) with the locations integrated out, both against sampling time
(prediction is not counted). The table gives the log joint too.

    python experiments/pydt_density.py
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from common import ROOT, parser, print_table, pyplot, save_figure, write_json
from rosetree import _core
from scipy.special import logsumexp

DATA = ROOT.parent / "shared" / "data" / "digits_optdigits" / "digits10.csv"
N_ROWS, N_TRAIN, N_DIMS = 228, 200, 10
PRIORS = {"alpha": (1.0, 1.0), "beta": (1.0, 1.0), "c": (1.0, 1.0), "precision": (1.0, 1.0)}


def load_rows() -> np.ndarray:
    """The 228 rows (seed 0) of the optical digits, pixels only."""
    raw = np.loadtxt(DATA, delimiter=",", skiprows=1)
    rows = np.random.default_rng(0).choice(raw.shape[0], N_ROWS, replace=False)
    return raw[rows, 2:]


def split(rows: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Training and test rows in the training rows' first 10 principal components."""
    order = np.random.default_rng(seed).permutation(rows.shape[0])
    train, test = rows[order[:N_TRAIN]], rows[order[N_TRAIN:]]
    mean = train.mean(axis=0)
    _, _, vt = np.linalg.svd(train - mean, full_matrices=False)
    basis = vt[:N_DIMS].T
    z_train, z_test = (train - mean) @ basis, (test - mean) @ basis
    scale = z_train.std(axis=0)
    return z_train / scale, z_test / scale


def kde_log_density(train: np.ndarray, test: np.ndarray) -> tuple[float, np.ndarray]:
    """Gaussian kernel density estimate, bandwidth by leave-one-out likelihood."""
    d = train.shape[1]

    def log_kernel(a: np.ndarray, b: np.ndarray, h: float) -> np.ndarray:
        sq = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
        return -0.5 * sq / h**2 - 0.5 * d * np.log(2 * np.pi * h**2)

    best_h, best = 0.0, -np.inf
    for h in np.geomspace(0.05, 3.0, 120):
        k = log_kernel(train, train, h)
        np.fill_diagonal(k, -np.inf)
        loo = float(np.mean(logsumexp(k, axis=1) - np.log(train.shape[0] - 1)))
        if loo > best:
            best_h, best = h, loo
    k = log_kernel(test, train, best_h)
    return best_h, logsumexp(k, axis=1) - np.log(train.shape[0])


def run_chain(
    train: np.ndarray, test: np.ndarray, pydt: bool, sweeps: int, chunk: int, seed: int
) -> list[dict[str, float]]:
    """One chain in chunks; the curve of (time, log joint, test log predictive)."""
    alpha, beta = (0.5, 0.2) if pydt else (0.0, 0.0)
    c, sigma2 = 1.0, 1.0
    learn = ["alpha", "beta", "c", "sigma2"] if pydt else ["c", "sigma2"]
    tree = None
    elapsed = 0.0
    kept: list[np.ndarray] = []  # each kept state's test log densities
    curve = []
    for k in range(sweeps // chunk):
        start = time.perf_counter()
        params = _core.PydtParams(alpha=alpha, beta=beta, c=c, sigma2=sigma2)
        chain = _core.PydtMcmcParams(
            n_iter=chunk, burn_in=0, thin=max(1, chunk // 5), learn=learn, priors=PRIORS
        )
        samples, trace, last, _, _ = _core.pydt_mcmc(
            train, tree, params, chain, seed=1000 * seed + k
        )
        elapsed += time.perf_counter() - start
        tree = last.tree
        alpha, beta, c, sigma2 = last.alpha, last.beta, last.c, last.sigma2
        if (k + 1) * chunk > sweeps // 4:
            for s in samples:
                wrapped = rt.pydt._wrap(s.tree)
                predictor = rt.pydt._predictor(train, wrapped, s.alpha, s.beta, s.c, s.sigma2, 3)
                kept.append(predictor.log_density(test))
        point: dict[str, float] = {
            "seconds": elapsed,
            "sweeps": (k + 1) * chunk,
            "log_joint": float(last.log_joint),
            "log_likelihood": float(trace[-1, 1]),
            "alpha": float(alpha),
            "beta": float(beta),
            "c": float(c),
            "sigma2": float(sigma2),
        }
        if kept:
            per_row = logsumexp(np.vstack(kept), axis=0) - np.log(len(kept))
            point["test_log_density"] = float(np.mean(per_row))
        curve.append(point)
    return curve


def main() -> None:
    """Run both chains on the three splits, print the final numbers and draw Figure 6."""
    p = parser(__doc__ or "")
    p.add_argument("--sweeps", type=int, default=10000)
    p.add_argument("--chunk", type=int, default=100)
    args = p.parse_args()
    if args.quick:
        args.sweeps, args.chunk = 100, 25
    rows = load_rows()
    results: dict[str, Any] = {"sweeps": args.sweeps, "chunk": args.chunk, "splits": []}
    table = []
    for seed in range(3):
        train, test = split(rows, seed)
        h, kde = kde_log_density(train, test)
        entry: dict[str, Any] = {"seed": seed, "kde_bandwidth": h, "kde": float(np.mean(kde))}
        for name, pydt in (("PYDT", True), ("DDT", False)):
            entry[name] = run_chain(train, test, pydt, args.sweeps, args.chunk, seed)
            last = entry[name][-1]
            table.append(
                [
                    seed,
                    name,
                    f"{last['seconds']:.1f}",
                    f"{last['log_joint']:.1f}",
                    f"{last['log_likelihood']:.1f}",
                    f"{last['test_log_density']:.3f}",
                    f"{entry['kde']:.3f}",
                    f"{last['test_log_density'] - entry['kde']:+.3f}",
                    ", ".join(f"{last[k]:.2f}" for k in ("alpha", "beta", "c", "sigma2")),
                ]
            )
        results["splits"].append(entry)
    print_table(
        [
            "split",
            "model",
            "s",
            "log joint",
            "ln p(X|T)",
            "test ll/row",
            "KDE",
            "gain",
            "α, β, c, σ²",
        ],
        table,
    )
    write_json(args.out / "pydt_density.json", results)
    figure(results, args.figures / "pydt_density.png")


def figure(results: dict[str, Any], path: Path) -> None:
    """Test log predictive gain over the KDE (top) and log joint (bottom) against time."""
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for entry in results["splits"]:
        for name, color in (("PYDT", "C3"), ("DDT", "C0")):
            curve = entry[name]
            label = name if entry["seed"] == 0 else None
            pts = [p for p in curve if "test_log_density" in p]
            top.plot(
                [p["seconds"] for p in pts],
                [p["test_log_density"] - entry["kde"] for p in pts],
                color=color,
                label=label,
            )
            bottom.plot(
                [p["seconds"] for p in curve], [p["log_likelihood"] for p in curve], color=color
            )
    top.axhline(0.0, color="grey", lw=0.8)
    top.set_ylabel("test log density − KDE (nats/row)")
    top.legend()
    bottom.set_ylabel("ln p(X | current tree)")
    bottom.set_xlabel("sampling time (s)")
    fig.suptitle("10-D PCA of optical digits, N = 200 (3 splits)")
    fig.tight_layout()
    save_figure(fig, path)


if __name__ == "__main__":
    main()
