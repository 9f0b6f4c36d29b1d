#!/usr/bin/env python3
r"""Integer tables: counts, or measurements in whole units? The rose tree's default model.

``BayesianRoseTree()``'s ``model="auto"`` takes :class:`rosetree.DirichletMultinomial` for
counts and chooses between :class:`rosetree.NormalGamma` and
:class:`rosetree.NormalInverseWishart` for real values. Non-negative integers are counts
only where some entry is 0 (a sparse matrix's implicit entries are zeros): integers
without a zero are measurements recorded in whole units. This benchmark fits, on labelled
integer tables of both kinds, the default, the rose tree under each of the three models,
and SciPy's average linkage (Euclidean, on the raw and on the standardized columns), all
on the same subsets in one run, and reports dendrogram purity and the adjusted Rand index
of the flat clusters (SciPy's tree cut at the true number of classes), mean ± standard
error over the subsets. ``BRT, DirichletMultinomial()`` is what the default took for every
non-negative integer table before zeros were asked for. ``structure rule over all three``
is an alternative not taken: the rule that chooses among the real-valued models (each
model's log Bayes factor of its tree against one cluster), stretched over all three.

Data, 10 subsets each (rows drawn at random without replacement, in the order drawn):

* measurements in whole units, no zero anywhere:
  ``iris_mm``: scikit-learn's iris in millimetres (the centimetres times 10), 120 rows;
  ``penguins_int``: the Palmer penguins, bill length and depth in tenths of a millimetre,
  flipper length in millimetres, body mass in grams, 200 rows;
  ``cars_int`` (held out: nothing was tuned on it): the cars data's integer columns
  (cylinders, horsepower, weight in pounds, model year), origin as the class, 200 rows;
* counts, with zeros:
  ``digits_counts``: scikit-learn's digits, pixel counts 0–16 as they come, 200 rows;
  ``newsgroups_counts``: how often each of the 485 words of ``newsgroups4_485.npz``
  occurs in each article (tokenized as that file's ``prepare.py`` does; its presence
  matrix is checked against these counts), 30 articles per group, 120 rows.

Usage::

    python benchmarks/bench_integer_data.py --json benchmarks/integer_data.json \
        --markdown benchmarks/integer_data.md
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_quality as bq
import real_data


def _iris_mm(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    X, y = real_data.REAL_SETS["iris"][0](data_dir)
    return np.rint(X * 10.0), y


def _penguins_int(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    X, y = real_data.REAL_SETS["penguins"][0](data_dir)
    return np.rint(X * np.array([10.0, 10.0, 1.0, 1.0])), y


def _cars_int(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    X, y = real_data.REAL_SETS["cars"][0](data_dir)
    # Miles per gallon, displacement and acceleration have decimals; these four do not.
    return X[:, [1, 3, 4, 6]], y


def _digits_counts(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    return real_data.REAL_SETS["digits"][0](data_dir)


def _newsgroups_counts(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    folder = data_dir / "newsgroups"
    with np.load(folder / "newsgroups4_485.npz") as z:
        vocab, presence, y = list(z["vocab"]), z["X"], z["y"]
    column = {w: j for j, w in enumerate(vocab)}
    counts = np.zeros(presence.shape)
    with gzip.open(folder / "source" / "newsgroups4_bydate_raw.jsonl.gz", "rt") as f:
        for i, line in enumerate(f):
            # The header ends at the first empty line; of it only the subject is kept.
            text = json.loads(line)["text"].replace("\t", "\n")
            head, _, body = text.partition("\n\n")
            subject = "".join(h[8:] for h in head.split("\n") if h.lower().startswith("subject:"))
            for token in re.findall(r"[a-z]+", (subject + "\n" + body).lower()):
                j = column.get(token)
                if j is not None:
                    counts[i, j] += 1
    if not np.array_equal(counts > 0, presence.astype(bool)):
        raise RuntimeError("the word counts do not match newsgroups4_485.npz's presence")
    return counts, y


#: name -> (loader, rows per subset, rows per class or None, description)
SETS: dict[str, tuple[Callable[[Path], tuple[np.ndarray, np.ndarray]], int, int | None, str]] = {
    "iris_mm": (_iris_mm, 120, None, "iris in millimetres, 4 columns, 3 species"),
    "penguins_int": (_penguins_int, 200, None, "penguins in whole units, 4 columns, 3 species"),
    "cars_int": (_cars_int, 200, None, "cars' 4 integer columns, origin (3); held out"),
    "digits_counts": (_digits_counts, 200, None, "digits, pixel counts 0–16, 10 classes"),
    "newsgroups_counts": (_newsgroups_counts, 120, 30, "485 word counts, 4 groups"),
}

MODELS: dict[str, rt.ClusterModel] = {
    "DirichletMultinomial()": rt.DirichletMultinomial(),
    "NormalGamma()": rt.NormalGamma(),
    "NormalInverseWishart()": rt.NormalInverseWishart(),
}


def subset(name: str, X: np.ndarray, y: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """Subset ``i`` of set ``name``: rows at random, in the order drawn."""
    _, rows, per_class, _ = SETS[name]
    rng = np.random.default_rng([i, list(SETS).index(name), 17])
    if per_class is None:
        picked = rng.choice(len(X), min(rows, len(X)), replace=False)
    else:
        picked = rng.permutation(
            np.concatenate(
                [rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in np.unique(y)]
            )
        )
    return X[picked], y[picked]


def one_subset(X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Each system's ``(purity, ARI)`` on one subset, and the model the default chose."""
    k = len(np.unique(y))
    out: dict[str, Any] = {}
    structure: dict[str, float] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rt.DegenerateModelWarning)
        est = rt.BayesianRoseTree().fit(X)
        out["chosen"] = type(est.model_).__name__
        out["BayesianRoseTree()"] = (
            rt.dendrogram_purity(est.tree_, y),
            adjusted_rand_score(y, est.labels_),
        )
        for label, model in MODELS.items():
            if isinstance(model, rt.NormalInverseWishart) and X.shape[1] >= X.shape[0]:
                continue  # its marginal follows the prior there; not a candidate either
            fit = rt.BayesianRoseTree(model=model).fit(X)
            out[f"BRT, {label}"] = (
                rt.dendrogram_purity(fit.tree_, y),
                adjusted_rand_score(y, fit.labels_),
            )
            kept = np.delete(X, fit.constant_features_, axis=1)
            structure[label] = fit.log_evidence_ - fit.model_.log_marginal(kept)
        # The structure rule of real values, stretched over all three models.
        pick = max(structure, key=structure.__getitem__)
        out["structure rule over all three"] = out[f"BRT, {pick}"]
        out["structure rule chose"] = type(MODELS[pick]).__name__
    for label, rows in (("raw", X), ("standardized", real_data.standardize(X))):
        Z = linkage(pdist(rows), "average")
        out[f"SciPy average, Euclidean ({label})"] = (
            rt.dendrogram_purity(Z, y),
            adjusted_rand_score(y, fcluster(Z, k, "maxclust")),
        )
    return out


