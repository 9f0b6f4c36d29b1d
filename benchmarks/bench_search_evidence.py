#!/usr/bin/env python3
r"""Is it the search or the model? The rose tree's greedy tree against SciPy's, by evidence.

Where the rose tree's default is less pure than SciPy's average linkage, either its model
prefers less pure trees, or its greedy search misses more probable, purer ones. This
benchmark tells the two apart. On the subsets of ``bench_quality.py`` (same data, same
subsets), for each subset:

1. ``BayesianRoseTree()`` is fitted as a new user fits it (its model chosen from the data);
2. SciPy's average linkage (Jaccard distances on binary rows, Euclidean on real-valued
   rows, as ``bench_quality.py``) and Ward linkage trees, and the rose tree's own binary
   tree (``BayesianRoseTree(model, binary=True)``, BHC's search under the same model), are
   put on the same scale: each is evaluated under the fitted model (``rt.evaluate_tree``
   on the columns the model kept) and replaced by its most probable coarsening
   (``RoseTree.coarsen``), the rose tree of highest :math:`\ln p(D \mid T)` whose
   clusters are all clusters of the binary tree;
3. the four trees' :math:`\ln p(D \mid T)` and dendrogram purity are recorded.

A coarsened tree that is more probable than the greedy tree is one the greedy search
missed; whether it is also purer says whether the evidence points towards the labels. The
last column is the purity of whichever of the four trees is most probable on each subset:
what "keep the most probable tree" would give.

Usage::

    python benchmarks/bench_search_evidence.py --markdown benchmarks/search_evidence.md
    python benchmarks/bench_search_evidence.py --datasets penguins,iris --subsets 4
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import pdist

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_quality as bq

TREES = ("greedy", "average", "ward", "bhc")
#: What each column of the table calls a tree.
NAMES = {"average": "SciPy average", "ward": "SciPy Ward", "bhc": "BHC (`binary=True`)"}


def linkage_tree(X: np.ndarray, kind: str, method: str) -> rt.Tree:
    """SciPy's ``method`` linkage tree of the rows, as ``bench_quality.py`` builds it."""
    if method == "ward":
        Z = linkage(X, "ward")
    else:
        D = pdist(X.astype(bool), "jaccard") if kind == "binary" else pdist(X)
        Z = linkage(D, method)
    return rt.Tree(len(X), Z[:, :2].astype(int))


def one_subset(X: np.ndarray, y: np.ndarray, kind: str) -> dict[str, tuple[float, float]]:
    """Each tree's ``(ln p(D | T), dendrogram purity)`` on one subset."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rt.DegenerateModelWarning)
        est = rt.BayesianRoseTree().fit(X)
        bhc = rt.BayesianRoseTree(model=est.model_, binary=True).fit(X)
    kept = np.delete(X, est.constant_features_, axis=1) if est.constant_features_.size else X
    out = {"greedy": (est.log_evidence_, rt.dendrogram_purity(est.tree_, y))}
    for method in TREES[1:]:
        tree = bhc.tree_ if method == "bhc" else linkage_tree(X, kind, method)
        best = rt.evaluate_tree(kept, tree, model=est.model_).coarsen()
        out[method] = (best.log_evidence, rt.dendrogram_purity(best, y))
    return out


def more_probable(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether tree ``a``'s ``ln p(D | T)`` exceeds ``b``'s by more than rounding.

    The same tree reached two ways (BHC's tree coarsened back to the greedy rose tree, say)
    sums its terms in another order and can come out a few units in the last place ahead;
    that is not a more probable tree (nor is one that differs only among rows that make
    its evidence the same). ``10⁻⁹`` of ``|ln p|`` is far above such rounding and
    far below any real difference between two trees.
    """
    return a[0] - b[0] > 1e-9 * max(1.0, abs(b[0]))


def run(name: str, n_subsets: int, source: bq.Source) -> dict[str, Any]:
    """Every subset of ``name``: per-tree evidence and purity, and the summary."""
    kind = bq.DATASETS[name][0]
    rows = []
    for i in range(n_subsets):
        X, y = source.subset(name, i)
        rows.append(one_subset(X, y, kind))
    summary: dict[str, Any] = {f"{t} purity": bq.mean_se([r[t][1] for r in rows]) for t in TREES}
    for t in TREES[1:]:
        summary[f"{t} more probable"] = sum(more_probable(r[t], r["greedy"]) for r in rows)
        summary[f"{t} gain in ln p"] = bq.mean_se([r[t][0] - r["greedy"][0] for r in rows])
    most_probable = []
    for r in rows:
        best = r["greedy"]
        for t in TREES[1:]:
            if more_probable(r[t], best):
                best = r[t]
        most_probable.append(best)
    summary["most probable purity"] = bq.mean_se([m[1] for m in most_probable])
    summary["subsets"] = n_subsets
    return {"summary": summary, "raw": rows}


def fmt(pair: tuple[float, float | None] | None) -> str:
    """``mean ± se`` (``bench_quality``'s format)."""
    assert pair is not None
    return bq.fmt(*pair)


def markdown(results: dict[str, Any]) -> str:
    """One row per data set."""
    head = ["data set", "subsets", "greedy tree purity"]
    for t in TREES[1:]:
        head += [f"{NAMES[t]}, coarsened: purity", "more probable than greedy"]
    head.append("most probable of the four: purity")
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name, r in results.items():
        s = r["summary"]
        n = s["subsets"]
        cells = [name, str(n), fmt(s["greedy purity"])]
        for t in TREES[1:]:
            cells += [fmt(s[f"{t} purity"]), f"{s[f'{t} more probable']}/{n}"]
        cells.append(fmt(s["most probable purity"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the requested files; returns the results."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(bq.DATASETS))
    p.add_argument("--subsets", type=int, help="subsets per data set (default: bench_quality's)")
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    source = bq.Source(bq.DATA_DIR)
    results: dict[str, Any] = {}
    start = time.perf_counter()
    for name in args.datasets.split(","):
        if name not in bq.DATASETS:
            p.error(f"unknown data set {name!r}; choose from {list(bq.DATASETS)}")
        if not source.available(name):
            continue
        results[name] = run(name, args.subsets or bq.DATASETS[name][1], source)
        print(f"{name}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    bq.report(markdown(results), results, args.markdown, args.json)
    return results


if __name__ == "__main__":
    main()
