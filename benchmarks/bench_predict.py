#!/usr/bin/env python3
"""Benchmark prediction under a fitted tree (BRT eqs 1.24-1.25) against NumPy + BLAS.

What is measured
----------------
A greedy BRT with ``BetaBernoulli(1, 1)`` clusters is fitted to ``n`` rows of the
``binary`` data of ``bench_brt.py`` (64 bits from a known hierarchy), complete and with 10%
of the entries missing (NaN). Then, on ``m`` new rows (complete, or with 10% missing):

* ``est.score_samples(new)`` (eq 1.25: the log predictive probability of each new row, a
  sum over every node S of the tree of ``w_S f(D_S ∪ {x}) / f(D_S)``), timed, against
* the same sum written with NumPy and SciPy: node counts from a sparse node-by-leaf
  membership matrix, the log predictive of every (row, node) pair as two dense matrix
  products (BLAS), and ``scipy.special.logsumexp`` over nodes. This is what a user would
  write on top of ``RoseTree.leaves`` and ``RoseTree.log_cluster_weights``; its
  memory is ``m × n_nodes`` floats, rosetree's a few rows at a time.

The two must agree to 1e-8 (checked, and printed), so the benchmark is also a test of
eq 1.25. Both get the best of ``--repeat`` runs. rosetree uses ``--n-jobs`` threads; NumPy's
BLAS uses whatever threads it was built with (``OPENBLAS_NUM_THREADS`` etc.).

Compare the **ratio** (rosetree / NumPy), not the seconds: the machines are shared.

Usage::

    python3 benchmarks/bench_predict.py              # n = 1000, 4000; m = 2000
    python3 benchmarks/bench_predict.py --quick      # n = 500, m = 500
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_brt import header, make_binary


def numpy_score_samples(tree: Any, X: np.ndarray, new: np.ndarray, a: float, b: float):
    """Eq 1.25 for beta-Bernoulli clusters with NumPy / SciPy (NaN = missing)."""
    import scipy.sparse as sp
    from scipy.special import logsumexp

    node, leaf = [], []
    for v in range(tree.n_nodes):
        members = tree.leaves(v)
        node += [v] * len(members)
        leaf += members
    member = sp.csr_matrix((np.ones(len(node)), (node, leaf)), shape=(tree.n_nodes, len(X)))
    seen = ~np.isnan(X)
    ones = np.asarray(member @ np.where(seen, X, 0.0))
    total = np.asarray(member @ seen.astype(float))
    log_one = np.log(a + ones) - np.log(a + b + total)
    log_zero = np.log(b + total - ones) - np.log(a + b + total)
    new_seen = ~np.isnan(new)
    x1 = np.where(new_seen, new, 0.0)
    x0 = new_seen - x1
    log_f = x1 @ log_one.T + x0 @ log_zero.T
    return logsumexp(log_f + tree.log_cluster_weights()[None, :], axis=1)


def best_of(repeat: int, call: Any) -> tuple[float, Any]:
    """The best time of ``repeat`` calls, and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = call()
        best = min(best, time.perf_counter() - t)
    return best, out


def run(n: int, m: int, missing: bool, args: argparse.Namespace) -> dict[str, Any]:
    """Fit on ``n`` rows, then time and compare both ways of scoring ``m`` new rows."""
    import rosetree as rt

    rng = np.random.default_rng([n, m, int(missing)])
    X = make_binary(n)
    new = make_binary(m, seed=n + 1)
    if missing:
        X[rng.random(X.shape) < 0.1] = np.nan
        new[rng.random(new.shape) < 0.1] = np.nan
    est = rt.BayesianRoseTree(n_jobs=args.n_jobs).fit(X)
    t_rt, ours = best_of(args.repeat, lambda: est.score_samples(new))
    t_np, theirs = best_of(args.repeat, lambda: numpy_score_samples(est.tree_, X, new, 1, 1))
    err = float(np.max(np.abs(ours - theirs)))
    if not err <= 1e-8:
        raise SystemExit(f"rosetree and NumPy disagree by {err:g} (n={n}, missing={missing})")
    return {
        "n": n,
        "m": m,
        "missing": missing,
        "n_nodes": est.tree_.n_nodes,
        "rosetree_s": t_rt,
        "numpy_s": t_np,
        "ratio": t_rt / t_np,
        "max_abs_diff": err,
    }


def main(argv: list[str] | None = None) -> int:
    """Run every case and print (and optionally store) the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="*", default=[1000, 4000], help="training rows")
    p.add_argument("--new", type=int, default=2000, help="new rows scored (default 2000)")
    p.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    p.add_argument("--n-jobs", type=int, default=None, help="rosetree threads (default: all)")
    p.add_argument("--quick", action="store_true", help="n = 500, 500 new rows")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = p.parse_args(argv)
    sizes, m = ([500], 500) if args.quick else (args.sizes, args.new)
    info = header(args)
    print(json.dumps(info, indent=1))
    print(f"{'n':>6} {'missing':>8} {'nodes':>6} {'rosetree s':>11} {'NumPy s':>9} {'ratio':>6}")
    rows = []
    for n in sizes:
        for missing in (False, True):
            r = run(n, m, missing, args)
            rows.append(r)
            print(
                f"{n:>6} {'10%' if missing else 'none':>8} {r['n_nodes']:>6} "
                f"{r['rosetree_s']:>11.3f} {r['numpy_s']:>9.3f} {r['ratio']:>6.2f}",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps({"header": info, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
