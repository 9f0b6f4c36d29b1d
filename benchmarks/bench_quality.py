#!/usr/bin/env python3
r"""Tree quality of rosetree against SciPy's linkage methods, on labelled data.

What is measured
----------------
For every data set and every system, the three scores of :mod:`rosetree.metrics` of the
tree it builds, against the known class labels: dendrogram purity (Heller & Ghahramani
2005), subtree score and leave-one-out accuracy (Teh, Daumé & Roy 2007, §5); and the
adjusted Rand index of its flat clusters (a rosetree estimator's ``labels_``; SciPy's tree
cut at the true number of classes, ``fcluster(Z, k, "maxclust")``, which rosetree is not
told). Each is reported as mean ± standard error over random subsets of the data, all
systems on the same subsets in the same run. A system that raises rosetree's error on a
subset is reported as failed there.

Systems
-------
Each family's default estimator, as a new user makes it (``--families`` selects them):
``BayesianRoseTree()`` (the model chosen from the data, :class:`rosetree.AutoModel`),
``KingmanCoalescent()`` and ``PitmanYorDiffusionTree(random_state=0)``.

rosetree with a fixed model for the data type: ``BetaBernoulli()`` for binary data,
``NormalInverseWishart()`` (its data-driven defaults) for continuous data:

* ``BRT``: ``rt.BayesianRoseTree(model)``, greedy Bayesian rose tree, π_T of eq 1.7, γ = 0.5,
* ``BHC``: the same with ``binary=True`` (BHC-γ),
* ``BHC-DP, posterior rule``: Heller & Ghahramani's BHC as published: ``binary=True``,
  ``mixing="dp"`` (α = 1), ``merge_rule="posterior"``,
* ``BRT, Normal-Gamma`` / ``BHC, Normal-Gamma`` (continuous data only): ``rt.NormalGamma()``,
  the diagonal model, with its data-driven defaults,
* ``BRT, learned`` / ``BHC, learned``: the same with ``learn_hyperparameters=True``
  (per-feature α, β or κ0, ν0, Ψ0 scale, and γ, by coordinate ascent). Per-feature
  learning on the 485-word newsgroups data takes about 35 s per 120-row fit here, so by
  default these systems skip the newsgroups sets; ``--learn all`` includes them.

SciPy: ``scipy.cluster.hierarchy.linkage(pdist(X, metric), method)`` with methods
``average``, ``complete`` and ``single``, and metric Hamming and Jaccard for binary data,
Euclidean for continuous data; ``ward`` with Euclidean distance only (on binary data too,
where it is the Euclidean distance of 0/1 vectors).

Data (``shared/data`` beside the checkout, or ``$ROSETREE_DATA``; see each README)
-----------------------------------------------------------------------------------
* ``toy``: 48 × 12 binary, 3 classes, whole (the copy shipped as ``rt.datasets.load_toy``),
  in 10 row orders;
* ``spambase``: 100 rows (50 spam + 50 not) of the 4601 × 57 binarised file
  ``spambase/spambase_bin.csv``, 20 subsets (Teh et al.'s setting: 100 rows, 20 repeats);
* ``mnist``: 20 images per digit from ``mnist/mnist5k.npz``, pixels / 255, PCA to 20
  dimensions fitted on the 200 images, 50 subsets (Teh et al.'s setting); Gaussian model;
* ``digits024``: ``digits024/digits024_bin.csv``, 120 × 64 binary, 3 classes, whole, in 10
  row orders;
* ``optdigits``: 12 per digit from ``digits_optdigits/digits10_bin.csv`` (120 × 64 binary,
  10 classes; a stand-in for the BRT chapter's CEDAR digits), 10 subsets;
* ``newsgroups120`` / ``newsgroups800``: 30 / 200 articles per group from
  ``newsgroups/newsgroups4_485.npz`` (485 binary words, 4 groups), 20 / 5 subsets;
* real-valued sets that installed packages bundle (``real_data.py``; ``pip install
  ".[bench]"``; a missing one is skipped): scikit-learn's ``iris``, ``wine``,
  ``breast_cancer`` and ``digits`` (pixel counts taken as real), ``penguins``
  (palmerpenguins) and, held out (nothing was tuned on it), ``cars`` (vega_datasets, origin
  as the class); ``penguins_sex``: the penguins whose sex is recorded, with species and sex
  together as the class (6 classes); 10 subsets of at most 200 rows (iris 120, wine 142),
  each standardized (every system, rosetree's too, sees the same standardized columns).

``--raw`` gives the real-valued sets as they come, in their own units (grams beside
millimetres), not standardized: what a new user who does not standardize gets. SciPy then
runs both on the raw columns and, as a user of linkage would, on the standardized ones
(``SciPy average, Euclidean (standardized)``).

Subsets are drawn per class without replacement by ``numpy.random.default_rng([i, k])``
(subset *i* of the *k*-th data set), so every run and every system sees the same rows, in
a random order: the files list their rows class by class, and that order would favour any
method that breaks ties by row index. A whole set's "subsets" are its rows in different
random orders: ties (equal distances, equal scores) are broken by row index, so a single
order is one draw of the tie-breaks, and the standard error over orders says how much they
move a score (SciPy's average linkage on toy: 0.929 with the rows class by class, 0.946 in
one random order).
Beside our numbers, the tables show Teh et al. (2007) Table 1 as published (MNIST and
SPAMBASE; their distance for average linkage and their SPAMBASE preprocessing are not
stated, and their subsets are others).

Usage::

    python benchmarks/bench_quality.py --json benchmarks/quality_results.json \\
        --markdown benchmarks/quality_results.md
    python benchmarks/bench_quality.py --quick                # 2 subsets per set, ~1 minute
    python benchmarks/bench_quality.py --datasets toy,mnist --subsets 5
    python benchmarks/bench_quality.py --raw --datasets iris,wine,breast_cancer,penguins,cars
    python benchmarks/bench_quality.py --datasets iris,wine,cars --families brt,coalescent
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import real_data
import rosetree as rt
from bench_brt import DATA_DIR, machine
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist
from sklearn.metrics import adjusted_rand_score

SCORES: dict[str, Callable[[Any, Any], float]] = {
    "purity": rt.dendrogram_purity,
    "subtree": rt.subtree_score,
    "loo": rt.leave_one_out_accuracy,
}
SCORE_TITLES = {
    "purity": "dendrogram purity",
    "subtree": "subtree score",
    "loo": "leave-one-out accuracy",
    "ari": "ARI of flat clusters",
}

#: name -> (kind, default number of subsets, description)
DATASETS: dict[str, tuple[str, int, str]] = {
    "toy": ("binary", 10, "48 × 12 binary, 3 classes of 16"),
    "spambase": ("binary", 20, "100 rows (50 spam, 50 not) × 57 binary features"),
    "mnist": ("continuous", 50, "200 images (20 per digit), PCA to 20 dimensions"),
    "digits024": ("binary", 10, "120 × 64 binary (digits 0, 2, 4; 40 each)"),
    "optdigits": ("binary", 10, "120 rows (12 per digit) × 64 binary, 10 classes"),
    "newsgroups120": ("binary", 20, "120 articles (30 per group) × 485 binary words"),
    "newsgroups800": ("binary", 5, "800 articles (200 per group) × 485 binary words"),
    **{
        name: ("continuous", 10, f"{description}; standardized")
        for name, (_, description, _, _) in real_data.REAL_SETS.items()
        if name != "mnist20"
    },
}
#: Used whole: their "subsets" are the whole set with its rows in different orders.
WHOLE = ("toy", "digits024")
DEFAULT_LEARN = ("toy", "spambase", "mnist", "digits024", "optdigits")

#: Each family's estimator as a new user makes it: no argument.
DEFAULT_SYSTEMS: dict[str, Callable[[], Any]] = {
    "rosetree default (BayesianRoseTree())": lambda: rt.BayesianRoseTree(),
    "rosetree coalescent default (KingmanCoalescent())": lambda: rt.KingmanCoalescent(),
    "rosetree diffusion tree default (PitmanYorDiffusionTree())": lambda: rt.PitmanYorDiffusionTree(
        random_state=0
    ),
    # The default before the Gibbs re-attachment move, for comparison in the same run.
    "rosetree diffusion tree, prior move (subtree_move='prior')": lambda: rt.PitmanYorDiffusionTree(
        subtree_move="prior", random_state=0
    ),
    # The default before the rows were centred and scaled, for comparison in the same run.
    "rosetree diffusion tree, rows as given (scale=None)": lambda: rt.PitmanYorDiffusionTree(
        scale=None, random_state=0
    ),
}
#: The family of each default system, for --families.
DEFAULT_FAMILIES = dict(
    zip(DEFAULT_SYSTEMS, ("brt", "coalescent", "pydt", "pydt", "pydt"), strict=True)
)

ROSETREE_SYSTEMS: dict[str, dict[str, Any]] = {
    "BRT": {},
    "BHC": {"binary": True},
    "BHC-DP, posterior rule": {"binary": True, "mixing": "dp", "merge_rule": "posterior"},
    "BRT, Normal-Gamma": {"model": "normal_gamma"},
    "BHC, Normal-Gamma": {"binary": True, "model": "normal_gamma"},
    "BRT, learned": {"learn_hyperparameters": True},
    "BHC, learned": {"binary": True, "learn_hyperparameters": True},
}
#: kind -> SciPy (method, metric) pairs
SCIPY_SYSTEMS: dict[str, list[tuple[str, str]]] = {
    "binary": [
        (method, metric)
        for method in ("average", "complete", "single")
        for metric in ("hamming", "jaccard")
    ]
    + [("ward", "euclidean")],
    "continuous": [(m, "euclidean") for m in ("average", "complete", "single", "ward")],
}

#: Teh, Daumé & Roy (2007), Table 1: (mean, standard error) of purity, subtree score and
#: leave-one-out accuracy over 50 (MNIST) and 20 (SPAMBASE) repeats.
_TABLE_1 = {
    "mnist": {
        "average linkage": ((0.363, 0.004), (0.581, 0.005), (0.755, 0.005)),
        "BHC": ((0.392, 0.006), (0.579, 0.005), (0.763, 0.005)),
        "coalescent (Greedy-Rate1)": ((0.412, 0.006), (0.610, 0.005), (0.773, 0.005)),
    },
    "spambase": {
        "average linkage": ((0.616, 0.007), (0.607, 0.011), (0.846, 0.010)),
        "BHC": ((0.711, 0.010), (0.549, 0.015), (0.832, 0.010)),
        "coalescent (Greedy-Rate1)": ((0.689, 0.008), (0.661, 0.012), (0.861, 0.008)),
    },
}
PUBLISHED: dict[str, dict[str, dict[str, tuple[float, float]]]] = {
    name: {
        f"Teh et al. 2007, Table 1: {system}": dict(zip(SCORES, cells, strict=True))
        for system, cells in systems.items()
    }
    for name, systems in _TABLE_1.items()
}


# --------------------------------------------------------------------------- data
def read_labelled_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Features and labels of a prepared CSV (columns ``id, label, features...``)."""
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    if header[:2] != ["id", "label"]:
        raise ValueError(f"{path}: expected columns id, label, ...; got {header[:3]}")
    return np.array([[float(v) for v in r[2:]] for r in body]), np.array([r[1] for r in body])


