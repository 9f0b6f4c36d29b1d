#!/usr/bin/env python3
"""Benchmark ``BayesianRoseTree.partial_fit``: rows streamed into a fitted tree.

For each data family the script fits a tree to the first ``n0`` rows, adds the next ``k``
rows with ``partial_fit`` (in calls of ``--batch`` rows), and compares the grown tree with
the batch fit of all ``n0 + k`` rows made in the same run:

* time per inserted row (the ``partial_fit`` calls' wall time divided by ``k``; insertion
  runs on one core whatever ``n_jobs`` is);
* log evidence per row, ``log_evidence_ / (n0 + k)``, of the grown tree and of the batch
  tree (both under the model of the first fit, so that they are comparable), and their
  relative difference;
* dendrogram purity against the generating labels;
* the depth of the grown tree.

Data (seeded):

* ``binary``: d = 64 bits from a three-level hierarchy (4 super-prototypes, 12 prototypes
  with 20 % of a super-prototype's bits flipped, rows with 10 % flipped), as in
  ``bench_brt.py``; labels are the 12 prototypes. Model: ``BetaBernoulli()``.
* ``gauss``: d = 20, ten spherical Gaussian blobs (means ~ N(0, 4²), unit variance);
  labels are the blobs. Model: ``NormalInverseWishart()``.
* ``coalescent``: the ``gauss`` rows streamed into ``KingmanCoalescent()`` (Greedy-Rate1,
  Brownian diffusion, ``Lambda="auto"``, noise 0.1); the comparison is ``ln p(x, π)`` per
  row (``log_joint_``) of the grown tree and of the batch Greedy-Rate1 fit of all rows under
  the first fit's ``Lambda_``, and the batch fit's time.
* ``pydt``: ``PitmanYorDiffusionTree()`` (MCMC, defaults: hyperparameters learnt,
  ``partial_fit_sweeps=10``) on a labelled real set that no default was tuned on, breast
  cancer (scikit-learn, 569 × 30, 2 classes), standardized, ``n0 + k`` rows drawn at
  random (seeded); the first fit runs ``--pydt-iter`` sweeps (default 200) and the batch
  refit of all rows ``--pydt-batch-iter`` (default: as many), rows arrive one per call
  unless ``--batch`` is given; the
  comparison is ``ln p(X, T, t)`` per row (``log_joint_``, each tree under its own
  hyperparameters) and purity against the diagnosis.
* ``coalescent-mnist``: the same on real data, the first 3,000 rows of
  ``shared/data/mnist/mnist5k.npz`` (pixels / 255, PCA to 20 dimensions fitted on those
  rows, not standardized), 2,500 fitted and 500 streamed in file order; labels the digits.
* ``coalescent-digits``: scikit-learn's digits (1,797 × 64), standardized, in a seeded
  random order, 1,500 fitted and 297 streamed; labels the digits.

* ``digits``, ``mnist``: ``BayesianRoseTree(model=NormalInverseWishart())`` on the rows
  of ``coalescent-digits`` and ``coalescent-mnist`` (the same sizes and preprocessing;
  ``mnist`` draws its 3,000 rows from all 5,000 in a seeded random order, where
  ``coalescent-mnist`` takes the first 3,000 of the file, which is sorted by digit);
  columns constant over the first ``n0`` rows are dropped.

``--perch-src /path/to/xcluster/src`` adds PERCH (Kobren et al. 2017, the reference Python
implementation from github.com/iesl/xcluster, which is not part of rosetree; see
``peer_perch.py``) to the rose-tree families: in the same run it inserts all ``n0 + k``
rows, one at a time in the same order, and its tree's dendrogram purity (by
``rosetree.metrics``, as for rosetree's trees) and time per row are reported beside the
grown tree's and the batch tree's. PERCH needs Numba, which is no dependency of rosetree:
install it for the run only (``pip install --target /tmp/perch-deps --no-deps numba
llvmlite`` and ``PYTHONPATH=/tmp/perch-deps``).

``--join-rule`` picks how ``KingmanCoalescent.partial_fit`` places a row (a private
setting of the estimator, ``_join_rule``): ``density``, the MAP join point (the default),
or ``mass``, the branch of the largest predictive probability. ``--repair`` turns on the
re-placement of the leaves next to each new row (``_repair``, off by default);
``--no-balance`` turns off the balanced placement of a row that joins a block of nodes of
one time (``_balance``, on by default); ``--retime`` moves the nodes on each new row's
path to the root to the times that raise ln p (``_retime``, off by default);
``--rotate`` makes the best rotation that raises ln p at each node on that path
(``_rotate``, off by default).

Rows arrive in random order. The default sizes (``--small``) run in a few minutes on two
cores; ``--full`` is the issue's setting (10⁴ rows into a fitted 10⁵-row tree, the batch
fits with ``approximate=True``), which takes far longer.

Usage::

    python3 benchmarks/bench_partial_fit.py                    # --small
    python3 benchmarks/bench_partial_fit.py --full --json out.json
    python3 benchmarks/bench_partial_fit.py --n0 2000 --k 500 --batch 1
    python3 benchmarks/bench_partial_fit.py --families pydt      # 300 rows + 100, one a call
    PYTHONPATH=/tmp/perch-deps python3 benchmarks/bench_partial_fit.py \
        --families binary gauss digits mnist --perch-src /tmp/xcluster/src
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20261127
SMALL = {
    "binary": (4000, 1000),
    "gauss": (2000, 500),
    "coalescent": (4000, 1000),
    "pydt": (300, 100),
    "coalescent-mnist": (2500, 500),
    "coalescent-digits": (1500, 297),
    "mnist": (2500, 500),
    "digits": (1500, 297),
}
FULL = {
    **SMALL,
    "binary": (100_000, 10_000),
    "gauss": (100_000, 10_000),
}


def make_binary(n: int, seed: int = SEED, d: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Rows from a known hierarchy, with the prototype of each row."""
    rng = np.random.default_rng(seed)
    n_super, n_proto = 4, 12
    supers = rng.random((n_super, d)) < 0.5
    protos = supers[np.arange(n_proto) % n_super] ^ (rng.random((n_proto, d)) < 0.2)
    y = rng.integers(n_proto, size=n)
    rows = protos[y] ^ (rng.random((n, d)) < 0.1)
    return rows.astype(np.float64), y


