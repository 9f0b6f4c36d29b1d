#!/usr/bin/env python3
r"""Pitman–Yor diffusion tree inference: rosetree's MCMC against the authors' C++ sampler.

For each n the script draws one data set from the model (``rt.sample_pydt(n, d, alpha=1,
beta=0.2, c=1, sigma2=1, random_state=0)``, d = 10), then in the same process runs

* rosetree's MCMC, ``sweeps`` sweeps with the hyperparameters fixed (each sweep makes
  n − 1 + … subtree proposals — one per non-root node on average — and slice-samples every
  divergence time once), from a draw of the prior;
* the reference sampler of Knowles & Ghahramani (github.com/davidaknowles/pydt, built by
  ``benchmarks/peer_pydt.py``), as many iterations as rosetree made subtree proposals
  (each iteration detaches one subtree and slice-samples where it goes back), from its
  own default start (a Dirichlet diffusion tree draw), hyperparameters fixed;

``--repeat`` times each (same seeds: the repeats differ only in timing noise; the fastest
is kept), and reports subtree moves per second of each, their ratio, and the log joint
each chain ends at (rosetree's ``pydt_log_prior + pydt_log_likelihood`` of both final
trees, so the two are scored by the same code, which agrees with the peer's own to
1e-11 — ``python benchmarks/peer_pydt.py --src <pydt> check``). A rosetree move is one
Metropolis–Hastings proposal; a peer move is one slice-sampling step, which evaluates
several candidate positions ("attempts", also reported, with rosetree's proposals per
second over the peer's attempts per second) and always ends in a move.

    python benchmarks/bench_pydt.py --src /path/to/pydt --sizes 100 200 400

With ``--ess`` it measures mixing instead: effective samples per second of the log joint
(``benchmarks/ess.py``: Geyer's initial monotone sequence estimator) for rosetree's two
subtree moves (``subtree_move="prior"``, one Metropolis–Hastings proposal from the
generative process, and ``"gibbs"``, the re-attachment move over every position) and the
peer, same data, same fixed hyperparameters, same run, each chain from a prior draw. Each
rosetree chain runs ``--sweeps`` sweeps (trace: one log joint per sweep); the peer runs
``peer_sweeps · n`` iterations (``--peer-sweeps``, default ``--sweeps``; trace: its
running log joint every 10 iterations). The ESS is
that of the second half of each trace, per second of the second half (rosetree: half the
wall time; the peer: the difference of its CPU-time stamps).

    python benchmarks/bench_pydt.py --ess --src /path/to/pydt --sizes 100 200 --sweeps 1000 \
        --peer-sweeps 300

With ``--em`` it instead times greedy EM (``PitmanYorDiffusionTree(inference="greedy-em")``)
at each size, with the growth exponent ``log(t_k / t_{k-1}) / log(n_k / n_{k-1})`` and the
ratio to SciPy's average linkage on the same data; the peer has no EM to compare with.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from rosetree import _core

sys.path.insert(0, str(Path(__file__).parent))
from ess import ess
from peer_pydt import build_peer, run_peer

ALPHA, BETA, C = 1.0, 0.2, 1.0
PRIORS = {"alpha": (1.0, 1.0), "beta": (1.0, 1.0), "c": (1.0, 1.0), "precision": (1.0, 1.0)}


def data(n: int, d: int) -> np.ndarray:
    """``n`` points in ``d`` dimensions drawn from the PYDT itself (seed 0)."""
    X, _ = rt.sample_pydt(n, d, alpha=ALPHA, beta=BETA, c=C, sigma2=1.0, random_state=0)
    return X


def log_joint(X: np.ndarray, tree: object) -> float:
    """The log joint of a tree under the fixed hyperparameters, by rosetree's functions."""
    return rt.pydt_log_prior(tree, alpha=ALPHA, beta=BETA, c=C) + rt.pydt_log_likelihood(X, tree)


def run_rosetree(
    X: np.ndarray, sweeps: int, seed: int = 0, subtree_move: str = "prior"
) -> dict[str, Any]:
    """``sweeps`` MCMC sweeps with fixed hyperparameters; wall time, moves and the trace."""
    start = time.perf_counter()
    params = _core.PydtParams(alpha=ALPHA, beta=BETA, c=C, sigma2=1.0)
    chain = _core.PydtMcmcParams(
        n_iter=sweeps,
        burn_in=sweeps - 1,
        learn=[],
        priors=PRIORS,
        subtree_move=subtree_move,
    )
    _, trace, last, proposals, accepted = _core.pydt_mcmc(X, None, params, chain, seed=seed)
    wall = time.perf_counter() - start
    tree = rt.pydt._wrap(last.tree)
    return {
        "wall_s": wall,
        "moves": proposals,
        "accepted": accepted,
        "log_joint": log_joint(X, tree),
        "trace": np.asarray(trace)[:, 0],
    }