def per_class(y: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Row indices in random order: ``k`` rows of every class, drawn without replacement.

    Not sorted: the files list their rows class by class, and an order by class would favour
    any method that breaks ties by row index.
    """
    rows = [rng.choice(np.flatnonzero(y == c), k, replace=False) for c in np.unique(y)]
    return rng.permutation(np.concatenate(rows))


def pca(X: np.ndarray, d: int) -> np.ndarray:
    """Projection of the centred rows of ``X`` on their first ``d`` principal axes."""
    centred = X - X.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:d].T


class Source:
    """Loads each data set's file once and draws its subsets."""

    def __init__(self, data_dir: Path, raw: bool = False) -> None:
        self.data_dir = data_dir
        self.raw = raw  # real-valued sets in their own units, not standardized
        self._cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def available(self, name: str) -> bool:
        """Whether the data set can be loaded (its package installed, its file present)."""
        if name in real_data.REAL_SETS and name not in self._cache:
            full = real_data.load(name, self.data_dir)
            if full is None:
                return False
            self._cache[name] = full
        return True

    def _full(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._cache:
            d = self.data_dir
            if name in real_data.REAL_SETS:
                full = real_data.load(name, d)
                assert full is not None, name
            elif name == "toy":
                toy = rt.datasets.load_toy()
                full = (toy.data, toy.target)
            elif name == "spambase":
                full = read_labelled_csv(d / "spambase" / "spambase_bin.csv")
            elif name == "digits024":
                full = read_labelled_csv(d / "digits024" / "digits024_bin.csv")
            elif name == "optdigits":
                full = read_labelled_csv(d / "digits_optdigits" / "digits10_bin.csv")
            elif name == "mnist":
                with np.load(d / "mnist" / "mnist5k.npz") as z:
                    full = (z["X"].astype(np.float64) / 255.0, z["y"])
            else:
                with np.load(d / "newsgroups" / "newsgroups4_485.npz") as z:
                    full = (z["X"].astype(np.float64), z["y"])
            self._cache[name] = full
        return self._cache[name]

    def subset(self, name: str, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Rows and labels of subset ``i`` of data set ``name``."""
        X, y = self._full(name)
        if name in real_data.REAL_SETS:
            X, y = real_data.subset(name, X, y, i)
            return (X if self.raw else real_data.standardize(X)), y
        rng = np.random.default_rng([i, list(DATASETS).index(name)])
        if name in WHOLE:
            order = rng.permutation(len(X))
            return X[order], y[order]
        k = {"spambase": 50, "mnist": 20, "optdigits": 12, "newsgroups120": 30}.get(name, 200)
        rows = per_class(y, k, rng)
        X, y = X[rows], y[rows]
        return (pca(X, 20), y) if name == "mnist" else (X, y)


# --------------------------------------------------------------------------- systems
#: A system: a function of the data and the number of classes that returns a tree and, if
#: the system has flat clusters, their labels.
System = Callable[[np.ndarray, int], tuple[Any, Any]]


def rosetree_tree(X: np.ndarray, kind: str, options: dict[str, Any]) -> tuple[Any, Any]:
    """Fit ``BayesianRoseTree(model, **options)``; its tree and its default flat clusters.

    The model is the default one for ``kind`` (``BetaBernoulli()`` for binary data,
    ``NormalInverseWishart()`` otherwise), or ``rt.NormalGamma()`` where ``options["model"]``
    says ``"normal_gamma"``.
    """
    options = dict(options)
    if options.pop("model", None) == "normal_gamma":
        model: rt.ClusterModel = rt.NormalGamma()
    else:
        model = rt.BetaBernoulli() if kind == "binary" else rt.NormalInverseWishart()
    est = rt.BayesianRoseTree(model, **options).fit(X)
    return est.tree_, est.labels_


def default_fit(make: Callable[[], Any], X: np.ndarray) -> tuple[Any, Any]:
    """A family's default estimator fitted to ``X``: its tree and its flat clusters."""
    est = make().fit(X)
    return est.tree_, getattr(est, "labels_", None)


def scipy_tree(X: np.ndarray, method: str, metric: str, k: int) -> tuple[Any, Any]:
    """SciPy's linkage matrix and its cut into ``k`` clusters (the number of classes).

    The rows of ``X`` are taken as booleans for Hamming and Jaccard distances.
    """
    data = X.astype(bool) if metric in ("hamming", "jaccard") else X
    Z = linkage(pdist(data, metric), method)
    return Z, fcluster(Z, k, "maxclust")


def systems_for(
    name: str, learn: set[str], families: set[str], raw: bool = False
) -> list[tuple[str, System]]:
    """(label, system) for every system run on ``name`` (``raw``: see ``--raw``)."""
    kind = DATASETS[name][0]
    out: list[tuple[str, System]] = [
        (label, lambda X, k, m=make: default_fit(m, X))
        for label, make in DEFAULT_SYSTEMS.items()
        if DEFAULT_FAMILIES[label] in families
    ]
    for label, options in ROSETREE_SYSTEMS.items():
        if options.get("learn_hyperparameters") and name not in learn:
            continue
        if options.get("model") == "normal_gamma" and kind != "continuous":
            continue
        out.append((f"rosetree {label}", lambda X, k, o=options: rosetree_tree(X, kind, o)))
    for method, metric in SCIPY_SYSTEMS[kind]:
        label = f"SciPy {method}, {metric.capitalize()}"
        out.append((label, lambda X, k, m=method, d=metric: scipy_tree(X, m, d, k)))
    if raw and name in real_data.REAL_SETS:
        out.append(
            (
                "SciPy average, Euclidean (standardized)",
                lambda X, k: scipy_tree(real_data.standardize(X), "average", "euclidean", k),
            )
        )
    return out


# --------------------------------------------------------------------------- running
def report(table: str, results: Any, markdown_path: Path | None, json_path: Path | None) -> None:
    """Print a benchmark's markdown table and write it and its results where asked."""
    print("\n" + table)
    if markdown_path:
        markdown_path.write_text(table if table.endswith("\n") else table + "\n")
    if json_path:
        json_path.write_text(json.dumps(results, indent=1) + "\n")


def mean_se(values: list[float | None]) -> tuple[float, float | None] | None:
    """Mean and standard error of the mean (None for a single value); None without values."""
    if not values or values[0] is None:
        return None
    v = np.asarray(values, dtype=np.float64)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else None
    return float(v.mean()), se


def run_dataset(
    name: str,
    n_subsets: int,
    learn: set[str],
    source: Source,
    log: Callable[[str], None],
    families: set[str] | None = None,
) -> dict[str, Any]:
    """Every system on ``n_subsets`` subsets of ``name``: raw scores, summaries, timings.

    A system that raises rosetree's error on a subset is recorded as failed there (its
    message in ``failures``), and scores only on the subsets it fits.
    """
    kind, _, description = DATASETS[name]
    if source.raw:
        description = description.replace("; standardized", "; in its own units (--raw)")
    families = set(DEFAULT_FAMILIES.values()) if families is None else families
    systems = systems_for(name, learn, families, source.raw)
    raw: dict[str, dict[str, list[Any]]] = {
        label: {**{s: [] for s in (*SCORES, "ari")}, "seconds": []} for label, _ in systems
    }
    n_rows = n_features = n_classes = 0
    failures: dict[str, list[str]] = {}
    for i in range(n_subsets):
        X, y = source.subset(name, i)
        n_rows, n_features, n_classes = X.shape[0], X.shape[1], len(np.unique(y))
        for label, build in systems:
            start = time.perf_counter()
            try:
                tree, labels = build(X, n_classes)
            except rt.RoseTreeError as exc:
                failures.setdefault(label, []).append(f"subset {i}: {type(exc).__name__}: {exc}")
                continue
            raw[label]["seconds"].append(time.perf_counter() - start)
            for score, fn in SCORES.items():
                raw[label][score].append(fn(tree, y))
            ari = None if labels is None else float(adjusted_rand_score(y, labels))
            raw[label]["ari"].append(ari)
        log(f"  {name}: subset {i + 1}/{n_subsets} done")
    summary = {
        label: {score: mean_se(values[score]) for score in (*SCORES, "ari")}
        | {
            "seconds_per_fit": float(np.mean(values["seconds"])) if values["seconds"] else None,
            "failed_subsets": len(failures.get(label, [])),
        }
        for label, values in raw.items()
    }
    return {
        "kind": kind,
        "description": description,
        "n_rows": n_rows,
        "n_features": n_features,
        "n_classes": n_classes,
        "n_subsets": n_subsets,
        "model": "BetaBernoulli()" if kind == "binary" else "NormalInverseWishart()",
        "systems": summary,
        "failures": failures,
        "raw": raw,
        "published": PUBLISHED.get(name, {}),
    }


def fmt(mean: float, se: float | None) -> str:
    """``mean ± se`` with three decimals (the mean alone without a standard error)."""
    return f"{mean:.3f}" if se is None else f"{mean:.3f} ± {se:.3f}"


def markdown(results: dict[str, Any]) -> str:
    """One table per data set: systems by rows, the three scores by columns."""
    lines: list[str] = []
    for name, res in results["datasets"].items():
        k = res["n_subsets"]
        if name in WHOLE:
            subsets = "whole data set" + (f", {k} row orders" if k > 1 else "")
        else:
            subsets = f"{k} subsets" if k > 1 else "one subset"
        lines += [
            f"**{name}**: {res['description']}; {subsets}; rosetree model `{res['model']}`.",
            "",
            "| system | " + " | ".join(SCORE_TITLES.values()) + " | seconds per fit |",
            "|---|" + "---:|" * (len(SCORE_TITLES) + 1),
        ]
        best = {
            s: max((v[s][0] for v in res["systems"].values() if v.get(s) is not None), default=0)
            for s in SCORE_TITLES
        }
        for label, cells in res["systems"].items():
            row = [
                "–"
                if cells.get(s) is None
                else f"**{fmt(*cells[s])}**"
                if cells[s][0] == best[s]
                else fmt(*cells[s])
                for s in SCORE_TITLES
            ]
            seconds = "–" if cells["seconds_per_fit"] is None else f"{cells['seconds_per_fit']:.3f}"
            if cells["failed_subsets"]:
                seconds += f" (failed on {cells['failed_subsets']} of {res['n_subsets']} subsets)"
            lines.append(f"| {label} | " + " | ".join(row) + f" | {seconds} |")
        for label, cells in res["published"].items():
            row = [fmt(*cells[s]) if s in cells else "–" for s in SCORE_TITLES]
            lines.append(f"| *{label}* | " + " | ".join(row) + " | |")
        lines.append("")
    return "\n".join(lines)


def header() -> dict[str, Any]:
    """Machine, software and command line, printed and stored in the JSON."""
    return {
        **machine(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "data_dir": str(DATA_DIR),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options, with the data-set lists checked and split."""
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="2 subsets per data set (smoke test)")
    p.add_argument("--subsets", type=int, help="subsets per data set (default: see --help)")
    p.add_argument(
        "--datasets",
        default=",".join(DATASETS),
        help=f"comma-separated, from {', '.join(DATASETS)} (default: all)",
    )
    p.add_argument(
        "--learn",
        default=",".join(DEFAULT_LEARN),
        help="data sets on which the learn_hyperparameters=True systems run: a "
        "comma-separated list, 'all' or 'none' (default: all but the newsgroups sets)",
    )
    p.add_argument(
        "--families",
        default=",".join(sorted(set(DEFAULT_FAMILIES.values()))),
        help="whose default estimators run: a comma-separated list of brt, coalescent and "
        "pydt, or 'none' (default: all three)",
    )
    p.add_argument(
        "--raw",
        action="store_true",
        help="real-valued sets in their own units, not standardized (see above)",
    )
    p.add_argument("--json", metavar="PATH", type=Path, help="write all results as JSON")
    p.add_argument("--markdown", metavar="PATH", type=Path, help="write the tables as Markdown")
    args = p.parse_args(argv)
    args.datasets = [d for d in args.datasets.split(",") if d]
    unknown = [d for d in args.datasets if d not in DATASETS]
    if unknown:
        p.error(f"unknown data set(s) {unknown}; choose from {list(DATASETS)}")
    learn = {"all": ",".join(DATASETS), "none": ""}.get(args.learn, args.learn)
    args.learn = {d for d in learn.split(",") if d}
    if args.learn - set(DATASETS):
        p.error(f"unknown data set(s) in --learn: {sorted(args.learn - set(DATASETS))}")
    args.families = {f for f in args.families.split(",") if f and f != "none"}
    if args.families - set(DEFAULT_FAMILIES.values()):
        p.error(f"unknown families in --families: {sorted(args.families)}")
    if args.subsets is not None and args.subsets < 1:
        p.error("--subsets must be at least 1")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables, write the requested files; returns the results."""
    args = parse_args(argv)
    start, cpu_start = time.perf_counter(), time.process_time()
    info = header()
    info["real-valued data"] = "as they come (--raw)" if args.raw else "standardized"
    print("rosetree tree quality vs SciPy linkage (dendrogram purity, subtree score, LOO)")
    for key, value in info.items():
        print(f"  {key:<20}{value}")
    source = Source(DATA_DIR, raw=args.raw)
    results: dict[str, Any] = {"header": info, "datasets": {}}
    for name in args.datasets:
        if not source.available(name):
            continue
        n = args.subsets or DATASETS[name][1]
        if args.quick:
            n = min(n, 1 if name == "newsgroups800" else 2)
        t0 = time.perf_counter()
        results["datasets"][name] = run_dataset(
            name, n, args.learn, source, lambda msg: print(msg, flush=True), args.families
        )
        print(f"  {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    results["header"]["seconds"] = time.perf_counter() - start
    results["header"]["cpu_seconds"] = time.process_time() - cpu_start
    table = markdown(results)
    print("\n" + table)
    print(
        f"total {results['header']['seconds']:.1f} s wall clock, "
        f"{results['header']['cpu_seconds']:.1f} s CPU (all threads of this process)"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(table, encoding="utf-8")
        print(f"wrote {args.markdown}")
    return results


if __name__ == "__main__":
    main()