def make_gauss(n: int, seed: int = SEED, d: int = 20, k: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Ten unit-variance Gaussian blobs in ``d`` dimensions, with the blob of each row."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=4.0, size=(k, d))
    y = rng.integers(k, size=n)
    return means[y] + rng.normal(size=(n, d)), y


def load_real(family: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first ``n`` rows of a real data set.

    ``coalescent-mnist`` and ``mnist``, ``coalescent-digits`` and ``digits``.
    """
    sys.path.insert(0, str(Path(__file__).parent))
    import real_data

    data_dir = Path(__file__).resolve().parents[2] / "shared" / "data"
    if family in ("coalescent-mnist", "mnist"):
        loaded = real_data.load("mnist20", data_dir)
        assert loaded is not None, "shared/data/mnist is missing"
        # The file is sorted by digit: `coalescent-mnist` keeps its order (its first rows
        # are the low digits), `mnist` draws n rows of all ten digits in a seeded order.
        if family == "mnist":
            pick = np.random.default_rng(SEED).permutation(len(loaded[0]))[:n]
        else:
            pick = np.arange(n)
        X, y = loaded[0][pick], loaded[1][pick]
        centred = X - X.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        return centred @ vt[:20].T, y
    loaded = real_data.load("digits", data_dir)
    assert loaded is not None, "scikit-learn is missing"
    order = np.random.default_rng(SEED).permutation(len(loaded[0]))[:n]
    return real_data.standardize(loaded[0])[order], loaded[1][order]


def run_coalescent(
    family: str,
    n0: int,
    k: int,
    batch: int,
    join_rule: str = "density",
    repair: bool = False,
    balance: bool = True,
    retime: bool = False,
    rotate: bool = False,
) -> dict[str, Any]:
    """Kingman's coalescent: fit n0 rows, stream k, fit all n0 + k in one batch."""
    import rosetree as rt

    X, y = make_gauss(n0 + k) if family == "coalescent" else load_real(family, n0 + k)
    n0 = min(n0, len(X) - k)
    est = rt.KingmanCoalescent(n_jobs=1)
    est._join_rule = join_rule
    est._repair = repair
    est._balance = balance
    est._retime = retime
    est._rotate = rotate
    t0 = time.perf_counter()
    est.fit(X[:n0])
    fit_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for lo in range(n0, n0 + k, batch):
        est.partial_fit(X[lo : lo + batch])
    stream_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    whole = rt.KingmanCoalescent(Lambda=est.Lambda_, n_jobs=1).fit(X)
    batch_s = time.perf_counter() - t0
    n = n0 + k
    check = rt.coalescent_log_joint(X, est.tree_, Lambda=est.Lambda_, noise=est.noise_)
    grown_per_row, batch_per_row = est.log_joint_ / n, whole.log_joint_ / n
    return {
        "family": family,
        "join_rule": join_rule,
        "repair": repair,
        "balance": balance,
        "retime": retime,
        "rotate": rotate,
        "n0": n0,
        "k": k,
        "batch": batch,
        "approximate": False,
        "fit_first_s": fit_first,
        "ms_per_insertion": 1e3 * stream_s / k,
        "batch_fit_s": batch_s,
        "log_evidence_per_row_stream": grown_per_row,
        "log_evidence_per_row_batch": batch_per_row,
        "relative_evidence_gap": (batch_per_row - grown_per_row) / abs(batch_per_row),
        "evidence_check_abs_diff": abs(check - est.log_joint_),
        "purity_stream": rt.metrics.dendrogram_purity(est.tree_, y),
        "purity_batch": rt.metrics.dendrogram_purity(whole.tree_, y),
        "depth_stream": int(est.tree_.depth()),
        "depth_batch": int(whole.tree_.depth()),
    }


def run_pydt(n0: int, k: int, batch: int, n_iter: int, batch_iter: int) -> dict[str, Any]:
    """The diffusion tree: MCMC fit of n0 rows, stream k, MCMC fit of all n0 + k."""
    import rosetree as rt
    from real_data import load, standardize

    loaded = load("breast_cancer", Path("."))
    if loaded is None:
        raise SystemExit("the pydt case needs scikit-learn (breast cancer data)")
    X, y = loaded
    picked = np.random.default_rng(SEED).choice(len(X), n0 + k, replace=False)
    X, y = standardize(X[picked]), y[picked]
    est = rt.PitmanYorDiffusionTree(n_iter=n_iter, random_state=0)
    t0 = time.perf_counter()
    est.fit(X[:n0])
    fit_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for lo in range(n0, n0 + k, batch):
        est.partial_fit(X[lo : lo + batch])
    stream_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    whole = rt.PitmanYorDiffusionTree(n_iter=batch_iter, random_state=0).fit(X)
    batch_s = time.perf_counter() - t0
    n = n0 + k
    check = rt.pydt_log_prior(
        est.tree_, alpha=est.alpha_, beta=est.beta_, c=est.c_
    ) + rt.pydt_log_likelihood(X, est.tree_, est.sigma2_)
    grown_per_row, batch_per_row = est.log_joint_ / n, whole.log_joint_ / n
    return {
        "family": "pydt",
        "n0": n0,
        "k": k,
        "batch": batch,
        "approximate": False,
        "n_iter": n_iter,
        "batch_n_iter": batch_iter,
        "partial_fit_sweeps": est.partial_fit_sweeps,
        "fit_first_s": fit_first,
        "ms_per_insertion": 1e3 * stream_s / k,
        "batch_fit_s": batch_s,
        "log_evidence_per_row_stream": grown_per_row,
        "log_evidence_per_row_batch": batch_per_row,
        "relative_evidence_gap": (batch_per_row - grown_per_row) / abs(batch_per_row),
        "evidence_check_abs_diff": abs(check - est.log_joint_),
        "purity_stream": rt.metrics.dendrogram_purity(est.tree_, y),
        "purity_batch": rt.metrics.dendrogram_purity(whole.tree_, y),
        "depth_stream": int(est.tree_.depth()),
        "depth_batch": int(whole.tree_.depth()),
        "hyperparameters_stream": [est.alpha_, est.beta_, est.c_, est.sigma2_],
        "hyperparameters_batch": [whole.alpha_, whole.beta_, whole.c_, whole.sigma2_],
    }


def run(
    family: str,
    n0: int,
    k: int,
    batch: int,
    approximate: bool,
    join_rule: str = "density",
    repair: bool = False,
    balance: bool = True,
    retime: bool = False,
    rotate: bool = False,
    perch: Any = None,
) -> dict[str, Any]:
    """One family: fit n0 rows, stream k, fit all n0 + k in one batch.

    With ``perch`` (the ``PNode`` class of PERCH), PERCH inserts the same n0 + k rows one
    at a time, in the same order.
    """
    import rosetree as rt

    if family.startswith("coalescent"):
        return run_coalescent(family, n0, k, batch, join_rule, repair, balance, retime, rotate)

    if family in ("binary", "gauss"):
        X, y = (make_binary if family == "binary" else make_gauss)(n0 + k)
    else:
        X, y = load_real(family, n0 + k)
        n0 = min(n0, len(X) - k)
        # Columns constant over the first rows (digits' border pixels) are left out of the
        # first fit's model, whose `model_` then has fewer features than `X`: drop them here,
        # for every fit and for PERCH alike.
        X = X[:, X[:n0].min(axis=0) < X[:n0].max(axis=0)]
    model = rt.BetaBernoulli() if family == "binary" else rt.NormalInverseWishart()
    options = {"approximate": approximate, "random_state": 0}
    est = rt.BayesianRoseTree(model=model, **options)
    t0 = time.perf_counter()
    est.fit(X[:n0])
    fit_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for lo in range(n0, n0 + k, batch):
        est.partial_fit(X[lo : lo + batch])
    stream_s = time.perf_counter() - t0
    # The batch fit of all rows under the first fit's model (its defaults written out).
    t0 = time.perf_counter()
    whole = rt.BayesianRoseTree(model=est.model_, **options).fit(X)
    batch_s = time.perf_counter() - t0
    n = n0 + k
    grown_per_row = est.log_evidence_ / n
    batch_per_row = whole.log_evidence_ / n
    check = rt.log_evidence(X, est.tree_, model=est.model_)
    peer = {}
    if perch is not None:
        import peer_perch

        nested, seconds = peer_perch.run_perch(perch, X, seed=0)
        peer = {
            "perch_ms_per_row": 1e3 * seconds / n,
            "perch_purity": rt.metrics.dendrogram_purity(nested, y),
        }
    return {
        "family": family,
        "n0": n0,
        "k": k,
        "batch": batch,
        "approximate": approximate,
        "fit_first_s": fit_first,
        "ms_per_insertion": 1e3 * stream_s / k,
        "batch_fit_s": batch_s,
        "log_evidence_per_row_stream": grown_per_row,
        "log_evidence_per_row_batch": batch_per_row,
        "relative_evidence_gap": (batch_per_row - grown_per_row) / abs(batch_per_row),
        "evidence_check_abs_diff": abs(check - est.log_evidence_),
        "purity_stream": rt.metrics.dendrogram_purity(est.tree_, y),
        "purity_batch": rt.metrics.dendrogram_purity(whole.tree_, y),
        "depth_stream": int(est.tree_.depth()),
        "depth_batch": int(whole.tree_.depth()),
        **peer,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Run the benchmark and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--small", action="store_true", help="the default sizes")
    size.add_argument("--full", action="store_true", help="10^4 rows into a 10^5-row tree")
    parser.add_argument(
        "--families",
        nargs="+",
        default=["binary", "gauss", "coalescent"],
        choices=list(SMALL),
    )
    parser.add_argument("--n0", type=int, help="rows of the first fit (all families)")
    parser.add_argument("--k", type=int, help="rows streamed in (all families)")
    parser.add_argument(
        "--batch", type=int, help="rows per partial_fit call (default 100; pydt: 1)"
    )
    parser.add_argument("--pydt-iter", type=int, default=200, help="MCMC sweeps of a pydt fit")
    parser.add_argument("--pydt-batch-iter", type=int, help="sweeps of the pydt batch refit")
    parser.add_argument(
        "--join-rule",
        choices=["density", "mass"],
        default="density",
        help="how KingmanCoalescent.partial_fit places a row",
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="KingmanCoalescent.partial_fit re-places the leaves next to each new row",
    )
    parser.add_argument(
        "--no-balance",
        action="store_true",
        help="KingmanCoalescent.partial_fit stacks rows that join a block of one time",
    )
    parser.add_argument(
        "--retime",
        action="store_true",
        help="KingmanCoalescent.partial_fit re-times the nodes on each new row's path",
    )
    parser.add_argument(
        "--rotate",
        action="store_true",
        help="KingmanCoalescent.partial_fit rotates at the nodes on each new row's path",
    )
    parser.add_argument(
        "--perch-src",
        help="an xcluster checkout (its src folder): run PERCH on the rose-tree families' rows",
    )
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    perch = None
    if args.perch_src:
        sys.path.insert(0, str(Path(__file__).parent))
        import peer_perch

        perch = peer_perch.load_perch(args.perch_src)
        peer_perch.check_conversion(perch)
    sizes = FULL if args.full else SMALL
    results = []
    for family in args.families:
        n0, k = sizes[family]
        n0, k = args.n0 or n0, args.k or k
        if family == "pydt":
            batch_iter = args.pydt_batch_iter or args.pydt_iter
            results.append(run_pydt(n0, k, args.batch or 1, args.pydt_iter, batch_iter))
            print(json.dumps(results[-1]), file=sys.stderr)
            continue
        results.append(
            run(
                family,
                n0,
                k,
                args.batch or 100,
                approximate=args.full,
                join_rule=args.join_rule,
                repair=args.repair,
                balance=not args.no_balance,
                retime=args.retime,
                rotate=args.rotate,
                perch=perch,
            )
        )
        print(json.dumps(results[-1]), file=sys.stderr)
    print(
        "| data | n0 | k | rows/call | ms per row | ln p per row, stream | ln p per row, batch "
        "| gap | purity stream | purity batch | depth stream / batch | batch refit s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['family']} | {r['n0']} | {r['k']} | {r['batch']} "
            f"| {r['ms_per_insertion']:.3f} | {r['log_evidence_per_row_stream']:.4f} "
            f"| {r['log_evidence_per_row_batch']:.4f} | {100 * r['relative_evidence_gap']:.2f} % "
            f"| {r['purity_stream']:.4f} | {r['purity_batch']:.4f} "
            f"| {r['depth_stream']} / {r['depth_batch']} | {r['batch_fit_s']:.2f} |"
        )
    if perch is not None:
        print()
        print(
            "| data | rows | purity PERCH | purity stream | purity batch "
            "| ms per row PERCH (all rows) | ms per row stream (last k) "
            "| ms per row batch (all rows) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in results:
            if "perch_purity" in r:
                print(
                    f"| {r['family']} | {r['n0'] + r['k']} | {r['perch_purity']:.4f} "
                    f"| {r['purity_stream']:.4f} | {r['purity_batch']:.4f} "
                    f"| {r['perch_ms_per_row']:.3f} | {r['ms_per_insertion']:.3f} "
                    f"| {1e3 * r['batch_fit_s'] / (r['n0'] + r['k']):.3f} |"
                )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return results


if __name__ == "__main__":
    main()
