#!/usr/bin/env python3
r"""Many columns, few rows: every family's default against SciPy where d is large.

The quality benchmark's real-valued sets have at most 64 columns. This one measures the
defaults where the columns outnumber the rows of a cluster, as with raw pixels or gene
expression, all systems on the same rows in one run:

* ``mnist_pixels``: 20 images per digit from ``mnist/mnist5k.npz``, pixels / 255, all 784
  columns (the constant ones are left out by the rose tree's Gaussian models), 5 subsets;
  ``mnist_pca20``, ``mnist_pca50``, ``mnist_pca100``: the same subsets reduced to 20, 50
  or 100 principal components (fitted on each subset; 20 is the quality benchmark's MNIST
  setting);
* ``noise_d``: 40 rows of independent standard normal columns, ``d`` = 50, 200 and 2,000,
  3 draws each: no structure at all, so one flat cluster is the right answer;
* ``three_d``: 60 rows in three groups of 20, ``d`` = 10, 20, 50, 200 and 2,000 standard
  normal columns, of which the first tenth are shifted by 3 for the second group and the
  next tenth by 3 for the third, 3 draws each;
* held out (nothing was chosen on them): ``newsgroups_lsa50`` and ``newsgroups_lsa100``,
  latent semantic analysis of the newsgroups articles (TF-IDF of their bodies, words in at
  least 3 articles, English stop words left out, then a truncated SVD to 50 or 100
  components fitted on each subset), 50 articles per group, 5 subsets; ``digits_pca30``:
  scikit-learn's digits, 200 rows reduced to 30 principal components, 5 subsets.

Reported: dendrogram purity (none for the noise), the number of flat clusters of each
rosetree default (``labels_``), the adjusted Rand index of those clusters (SciPy's trees
cut at the true number of groups), and how often ``BayesianRoseTree()``'s ``model="auto"``
took the full covariance and the shared precision (its three candidates are run beside
it, each alone).

Usage::

    python benchmarks/bench_many_columns.py --json benchmarks/many_columns.json \
        --markdown benchmarks/many_columns.md
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist
from sklearn.metrics import adjusted_rand_score

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_quality as bq

DEFAULTS: dict[str, Callable[[], Any]] = {
    "BayesianRoseTree()": lambda: rt.BayesianRoseTree(),
    "KingmanCoalescent()": lambda: rt.KingmanCoalescent(),
    "PitmanYorDiffusionTree()": lambda: rt.PitmanYorDiffusionTree(random_state=0),
    # The default's candidates, each alone.
    "BayesianRoseTree(NormalGamma())": lambda: rt.BayesianRoseTree(rt.NormalGamma()),
    "BayesianRoseTree(NormalInverseWishart())": lambda: rt.BayesianRoseTree(
        rt.NormalInverseWishart()
    ),
    "BayesianRoseTree(NormalGamma(shared_precision=True))": lambda: rt.BayesianRoseTree(
        rt.NormalGamma(shared_precision=True)
    ),
}
SCIPY = ("average", "ward")
DIMENSIONS = (50, 200, 2000)
#: Columns of the three groups: also below 50, where the full covariance needs more rows.
GROUP_DIMENSIONS = (10, 20, *DIMENSIONS)
#: Principal components of the MNIST subsets (0: the raw pixels).
COMPONENTS = (0, 20, 50, 100)


def mnist(components: int, n_subsets: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The quality benchmark's MNIST subsets: all 784 pixels, or ``components`` of PCA."""
    with np.load(bq.DATA_DIR / "mnist" / "mnist5k.npz") as z:
        X, y = z["X"].astype(np.float64) / 255.0, np.asarray(z["y"])
    for i in range(n_subsets):
        rows = bq.per_class(y, 20, np.random.default_rng([i, list(bq.DATASETS).index("mnist")]))
        yield (bq.pca(X[rows], components) if components else X[rows]), y[rows]