def compare_mcmc(args: argparse.Namespace) -> None:
    """Moves per second of both samplers at every size; prints a Markdown table."""
    binary = build_peer(args.src, args.build_dir)
    print(
        "| n | d | rosetree sweeps | moves | rosetree moves/s | peer moves/s | ratio | "
        "peer attempts/move | ratio per attempt | rosetree acceptance | "
        "final log joint: rosetree | peer |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    run_rosetree(data(20, args.d), 2)  # warm-up
    for n in args.sizes:
        X = data(n, args.d)
        ours = min(
            (run_rosetree(X, args.sweeps) for _ in range(args.repeat)), key=lambda r: r["wall_s"]
        )
        peer = min(
            (
                run_peer(binary, X, ours["moves"], ALPHA, BETA, C, 1.0, False, seed=0)
                for _ in range(args.repeat)
            ),
            key=lambda r: r["wall_s"],
        )
        ours_rate = ours["moves"] / ours["wall_s"]
        print(
            f"| {n} | {args.d} | {args.sweeps} | {ours['moves']} | {ours_rate:.0f} | "
            f"{peer['moves_per_s']:.0f} | {ours_rate / peer['moves_per_s']:.2f} | "
            f"{peer['attempts_per_move']:.2f} | {ours_rate / peer['attempts_per_s']:.2f} | "
            f"{ours['accepted'] / ours['moves']:.2f} | "
            f"{ours['log_joint']:.1f} | {log_joint(X, peer['tree']):.1f} |",
            flush=True,
        )


def compare_mixing(args: argparse.Namespace) -> None:
    """ESS per second of the log joint: rosetree's two moves and the peer; a Markdown table."""
    binary = build_peer(args.src, args.build_dir)
    print(
        "| n | chain | sweeps | s | ESS | ESS/s | ESS/s ÷ peer | acceptance | "
        "mean log joint (2nd half) |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    run_rosetree(data(20, args.d), 2)  # warm-up
    for n in args.sizes:
        X = data(n, args.d)
        rows = []
        for move in ("prior", "gibbs"):
            res = run_rosetree(X, args.sweeps, subtree_move=move)
            half = res["trace"][args.sweeps // 2 :]
            rows.append(
                (
                    f"rosetree {move}",
                    res["wall_s"],
                    ess(half),
                    res["wall_s"] * len(half) / args.sweeps,
                    f"{res['accepted'] / res['moves']:.3f}",
                    float(np.mean(half)),
                )
            )
        peer_sweeps = args.peer_sweeps or args.sweeps
        peer = run_peer(binary, X, peer_sweeps * n, ALPHA, BETA, C, 1.0, False, seed=0)
        trace = peer["trace"]
        second = trace[len(trace) // 2 :]
        values = np.array([r["log_joint"] for r in second])
        seconds = second[-1]["cpu_s"] - second[0]["cpu_s"]
        rows.append(
            (
                "peer (C++ slice)",
                peer["wall_s"],
                ess(values),
                seconds,
                "1 (slice)",
                float(np.mean(values)),
            )
        )
        peer_rate = rows[-1][2] / rows[-1][3]
        for (name, wall, e, seconds, acc, mean), sweeps in zip(
            rows, (args.sweeps, args.sweeps, peer_sweeps), strict=True
        ):
            rate = e / seconds
            print(
                f"| {n} | {name} | {sweeps} | {wall:.1f} | {e:.1f} | {rate:.2f} | "
                f"{rate / peer_rate:.2f} | {acc} | {mean:.1f} |",
                flush=True,
            )


def time_em(args: argparse.Namespace) -> None:
    """Greedy EM's wall time at every size, with growth exponents, against SciPy.

    SciPy's average linkage on the same data is what a user would run for a tree instead.
    """
    from scipy.cluster.hierarchy import linkage

    print("| n | d | greedy EM s | exponent | passes | EM / SciPy average linkage | log joint |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    previous: tuple[int, float] | None = None
    for n in args.sizes:
        X = data(n, args.d)
        times, est = [], None
        for _ in range(args.repeat):
            # The section's setting: the rows as drawn, alpha, beta, c and sigma2 learnt.
            est = rt.PitmanYorDiffusionTree(
                alpha=ALPHA,
                beta=BETA,
                c=C,
                scale=None,
                inference="greedy-em",
                learn_hyperparameters=True,
                random_state=0,
            )
            start = time.perf_counter()
            est.fit(X)
            times.append(time.perf_counter() - start)
        t = min(times)
        scipy_times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            linkage(X, method="average")
            scipy_times.append(time.perf_counter() - start)
        growth = (
            "–"
            if previous is None
            else f"{math.log(t / previous[1]) / math.log(n / previous[0]):.2f}"
        )
        assert est is not None
        passes = len(est.trace_["objective"]) - 1
        ratio = t / min(scipy_times)
        print(
            f"| {n} | {args.d} | {t:.2f} | {growth} | {passes} | {ratio:.3g} | "
            f"{est.log_joint_:.1f} |",
            flush=True,
        )
        previous = (n, t)


def main() -> None:
    """Parse the arguments and run the chosen comparison."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", help="checkout of github.com/davidaknowles/pydt")
    ap.add_argument("--build-dir", help="where to put the peer's binary")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400])
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--sweeps", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peer-sweeps", type=int, help="--ess: the peer's sweeps (default --sweeps)")
    ap.add_argument("--em", action="store_true", help="time greedy EM instead")
    ap.add_argument("--ess", action="store_true", help="effective samples per second instead")
    args = ap.parse_args()
    if args.em:
        time_em(args)
    elif args.ess:
        compare_mixing(args)
    else:
        compare_mcmc(args)


if __name__ == "__main__":
    main()
