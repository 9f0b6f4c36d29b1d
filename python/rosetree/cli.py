"""Command-line interface: ``rosetree fit DATA.csv`` and ``rosetree demo``."""

from __future__ import annotations

import argparse
import csv
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._core import __version__
from .config import (
    BetaBernoulli,
    ClusterModel,
    DirichletMultinomial,
    NormalGamma,
    NormalInverseWishart,
)
from .estimators import BayesianRoseTree
from .exceptions import RoseTreeError

#: Trees up to this depth are written as indented JSON, deeper ones compactly.
_INDENT_DEPTH = 64

_MODELS = {
    "bernoulli": "beta-Bernoulli (binary 0/1 data; empty or NaN cells are missing)",
    "gaussian": "Normal-inverse-Wishart (real-valued data, data-driven prior)",
    "normal-gamma": "independent Normal-Gamma features (real-valued data, data-driven prior; "
    "empty or NaN cells are missing)",
    "multinomial": "Dirichlet-multinomial (rows of counts)",
}


def _model(name: str, alpha: float | None, beta: float | None) -> ClusterModel:
    if name == "bernoulli":
        return BetaBernoulli(alpha=alpha, beta=beta)
    if name == "gaussian":
        return NormalInverseWishart()
    if name == "normal-gamma":
        return NormalGamma()
    return DirichletMultinomial() if alpha is None else DirichletMultinomial(alpha=alpha)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def read_csv(
    path: str, labels: str | None, ignore: Sequence[str], header: bool = True
) -> tuple[np.ndarray, list[str] | None, list[str]]:
    """Read a CSV into (data, leaf labels, feature names).

    With ``header`` the first row names the columns, and a first row of numbers only is an
    error (it would be data read as names); without, the columns are named ``0``, ``1``, ….
    Every column except ``labels`` and ``ignore`` must be numeric; empty cells and ``NA``
    / ``NaN`` become NaN (missing).
    """
    with open(path, newline="") as fh:
        reader = csv.reader(fh)
        try:
            first = next(reader)
        except StopIteration:
            raise ValueError(f"{path} is empty") from None
        rows = [r for r in reader if r]
    if not header:
        rows.insert(0, first)
        columns = [str(k) for k in range(len(first))]
    elif first and all(_is_number(cell.strip()) for cell in first):
        raise ValueError(
            f"the first row of {path} holds only numbers, so it looks like data, not column "
            "names; add a header row or pass --no-header"
        )
    else:
        columns = first
    for col in [labels, *ignore]:
        if col is not None and col not in columns:
            raise ValueError(f"column {col!r} is not in {path} (columns: {', '.join(columns)})")
    keep = [k for k, h in enumerate(columns) if h != labels and h not in ignore]
    data = np.empty((len(rows), len(keep)))
    for i, r in enumerate(rows):
        if len(r) != len(columns):
            raise ValueError(
                f"row {i} of {path} has {len(r)} fields; the first row has {len(columns)}"
            )
        for j, k in enumerate(keep):
            cell = r[k].strip()
            if cell in ("", "NA", "NaN", "nan"):
                data[i, j] = np.nan
                continue
            try:
                data[i, j] = float(cell)
            except ValueError:
                raise ValueError(
                    f"row {i}, column {columns[k]!r} of {path} is not a number ({cell!r}); "
                    "name label columns with --labels and others with --ignore"
                ) from None
    names = [r[columns.index(labels)] for r in rows] if labels is not None else None
    return data, names, [columns[k] for k in keep]


def _describe(model: ClusterModel) -> str:
    """The learned hyperparameters in one line (ranges for per-feature values)."""
    parts = []
    for name in ("alpha", "beta", "kappa0", "nu0", "a0", "b0"):
        if not hasattr(model, name):
            continue
        v = np.atleast_1d(np.asarray(getattr(model, name), dtype=float))
        text = f"{v[0]:.4g}" if v.size == 1 else f"{v.min():.3g} .. {v.max():.3g}"
        parts.append(f"{name} = {text}")
    return ", ".join(parts)


def _report(est: BayesianRoseTree, names: list[str] | None, args: argparse.Namespace) -> None:
    tree = est.tree_
    out = sys.stdout
    out.write(tree.format(labels=names, max_leaves=args.max_children) + "\n\n")
    n_clusters = len(np.unique(est.labels_))
    if est.n_clusters is not None:
        rule = f"at most {est.n_clusters}, lowest cut of the heights"
    elif est.flat_clusters == "map":
        rule = "most probable tree-consistent partition"
    elif est.flat_clusters == "dp":
        rule = f"r >= {est.cut_threshold:g} cut under the DP prior"
    else:
        rule = f"r >= {est.cut_threshold:g} cut"
    out.write(
        f"log evidence      ln p(D|T) = {est.log_evidence_:.4f}\n"
        f"internal nodes    {tree.n_nodes - tree.n_leaves} (depth {tree.depth()})\n"
        f"partitions        10^{tree.n_partitions(log10=True):.2f}\n"
        f"flat clusters     {n_clusters} ({rule})\n"
    )
    if args.learn:
        rule = (
            f"dp_alpha = {est.dp_alpha_:.4g}"
            if args.mixing == "dp"
            else f"gamma = {est.gamma_:.4g}"
        )
        out.write(f"learned           {rule}; {_describe(est.model_)}\n")
    if args.newick:
        Path(args.newick).write_text(tree.to_newick(labels=names) + "\n")
        out.write(f"wrote Newick to {args.newick}\n")
    if args.json:
        # Indentation grows with depth: quadratic in size for deep trees, so only shallow
        # trees are indented.
        indent = 1 if tree.depth() <= _INDENT_DEPTH else None
        Path(args.json).write_text(tree.to_json(labels=names, indent=indent) + "\n")
        out.write(f"wrote JSON to {args.json}\n")
    if args.labels_out:
        with open(args.labels_out, "w", newline="") as fh:
            writer = csv.writer(fh)
            if names is None:
                writer.writerow(["cluster"])
                writer.writerows([int(k)] for k in est.labels_)
            else:
                writer.writerow(["name", "cluster"])
                writer.writerows([name, int(k)] for name, k in zip(names, est.labels_, strict=True))
        out.write(f"wrote cluster labels to {args.labels_out}\n")


