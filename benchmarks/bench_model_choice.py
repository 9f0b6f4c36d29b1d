#!/usr/bin/env python3
r"""Which rule picks the real-valued cluster model whose rose tree is purer.

``BayesianRoseTree(model="auto")`` chooses among :class:`rosetree.NormalGamma` (one
precision per feature), :class:`rosetree.NormalInverseWishart` (full covariance) and
``NormalGamma(shared_precision=True)`` (one precision for all features) on real-valued data,
each where it is a candidate (the full covariance with at least five rows per column, the
shared precision on columns in one unit). This benchmark fits every model's greedy trees
(rose trees, and binary trees for reference) on labelled real-valued sets (``real_data.py``)
and asks, subset by subset, whether a rule picked, among the candidates, the model of the
purer tree (dendrogram purity against the classes):

* ``structure`` (the default): :math:`\ln p(D \mid T_m) - \ln f_m(D)`, the log Bayes factor
  of each model's tree against one cluster;
* ``evidence``: :math:`\ln p(D \mid T_m)`;
* ``cv``: mean held-out log predictive density (``score``) over 4 folds.

The rosetree fits take the raw columns (their default priors are set from the columns'
means and variances, so the trees do not depend on units); SciPy's average linkage takes
standardized columns and is shown for reference. ``cars`` is the held-out set.

Usage::

    python benchmarks/bench_model_choice.py --subsets 6 --json benchmarks/model_choice.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from bench_brt import DATA_DIR
from real_data import REAL_SETS, load, standardize, subset
from rosetree._selection import candidates_for
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import pdist

MODELS = {
    "NormalGamma": rt.NormalGamma(),
    "NormalInverseWishart": rt.NormalInverseWishart(),
    "NormalGamma(shared_precision=True)": rt.NormalGamma(shared_precision=True),
}
RULES = ("structure", "evidence", "cv")


def cv_score(model: rt.ClusterModel, X: np.ndarray, folds: int = 4) -> float:
    """Mean held-out log predictive density of the rose tree over ``folds`` folds."""
    order = np.random.default_rng(0).permutation(len(X))
    total = 0.0
    for held in np.array_split(order, folds):
        train = np.setdiff1d(order, held)
        est = rt.BayesianRoseTree(model=model).fit(X[train])
        total += float(est.score_samples(X[held]).sum())
    return total / len(X)


def one_subset(X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Purity of each model's trees and each rule's score on one subset."""
    out: dict[str, Any] = {
        "average": rt.dendrogram_purity(linkage(pdist(standardize(X)), "average"), y)
    }
    out["candidates"] = [n for n, m in MODELS.items() if m in candidates_for(rt.AutoModel(), X)]
    for name, model in MODELS.items():
        cells: dict[str, float] = {}
        for binary in (False, True):
            est = rt.BayesianRoseTree(model=model, binary=binary).fit(X)
            key = "bhc" if binary else "brt"
            cells[f"purity_{key}"] = rt.dendrogram_purity(est.tree_, y)
            if not binary:
                cells["evidence"] = est.log_evidence_
                cells["structure"] = est.log_evidence_ - model.log_marginal(X)
        cells["cv"] = cv_score(model, X)
        out[name] = cells
    default = rt.BayesianRoseTree().fit(X)
    out["default_model"] = default.model_selection_["chosen"]
    out["default_purity"] = rt.dendrogram_purity(default.tree_, y)
    return out


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean purities and, for each rule, how often it picked the model of the purer tree."""

    def mean_se(v: list[float]) -> tuple[float, float]:
        a = np.asarray(v, dtype=float)
        return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else 0.0

    summary: dict[str, Any] = {"average_purity": mean_se([r["average"] for r in rows])}
    for name in MODELS:
        for key in ("brt", "bhc"):
            summary[f"{name}_{key}_purity"] = mean_se([r[name][f"purity_{key}"] for r in rows])
    # The first candidate wins a tie, as in the default.
    purer = [max(r["candidates"], key=lambda m, r=r: r[m]["purity_brt"]) for r in rows]
    for rule in RULES:
        picked = [max(r["candidates"], key=lambda m, r=r: r[m][rule]) for r in rows]
        summary[f"{rule}_picks_purer"] = sum(p == q for p, q in zip(picked, purer, strict=True))
        summary[f"{rule}_purity"] = mean_se(
            [r[p]["purity_brt"] for r, p in zip(rows, picked, strict=True)]
        )
        summary[f"{rule}_picked"] = {m: picked.count(m) for m in MODELS}
    summary["default_purity"] = mean_se([r["default_purity"] for r in rows])
    summary["subsets"] = len(rows)
    return summary


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every data set and print (and optionally save) the summaries."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--subsets", type=int, default=6)
    # The penguins by species and sex are the penguins again, with other labels.
    p.add_argument("--datasets", default=",".join(s for s in REAL_SETS if s != "penguins_sex"))
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", rt.DegenerateModelWarning)
    results: dict[str, Any] = {"command": " ".join(["python", *sys.argv]), "datasets": {}}
    for name in args.datasets.split(","):
        data = load(name, DATA_DIR)
        if data is None:
            continue
        start = time.perf_counter()
        rows = [one_subset(*subset(name, *data, i)) for i in range(args.subsets)]
        s = summarise(rows)
        results["datasets"][name] = {"description": REAL_SETS[name][1], "summary": s}
        fmt = lambda m: f"{m[0]:.3f} ± {m[1]:.3f}"  # noqa: E731
        print(f"{name}: {REAL_SETS[name][1]} ({time.perf_counter() - start:.0f} s)")
        print(
            f"  average linkage {fmt(s['average_purity'])}; "
            + "; ".join(
                f"{m} BRT {fmt(s[f'{m}_brt_purity'])} BHC {fmt(s[f'{m}_bhc_purity'])}"
                for m in MODELS
            )
        )
        print(
            "  "
            + "; ".join(
                f"{rule}: purer pick {s[f'{rule}_picks_purer']}/{s['subsets']}, "
                f"purity {fmt(s[f'{rule}_purity'])}"
                for rule in RULES
            )
            + f"; default {fmt(s['default_purity'])}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
