#!/usr/bin/env python3
"""Tables 1.2–1.4 of the BRT chapter: evidence, partitions and missing-data prediction.

For each data set and each of the five systems (BHC-DP, BRT-DP, BHC-γ, BRT-γ, BRT) the
hyperparameters are learned as in the chapter (§1.4.2: coordinate ascent between the greedy
tree and gradient steps on the per-feature beta-Bernoulli α, β and on γ or the DP
concentration), and the script reports

- Table 1.2: the log marginal likelihood ln p(D | T) of the tree found,
- Table 1.3: log10 of its number of tree-consistent partitions,
- Table 1.4: the log predictive probability (eq 1.24) of 10% of the entries, removed at
  random before fitting (hyperparameters learned on the observed entries: α and β shared
  by all features, and again per feature, which overfits),

as mean ± standard error over repeats. Data (``../shared/data``, or ``$ROSETREE_DATA``; see
each data set's README): ``toy`` (48 × 12) and ``digits024`` (120 × 64) are used whole, so
their Table 1.2/1.3 repeats are identical and only Table 1.4's random masks vary;
``spambase`` (57 features), ``digits`` (the 10-class optdigits stand-in for CEDAR digits,
64 features) and ``newsgroups`` (485 words) get a fresh class-balanced subsample of 120
rows per repeat.

Run ``python experiments/tables.py`` (``--repeats``, ``--restarts``, ``--jobs``;
``--quick`` for a smoke run).
"""

from __future__ import annotations

import csv
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import rosetree as rt
from common import ROOT, parser, print_table, write_json

DATA_DIR = Path(os.environ.get("ROSETREE_DATA", ROOT.parent / "shared" / "data"))

SYSTEMS = {
    "BHC-DP": {"mixing": "dp", "binary": True},
    "BRT-DP": {"mixing": "dp", "binary": False},
    "BHC-γ": {"mixing": "gamma", "binary": True},
    "BRT-γ": {"mixing": "gamma", "binary": False},
    "BRT": {"mixing": "brt", "binary": False},
}

#: The chapter's numbers (Tables 1.2–1.4): mean and standard error per data set and system.
PAPER = {
    "evidence": {
        "toy": [(-215, 0.0), (-215, 0.0), (-168, 0.1), (-167, 0.2), (-166, 0.1)],
        "spambase": [(-2258, 7.3), (-2259, 7.2), (-1980, 7.0), (-2006, 8.0), (-1973, 7.6)],
        "digits024": [(-4010, 6.8), (-4015, 6.8), (-3711, 6.9), (-3726, 6.9), (-3702, 7.0)],
        "digits": [(-4223, 6.9), (-4216, 6.9), (-3891, 6.7), (-3916, 6.6), (-3888, 6.8)],
        "newsgroups": [(-10912, 61), (-10937, 55), (-10606, 63), (-10807, 59), (-10645, 60)],
    },
    "log10_partitions": {
        "toy": [(4, 0.0), (4, 0.0), (4, 0.0), (4, 0.0), (1, 0.0)],
        "spambase": [(14, 0.1), (14, 0.1), (14, 0.1), (14, 0.1), (7, 0.1)],
        "digits024": [(15, 0.1), (15, 0.1), (15, 0.1), (13, 0.1), (6, 0.1)],
        "digits": [(17, 0.1), (17, 0.1), (17, 0.1), (16, 0.1), (8, 0.1)],
        "newsgroups": [(14, 0.1), (14, 0.1), (14, 0.1), (13, 0.1), (7, 0.1)],
    },
    "predictive": {
        "toy": [(-14.7, 0.7), (-14.7, 0.7), (-14.4, 0.6), (-14.6, 0.6), (-14.3, 0.6)],
        "spambase": [(-190, 1.7), (-187, 1.9), (-192, 1.7), (-192, 1.7), (-190, 1.6)],
        "digits024": [(-347, 2.1), (-345, 2.3), (-345, 2.2), (-345, 2.2), (-343, 2.1)],
        "digits": [(-372, 2.6), (-371, 2.7), (-369, 2.7), (-371, 2.6), (-370, 2.8)],
        "newsgroups": [(-1122, 11), (-1122, 11), (-1114, 11), (-1114, 11), (-1114, 11)],
    },
}


# --------------------------------------------------------------------------- data
def read_csv(path: Path, skip: int) -> tuple[np.ndarray, np.ndarray]:
    """Binary rows and labels of a prepared CSV (``skip`` leading id/label columns)."""
    with path.open(newline="") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    label = header.index("label")
    y = np.array([r[label] for r in body])
    X = np.array([[float(v) for v in r[skip:]] for r in body])
    return X, y