def _fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mixing",
        choices=("brt", "gamma", "dp"),
        default="brt",
        help="mixing-proportion rule (default: brt, eq 1.7)",
    )
    p.add_argument("--gamma", type=float, default=0.5, help="gamma in (0, 1) (default 0.5)")
    p.add_argument("--dp-alpha", type=float, default=1.0, help="DP concentration for --mixing dp")
    p.add_argument(
        "--binary", action="store_true", help="joins only: Bayesian hierarchical clustering"
    )
    p.add_argument("--contract", action="store_true", help="contract edges after the greedy search")
    p.add_argument(
        "--learn",
        action="store_true",
        help="learn the hyperparameters by maximising ln p(D|T) (BRT section 1.4.2)",
    )
    p.add_argument(
        "--restarts", type=int, default=0, metavar="K", help="random restarts of --learn"
    )
    p.add_argument(
        "--flat",
        choices=("dp", "cut", "map"),
        default="dp",
        help="flat clusters: dp = top-down cut r >= --cut-threshold with r under the "
        "Dirichlet-process prior (default), cut = the same with r under --mixing, "
        "map = most probable tree-consistent partition",
    )
    p.add_argument(
        "--cut-threshold", type=float, default=0.5, metavar="T", help="threshold of --flat cut"
    )
    p.add_argument(
        "--n-clusters",
        type=int,
        default=None,
        metavar="K",
        help="at most K flat clusters, the lowest cut of the tree's heights (overrides --flat)",
    )
    p.add_argument("--n-jobs", type=int, default=None, help="threads (default: all cores)")
    p.add_argument("--newick", metavar="FILE", help="write the tree in Newick format")
    p.add_argument("--json", metavar="FILE", help="write the tree with per-node statistics as JSON")
    p.add_argument(
        "--labels-out",
        metavar="FILE",
        help="write the flat clusters as CSV: a header, then one cluster label per data row "
        "(with its name, when the rows have names)",
    )
    p.add_argument(
        "--max-children",
        type=int,
        default=None,
        metavar="K",
        help="print at most K children per node",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rosetree`` command."""
    parser = argparse.ArgumentParser(
        prog="rosetree", description="Bayesian rose trees and Bayesian hierarchical clustering."
    )
    parser.add_argument("--version", action="version", version=f"rosetree {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser(
        "fit", help="cluster the rows of a CSV file (a header row, or --no-header)"
    )
    fit.add_argument("data", help="CSV file, one data item per row")
    fit.add_argument(
        "--model",
        choices=tuple(_MODELS),
        default="bernoulli",
        help="; ".join(f"{k}: {v}" for k, v in _MODELS.items()),
    )
    fit.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="prior pseudo-count alpha (default: bernoulli, each feature's smoothed frequency "
        "of ones; multinomial, 1)",
    )
    fit.add_argument(
        "--beta",
        type=float,
        default=None,
        help="prior pseudo-count beta (default: bernoulli, one minus the frequency of ones)",
    )
    fit.add_argument("--labels", metavar="COL", help="column holding leaf names")
    fit.add_argument(
        "--no-header",
        action="store_true",
        help="the first row is data; columns are named 0, 1, ... (for --labels, --ignore)",
    )
    fit.add_argument(
        "--ignore", metavar="COL", nargs="*", default=[], help="columns to leave out of the data"
    )
    _fit_args(fit)
    demo = sub.add_parser("demo", help="cluster the bundled 33 animals x 102 features data")
    _fit_args(demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rosetree`` command."""
    try:
        return _run(build_parser().parse_args(argv))
    except BrokenPipeError:
        # The reader went away (`rosetree demo | head`): stop quietly. Python flushes stdout
        # again at exit, so point it at devnull first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _run(args: argparse.Namespace) -> int:
    try:
        for option in ("newick", "json", "labels_out"):
            path = getattr(args, option)
            if path is not None and not Path(path).resolve().parent.is_dir():
                flag = "--" + option.replace("_", "-")
                raise OSError(f"{flag} {path}: the directory does not exist")
        if args.command == "demo":
            from .datasets import load_animals

            ds = load_animals()
            X, names = ds.data, ds.names
            model: ClusterModel = BetaBernoulli()
            print(f"{ds.description}; beta-Bernoulli clusters, mixing={args.mixing}\n")
        else:
            X, names, _ = read_csv(args.data, args.labels, args.ignore, not args.no_header)
            model = _model(args.model, args.alpha, args.beta)
        est = BayesianRoseTree(
            model=model,
            mixing=args.mixing,
            gamma=args.gamma,
            dp_alpha=args.dp_alpha,
            binary=args.binary,
            contract=args.contract,
            n_jobs=args.n_jobs,
            learn_hyperparameters=args.learn,
            n_restarts=args.restarts,
            flat_clusters=args.flat,
            n_clusters=args.n_clusters,
            cut_threshold=args.cut_threshold,
        ).fit(X)
    except BrokenPipeError:
        raise
    except (RoseTreeError, ValueError, OSError) as exc:
        print(f"rosetree: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rosetree: interrupted", file=sys.stderr)
        return 130
    try:
        _report(est, names, args)
    except BrokenPipeError:
        raise
    except OSError as exc:
        print(f"rosetree: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