def run(name: str, n_subsets: int, data_dir: Path) -> dict[str, Any] | None:
    """Every subset of ``name``: the rows, the summary per system, the models chosen."""
    try:
        X, y = SETS[name][0](data_dir)
    except (ImportError, FileNotFoundError) as exc:
        print(f"skipping {name}: {exc}")
        return None
    rows = [one_subset(*subset(name, X, y, i)) for i in range(n_subsets)]
    systems = [key for key in rows[0] if key not in ("chosen", "structure rule chose")]
    summary = {
        system: {
            "purity": bq.mean_se([r[system][0] for r in rows]),
            "ari": bq.mean_se([r[system][1] for r in rows]),
        }
        for system in systems
    }
    return {
        "summary": summary,
        **{key: dict(Counter(r[key] for r in rows)) for key in ("chosen", "structure rule chose")},
        "zeros": float(np.mean(X == 0)),
        "raw": rows,
    }


def markdown(results: dict[str, Any]) -> str:
    """One table per data set."""
    parts = []
    for name, r in results.items():
        n = sum(r["chosen"].values())
        chosen, rule = (
            ", ".join(f"{m} on {c}/{n}" for m, c in sorted(r[key].items()))
            for key in ("chosen", "structure rule chose")
        )
        parts.append(
            f"**{name}**: {SETS[name][3]}; {r['zeros']:.0%} of the entries are 0; "
            f"the default chose {chosen}; the structure rule over all three models would "
            f"choose {rule}.\n\n"
            "| system | dendrogram purity | ARI of flat clusters |\n|---|---:|---:|"
        )
        for system, s in r["summary"].items():
            parts.append(f"| {system} | {bq.fmt(*s['purity'])} | {bq.fmt(*s['ari'])} |")
        parts.append("")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the tables, write the requested files; returns the results."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--datasets", default=",".join(SETS))
    p.add_argument("--subsets", type=int, default=10)
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    results: dict[str, Any] = {}
    start = time.perf_counter()
    for name in args.datasets.split(","):
        if name not in SETS:
            p.error(f"unknown data set {name!r}; choose from {list(SETS)}")
        out = run(name, args.subsets, bq.DATA_DIR)
        if out is not None:
            results[name] = out
            print(f"{name}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    bq.report(markdown(results), results, args.markdown, args.json)
    return results


if __name__ == "__main__":
    main()