def lsa(components: int, n_subsets: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Latent semantic analysis of subsets of the newsgroups articles (see above)."""
    import gzip
    import json

    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer

    folder = bq.DATA_DIR / "newsgroups"
    with gzip.open(folder / "source" / "newsgroups4_bydate_raw.jsonl.gz", "rt") as f:
        bodies = [json.loads(line)["text"].replace("\t", "\n").partition("\n\n")[2] for line in f]
    with np.load(folder / "newsgroups4_485.npz") as z:
        y = np.asarray(z["y"])
    tfidf = TfidfVectorizer(min_df=3, stop_words="english").fit_transform(bodies)
    for i in range(n_subsets):
        rng = np.random.default_rng([i, 123])
        rows = np.concatenate(
            [rng.choice(np.flatnonzero(y == c), 50, replace=False) for c in np.unique(y)]
        )
        svd = TruncatedSVD(components, random_state=0)
        yield svd.fit_transform(tfidf[rows]), y[rows]


def digits_pca(components: int, n_subsets: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """200 rows of scikit-learn's digits reduced to ``components`` principal components."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    for i in range(n_subsets):
        rows = np.random.default_rng([i, 321]).choice(len(digits.data), 200, replace=False)
        yield bq.pca(digits.data[rows], components), digits.target[rows]


def synthetic(d: int, groups: int, draws: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Pure noise (``groups=1``, 40 rows) or three groups of 20 rows in ``d`` columns."""
    for i in range(draws):
        rng = np.random.default_rng([i, d, groups])
        if groups == 1:
            yield rng.normal(size=(40, d)), np.zeros(40, dtype=int)
            continue
        y = np.repeat(np.arange(3), 20)
        shift = np.zeros((3, d))
        tenth = d // 10
        shift[1, :tenth] = 3.0
        shift[2, tenth : 2 * tenth] = 3.0
        yield shift[y] + rng.normal(size=(60, d)), y


def one(X: np.ndarray, y: np.ndarray) -> dict[str, dict[str, float]]:
    """Each system's purity (with more than one group), flat clusters and ARI."""
    k = len(np.unique(y))
    out: dict[str, dict[str, float]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rt.DegenerateModelWarning)
        for label, make in DEFAULTS.items():
            if "NormalInverseWishart" in label and X.shape[1] >= X.shape[0]:
                continue  # a full covariance with more columns than rows follows its prior
            start = time.perf_counter()
            est = make().fit(X)
            out[label] = {
                "clusters": float(len(np.unique(est.labels_))),
                "ari": adjusted_rand_score(y, est.labels_),
                "seconds": time.perf_counter() - start,
            }
            if k > 1:
                out[label]["purity"] = rt.dendrogram_purity(est.tree_, y)
            if label == "BayesianRoseTree()":
                # 1 where the default chose the full covariance, or the shared precision.
                out[label]["full covariance"] = float(
                    isinstance(est.model_, rt.NormalInverseWishart)
                )
                out[label]["shared precision"] = float(
                    getattr(est.model_, "shared_precision", False) is True
                )
    for method in SCIPY:
        Z = linkage(X, "ward") if method == "ward" else linkage(pdist(X), method)
        labels = fcluster(Z, k, "maxclust")
        out[f"SciPy {method}"] = {"clusters": float(k), "ari": adjusted_rand_score(y, labels)}
        if k > 1:
            out[f"SciPy {method}"]["purity"] = rt.dendrogram_purity(Z, y)
    return out


def summarise(rows: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, Any]]:
    """Mean ± standard error of every score of every system."""
    return {
        system: {score: bq.mean_se([r[system][score] for r in rows]) for score in rows[0][system]}
        for system in rows[0]
    }


def sets(n_subsets: int, draws: int) -> Iterator[tuple[str, Iterator[Any]]]:
    """(name, its subsets) for every set of the benchmark."""
    if (bq.DATA_DIR / "mnist" / "mnist5k.npz").is_file():
        for k in COMPONENTS:
            yield (f"mnist_pca{k}" if k else "mnist_pixels"), mnist(k, n_subsets)
    for d in DIMENSIONS:
        yield f"noise_{d}", synthetic(d, 1, draws)
    for d in GROUP_DIMENSIONS:
        yield f"three_{d}", synthetic(d, 3, draws)
    if (bq.DATA_DIR / "newsgroups" / "source" / "newsgroups4_bydate_raw.jsonl.gz").is_file():
        for k in (50, 100):
            yield f"newsgroups_lsa{k}", lsa(k, n_subsets)
    yield "digits_pca30", digits_pca(30, n_subsets)


def markdown(results: dict[str, Any]) -> str:
    """One row per set and system."""
    lines = [
        "| data | system | dendrogram purity | flat clusters | ARI of flat clusters | "
        "seconds per fit | fits with the full covariance / the shared precision |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for name, summary in results.items():
        for system, s in summary.items():
            purity = bq.fmt(*s["purity"]) if "purity" in s else "–"
            seconds = f"{s['seconds'][0]:.2f}" if "seconds" in s else "–"
            full = (
                f"{s['full covariance'][0]:.2f} / {s['shared precision'][0]:.2f}"
                if "full covariance" in s
                else "–"
            )
            lines.append(
                f"| {name} | {system} | {purity} | {s['clusters'][0]:.1f} | "
                f"{bq.fmt(*s['ari'])} | {seconds} | {full} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table, write the requested files; returns the results."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--subsets", type=int, default=5, help="MNIST subsets")
    p.add_argument("--draws", type=int, default=3, help="draws of each synthetic set")
    p.add_argument("--json", type=Path)
    p.add_argument("--markdown", type=Path)
    args = p.parse_args(argv)
    results: dict[str, Any] = {}
    start = time.perf_counter()
    for name, rows in sets(args.subsets, args.draws):
        results[name] = summarise([one(X, y) for X, y in rows])
        print(f"{name}: done ({time.perf_counter() - start:.0f} s)", flush=True)
    bq.report(markdown(results), results, args.markdown, args.json)
    return results


if __name__ == "__main__":
    main()