def balanced(X: np.ndarray, y: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """``per_class`` rows of every class, drawn without replacement (rows keep their order)."""
    rng = np.random.default_rng(seed)
    rows = [rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in np.unique(y)]
    return X[np.sort(np.concatenate(rows))]


def loaders() -> dict[str, Callable[[int], np.ndarray]]:
    """Per data set, a function of the repeat number that returns its binary data."""
    toy, _ = read_csv(DATA_DIR / "toy" / "toy.csv", skip=2)
    d024, _ = read_csv(DATA_DIR / "digits024" / "digits024_bin.csv", skip=2)
    spam, spam_y = read_csv(DATA_DIR / "spambase" / "spambase_bin.csv", skip=2)
    digits, digits_y = read_csv(DATA_DIR / "digits_optdigits" / "digits10_bin.csv", skip=2)
    news = np.load(DATA_DIR / "newsgroups" / "newsgroups4_485.npz")
    news_X, news_y = news["X"].astype(float), news["y"]
    return {
        "toy": lambda r: toy,
        "spambase": lambda r: balanced(spam, spam_y, 60, seed=r),
        "digits024": lambda r: d024,
        "digits": lambda r: balanced(digits, digits_y, 12, seed=r),
        "newsgroups": lambda r: balanced(news_X, news_y, 30, seed=r),
    }


# --------------------------------------------------------------------------- one job
def run_one(job: tuple[str, int, str, np.ndarray, int]) -> dict[str, Any]:
    """Fit one system to one repeat of one data set, complete and with 10% missing."""
    name, repeat, system, X, restarts = job
    options = dict(
        **SYSTEMS[system],
        learn_hyperparameters=True,
        n_restarts=restarts,
        random_state=repeat,
        n_jobs=1,
    )
    start = time.perf_counter()
    est = rt.BayesianRoseTree(**options).fit(X)
    # 10% of the entries missing at random (the same mask for every system).
    mask = np.random.default_rng([repeat, 10]).random(X.shape) < 0.1
    X_obs = np.where(mask, np.nan, X)
    # Eq 1.24 under hyperparameters learned on the observed entries: shared by all features
    # (Table 1.4), and per feature, which overfits (see docs/experiments.md).
    tied = rt.BayesianRoseTree(**options, tie_hyperparameters=True).fit(X_obs)
    per_feature = rt.BayesianRoseTree(**options).fit(X_obs)
    return {
        "data": name,
        "repeat": repeat,
        "system": system,
        "evidence": est.log_evidence_,
        "log10_partitions": est.tree_.n_partitions(log10=True),
        "predictive": tied.log_predictive_missing(X),
        "predictive_per_feature": per_feature.log_predictive_missing(X),
        "n_missing": int(mask.sum()),
        "gamma": est.gamma_,
        "dp_alpha": est.dp_alpha_,
        "seconds": time.perf_counter() - start,
    }


def summarise(values: list[float]) -> tuple[float, float]:
    """Mean and standard error of the mean."""
    v = np.asarray(values, dtype=float)
    se = float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
    return float(v.mean()), se


def fmt(mean: float, se: float, digits: int) -> str:
    """``mean ± se`` with ``digits`` decimals."""
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


TITLES = {
    "evidence": "Table 1.2: log marginal likelihood ln p(D | T)",
    "log10_partitions": "Table 1.3: log10 of the number of tree-consistent partitions",
    "predictive": "Table 1.4: log predictive probability of 10% missing entries (eq 1.24), "
    "α and β shared by all features",
    "predictive_per_feature": "Table 1.4 with α and β learned per feature",
}


def markdown(path: Path, tables: dict[str, dict[str, dict[str, Any]]]) -> None:
    """The three tables as Markdown, each cell ours with the paper's value below it."""
    lines = []
    for key, by_data in tables.items():
        lines += [f"**{TITLES[key]}** (ours / paper)", ""]
        lines.append("| data | " + " | ".join(SYSTEMS) + " |")
        lines.append("|---" * (len(SYSTEMS) + 1) + "|")
        for name, cells in by_data.items():
            row = [f"{fmt(c['mean'], c['se'], 1)} / {fmt(*c['paper'], 1)}" for c in cells.values()]
            lines.append(f"| {name} | " + " | ".join(row) + " |")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    print(f"wrote {path}")


def main() -> None:
    """Run every (data set, repeat, system) job in a process pool and write the tables."""
    p = parser(__doc__ or "")
    p.add_argument("--repeats", type=int, default=5, help="repeats per data set (default 5)")
    p.add_argument(
        "--restarts", type=int, default=0, help="random restarts of the learning (default 0)"
    )
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--data", nargs="*", default=None, help="only these data sets")
    args = p.parse_args()
    load = loaders()
    names = args.data or list(load)
    repeats = 2 if args.quick else args.repeats
    jobs = []
    for name in names:
        for r in range(repeats):
            X = load[name](r)
            if args.quick:
                X = X[:: max(1, X.shape[0] // 24)]
            jobs.extend((name, r, system, X, args.restarts) for system in SYSTEMS)
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(run_one, jobs))
    elapsed = time.perf_counter() - start

    tables: dict[str, dict[str, dict[str, Any]]] = {}
    for key in TITLES:
        rows = []
        tables[key] = {}
        for name in names:
            cells = {}
            for k, system in enumerate(SYSTEMS):
                vals = [x[key] for x in runs if x["data"] == name and x["system"] == system]
                mean, se = summarise(vals)
                paper = PAPER[key.removesuffix("_per_feature")][name][k]
                cells[system] = {"mean": mean, "se": se, "paper": list(paper)}
            tables[key][name] = cells
            rows.append([name] + [fmt(c["mean"], c["se"], 1) for c in cells.values()])
        print(f"\n{key} (ours)")
        print_table(["data", *SYSTEMS], rows)
    suffix = "_quick" if args.quick else ""
    markdown(args.out / f"tables{suffix}.md", tables)
    write_json(
        args.out / f"tables{suffix}.json",
        {
            "command": "python experiments/tables.py "
            f"--repeats {repeats} --restarts {args.restarts}" + (" --quick" if args.quick else ""),
            "repeats": repeats,
            "restarts": args.restarts,
            "seconds": elapsed,
            "tables": tables,
            "runs": runs,
        },
    )


if __name__ == "__main__":
    main()
