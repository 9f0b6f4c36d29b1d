"""Hyperparameter learning of the rose tree: time and evidence reached, two builds interleaved.

``BayesianRoseTree(model=..., learn_hyperparameters=True).fit(X)`` on a few hundred rows of
data sets that ship with scikit-learn, one case per built-in model. Each fit runs in a
fresh interpreter; with ``--baseline PATH`` (a directory holding another build's
``rosetree`` package) the two builds alternate, run by run, so that both see the same load.

    python benchmarks/bench_learning.py --baseline /path/to/other/python --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

CASES = ("digits-binary", "digits-counts", "cancer-normal-gamma", "cancer-wishart")


def data(case: str, rows: int) -> tuple[np.ndarray, object]:
    """The rows of ``case`` and the model to learn."""
    import rosetree as rt
    from sklearn.datasets import load_breast_cancer, load_digits

    if case.startswith("digits"):
        X = load_digits().data[:rows]
        if case == "digits-binary":
            return (X > 7).astype(float), rt.BetaBernoulli()
        return X, rt.DirichletMultinomial()
    X = load_breast_cancer().data[:rows]
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    if case == "cancer-normal-gamma":
        return X, rt.NormalGamma()
    return X[:, :8], rt.NormalInverseWishart()


def worker(case: str, rows: int) -> None:
    """Fit ``case`` once and print its time and evidence as JSON."""
    import rosetree as rt

    X, model = data(case, rows)
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    est = rt.BayesianRoseTree(model=model, learn_hyperparameters=True).fit(X)
    seconds = time.perf_counter() - start
    out = {
        "seconds": seconds,
        "log_evidence": est.log_evidence_,
        "steps": len(est.evidence_trace_),
        "start": est.evidence_trace_[0],
    }
    print(json.dumps(out))


def run(path: str, case: str, rows: int) -> dict[str, float]:
    """:func:`worker` in a fresh interpreter that imports ``rosetree`` from ``path``."""
    env = {**os.environ, "PYTHONPATH": path}
    cmd = [sys.executable, __file__, "--worker", case, "--rows", str(rows)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Run every case under every build, alternating, and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--baseline", help="another build's python/ directory")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.rows)
        return
    here = str(Path(__file__).resolve().parent.parent / "python")
    builds = {"new": here}
    if args.baseline:
        builds = {"baseline": args.baseline, **builds}
    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    for rep in range(args.repeat):
        for case in args.cases.split(","):
            # Alternate which build goes first.
            order = list(builds.items())[:: 1 if rep % 2 == 0 else -1]
            for name, path in order:
                r = run(path, case, args.rows)
                results.setdefault((case, name), []).append(r)
                print(f"{case} {name}: {r}", file=sys.stderr, flush=True)
    print("| case | build | median s | runs s | start ln p | learnt ln p | steps |")
    print("|---|---|---:|---|---:|---:|---:|")
    for (case, name), runs in results.items():
        secs = [r["seconds"] for r in runs]
        print(
            f"| {case} | {name} | {np.median(secs):.2f} | "
            f"{', '.join(f'{s:.2f}' for s in secs)} | {runs[0]['start']:.3f} | "
            f"{runs[0]['log_evidence']:.3f} | {runs[0]['steps']} |"
        )
    if args.baseline:
        for case in args.cases.split(","):
            old = np.median([r["seconds"] for r in results[(case, "baseline")]])
            new = np.median([r["seconds"] for r in results[(case, "new")]])
            print(f"{case}: baseline / new = {old / new:.2f}")


if __name__ == "__main__":
    main()
