"""Command-line interface: ``rosetree fit DATA.csv [--family ...]`` and ``rosetree demo``."""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from ._choices import (
    COALESCENT_INFERENCES,
    COALESCENT_LIKELIHOODS,
    COALESCENT_SMC,
    MIXINGS,
    PYDT_INFERENCES,
    PYDT_LIKELIHOODS,
    ROSE_FLAT_CLUSTERS,
)
from ._core import __version__
from .coalescent import KingmanCoalescent
from .config import (
    AutoModel,
    BetaBernoulli,
    ClusterModel,
    DirichletMultinomial,
    NormalGamma,
    NormalInverseWishart,
)
from .estimators import BayesianRoseTree
from .exceptions import InvalidParameterError, RoseTreeError
from .pydt import PitmanYorDiffusionTree
from .tree import _dumps

#: Trees up to this depth are written as indented JSON, deeper ones compactly.
_INDENT_DEPTH = 64

_FAMILIES = {
    "brt": "Bayesian rose trees, or BHC with --binary (score: log evidence ln p(D|T))",
    "coalescent": "Kingman's coalescent (score: log joint ln p(x, pi) of data and timed tree)",
    "pydt": "Pitman-Yor diffusion tree (score: log joint ln p(X, T, t) with the "
    "hyperparameters; the model is not translation invariant: centre, and scale, the "
    "columns first)",
}

#: Options of some families only, by destination: (flag, families). Their defaults are
#: None, so that one given for another family is refused rather than ignored; the
#: estimators' own defaults apply to those not given.
_FAMILY_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "model": ("--model", ("brt",)),
    "alpha": ("--alpha", ("brt",)),
    "beta": ("--beta", ("brt",)),
    "mixing": ("--mixing", ("brt",)),
    "gamma": ("--gamma", ("brt",)),
    "dp_alpha": ("--dp-alpha", ("brt",)),
    "binary": ("--binary", ("brt",)),
    "contract": ("--contract", ("brt",)),
    "restarts": ("--restarts", ("brt",)),
    "flat": ("--flat", ("brt",)),
    "cut_threshold": ("--cut-threshold", ("brt",)),
    "n_jobs": ("--n-jobs", ("brt", "coalescent")),
    "likelihood": ("--likelihood", ("coalescent", "pydt")),
    "inference": ("--inference", ("coalescent", "pydt")),
    "particles": ("--particles", ("coalescent",)),
    "lambda_": ("--lambda", ("coalescent",)),
    "llr_threshold": ("--llr-threshold", ("coalescent",)),
    "noise": ("--noise", ("coalescent",)),
    "n_iter": ("--n-iter", ("pydt",)),
    "ddt": ("--ddt", ("pydt",)),
}

#: Estimator parameters set from the options, by destination (those not given are left at
#: the estimator's default).
_PARAMS = {
    "brt": {
        "mixing": "mixing",
        "gamma": "gamma",
        "dp_alpha": "dp_alpha",
        "binary": "binary",
        "contract": "contract",
        "n_jobs": "n_jobs",
        "learn": "learn_hyperparameters",
        "restarts": "n_restarts",
        "flat": "flat_clusters",
        "n_clusters": "n_clusters",
        "cut_threshold": "cut_threshold",
        "seed": "random_state",
    },
    "coalescent": {
        "likelihood": "likelihood",
        "inference": "inference",
        "particles": "n_particles",
        "lambda_": "Lambda",
        "llr_threshold": "llr_threshold",
        "noise": "noise",
        "learn": "learn_hyperparameters",
        "seed": "random_state",
        "n_jobs": "n_jobs",
    },
    "pydt": {
        "likelihood": "likelihood",
        "inference": "inference",
        "n_iter": "n_iter",
        "learn": "learn_hyperparameters",
        "seed": "random_state",
    },
}

_MODELS = {
    "auto": "chosen from the data: bernoulli for 0/1, multinomial for counts (integers with "
    "zeros), and for real values (integers without a zero among them too) normal-gamma, "
    "gaussian or spherical, whichever shows the stronger cluster structure",
    "bernoulli": "beta-Bernoulli (binary 0/1 data; empty or NaN cells are missing)",
    "gaussian": "Normal-inverse-Wishart (real-valued data, data-driven prior)",
    "normal-gamma": "independent Normal-Gamma features (real-valued data, data-driven prior; "
    "empty or NaN cells are missing)",
    "spherical": "Normal-Gamma features with one precision for all of a cluster's columns "
    "(real-valued columns in one unit: principal components, embeddings; data-driven prior)",
    "multinomial": "Dirichlet-multinomial (rows of counts)",
}


#: The data types of AutoModel, as the report names them.
_KINDS = {"binary": "binary data", "counts": "counts", "real": "real-valued data"}


def _model(name: str, alpha: float | None, beta: float | None) -> ClusterModel | AutoModel:
    if name == "auto":
        if alpha is not None or beta is not None:
            flag = "--alpha" if alpha is not None else "--beta"
            raise ValueError(f"{flag} sets a prior of --model bernoulli or multinomial, not auto")
        return AutoModel()
    if name == "bernoulli":
        return BetaBernoulli(alpha=alpha, beta=beta)
    if name == "gaussian":
        return NormalInverseWishart()
    if name == "normal-gamma":
        return NormalGamma()
    if name == "spherical":
        return NormalGamma(shared_precision=True)
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
        parts.append(f"{name} = {_values(getattr(model, name))}")
    return ", ".join(parts)


def _values(value: Any) -> str:
    """A number, or the range of an array of them."""
    v = np.atleast_1d(np.asarray(value, dtype=float))
    return f"{v[0]:.4g}" if v.size == 1 else f"{v.min():.3g} .. {v.max():.3g}"


def _line(name: str, text: str) -> str:
    return f"{name:<17} {text}\n"


def _check_options(args: argparse.Namespace) -> None:
    """Refuse the options that the chosen family (or its other settings) would not use."""
    family = args.family
    for dest, (flag, families) in _FAMILY_OPTIONS.items():
        if getattr(args, dest, None) is not None and family not in families:
            owners = " or ".join(families)
            raise ValueError(f"{flag} is an option of --family {owners}, not of --family {family}")
    if args.n_clusters is not None and args.n_clusters < 1:
        raise ValueError(f"--n-clusters must be at least 1, got {args.n_clusters}")
    if getattr(args, "max_children", None) is not None and args.max_children < 1:
        raise ValueError(f"--max-children must be at least 1, got {args.max_children}")
    if family == "brt":
        mixing = args.mixing or "brt"
        if args.dp_alpha is not None and mixing != "dp":
            raise ValueError(f"--dp-alpha applies to --mixing dp, not to --mixing {mixing}")
        if args.gamma is not None and mixing == "dp":
            raise ValueError("--gamma applies to --mixing brt or gamma, not to --mixing dp")
        if args.cut_threshold is not None and args.flat == "map":
            raise ValueError(
                "--cut-threshold applies to --flat dp or cut, not to --flat map (the most "
                "probable partition has no threshold)"
            )
        if args.restarts is not None and not args.learn:
            raise ValueError("--restarts applies to --learn (the random restarts of learning)")
        if args.seed is not None and not args.restarts:
            raise ValueError(
                "--seed applies to --learn --restarts K (the greedy search is deterministic)"
            )
        return
    likelihoods: tuple[str, ...]
    inferences: tuple[str, ...]
    if family == "coalescent":
        likelihoods, inferences = ("auto", *COALESCENT_LIKELIHOODS), COALESCENT_INFERENCES
    else:
        likelihoods, inferences = PYDT_LIKELIHOODS, PYDT_INFERENCES
    for flag, value, allowed in (
        ("--likelihood", args.likelihood, likelihoods),
        ("--inference", args.inference, inferences),
    ):
        if value is not None and value not in allowed:
            raise ValueError(
                f"{flag} {value} is not one of --family {family}'s: {', '.join(allowed)}"
            )
    if family == "coalescent":
        if args.inference not in COALESCENT_SMC:
            inference = args.inference or "greedy-rate1"
            for flag, value in (("--particles", args.particles), ("--seed", args.seed)):
                if value is not None:
                    raise ValueError(
                        f"{flag} applies to SMC inference (--inference "
                        f"{', '.join(COALESCENT_SMC)}), not to {inference}"
                    )
        if args.llr_threshold is not None and args.n_clusters is not None:
            raise ValueError(
                "--llr-threshold and --n-clusters are two rules for the flat clusters; give one"
            )


def _estimator(
    args: argparse.Namespace, model: ClusterModel | AutoModel | None = None
) -> BayesianRoseTree | KingmanCoalescent | PitmanYorDiffusionTree:
    """The unfitted estimator of ``args.family`` with the options given (checked first)."""
    _check_options(args)
    params: dict[str, Any] = {
        param: getattr(args, dest)
        for dest, param in _PARAMS[args.family].items()
        if getattr(args, dest, None) is not None
    }
    # Progress on standard error unless --quiet: each estimator writes a line about once a
    # second of a long fit (and per learning iteration), so short fits stay silent.
    params["verbose"] = not args.quiet
    if args.family == "brt":
        return BayesianRoseTree(model=model, **params)
    if args.family == "coalescent":
        if "llr_threshold" in params:  # the threshold is that of the paper's rule
            params["flat_clusters"] = "llr"
        return KingmanCoalescent(**params)
    if args.ddt:  # Neal's Dirichlet diffusion tree: binary branch points
        params.update(alpha=0.0, beta=0.0)
    return PitmanYorDiffusionTree(**params)


def _n_clusters(tree: Any, k: int) -> tuple[np.ndarray, str]:
    """``--n-clusters K``: K clusters where the tree has K rows, and the rule that made them.

    The lowest cut of the heights with at most K clusters; where a multi-way node leaves no
    cut with exactly K, its children are grouped (``Tree.max_clusters(K,
    split_multiway=True)``), and the rule says so.
    """
    lowest = tree.max_clusters(k)
    labels = tree.max_clusters(k, split_multiway=True)
    if labels.max() == lowest.max():
        return labels, f"at most {k}, lowest cut of the heights"
    return labels, (
        f"{k}: the lowest cut of the heights gives {lowest.max() + 1}, so a node's children "
        "were grouped, its largest children alone and the others together"
    )


def _flat_clusters(est: Any, family: str, n_clusters: int | None) -> tuple[np.ndarray, str] | None:
    """The flat cluster labels and the rule that made them (None: the tree has none)."""
    if family == "brt":
        if est.n_clusters is not None:
            return _n_clusters(est.tree_, est.n_clusters)
        if est.flat_clusters == "map":
            rule = "most probable tree-consistent partition"
        elif est.flat_clusters == "dp":
            rule = f"r >= {est.cut_threshold:g} cut under the DP prior"
        else:
            rule = f"r >= {est.cut_threshold:g} cut"
        return est.labels_, rule
    if n_clusters is not None:
        return _n_clusters(est.tree_, n_clusters)
    if family == "coalescent":
        if est.flat_clusters == "dp":
            return est.labels_, f"r >= {est.cut_threshold:g} cut under the DP prior"
        return est.labels_, f"split log likelihood ratio > {est.llr_threshold:g}"
    return est.labels_, "r >= 0.5 cut under the DP prior"


def _summary(est: Any, family: str) -> tuple[str, dict[str, Any]]:
    """The family's lines of the report, and its scores for the JSON document."""
    tree = est.tree_
    n_internal, depth = tree.n_nodes - tree.n_leaves, tree.depth()
    internal = f"{n_internal} (depth {depth})"
    if family == "brt":
        chosen = getattr(est, "model_selection_", None)
        text = (
            (
                _line("model", f"{chosen['chosen']} (chosen for {_KINDS[chosen['data']]})")
                if chosen is not None
                else ""
            )
            + _line("log evidence", f"ln p(D|T) = {est.log_evidence_:.4f}")
            + _line("internal nodes", internal)
            + _line("partitions", f"10^{tree.n_partitions(log10=True):.2f}")
        )
        return text, {}
    scores: dict[str, Any] = {"log_joint": est.log_joint_}
    root = _line("root time", f"t = {tree.heights[tree.root]:.6g}")
    if family == "coalescent":
        text = _line("log joint", f"ln p(x, pi) = {est.log_joint_:.4f}")
        if est.log_marginal_ is not None:
            scores["log_marginal"] = est.log_marginal_
            text += _line(
                "log marginal",
                f"ln p(x) ~ {est.log_marginal_:.4f} (SMC estimate, "
                f"{len(est.particles_)} particles)",
            )
        return text + root + _line("internal nodes", internal), scores
    scores.update(alpha=est.alpha_, beta=est.beta_, c=est.c_, sigma2=est.sigma2_)
    joint = f"ln p(X, T, t) = {est.log_joint_:.4f}"
    if est.likelihood == "probit":
        joint += " (ln p(X | T, t) by expectation propagation)"
    widest = max(len(c) for c in tree.children)
    text = (
        _line("log joint", joint)
        + _line(
            "hyperparameters",
            f"alpha = {est.alpha_:.4g}, beta = {est.beta_:.4g}, c = {est.c_:.4g}, "
            f"sigma2 = {est.sigma2_:.4g}",
        )
        + root
        + _line(
            "internal nodes", f"{n_internal} (depth {depth}; at most {widest} branches at a point)"
        )
    )
    if est.acceptance_rate_ is not None:
        text += _line("acceptance rate", f"{est.acceptance_rate_:.3f} (subtree moves)")
    return text, scores


def _report(est: Any, names: list[str] | None, args: argparse.Namespace) -> None:
    """Print the fitted tree and its summary, and write the files asked for.

    ``args`` are the parsed options; without ``family`` (a namespace made by hand) the
    estimator is a Bayesian rose tree.
    """
    family = getattr(args, "family", "brt")
    tree = est.tree_
    # With `--labels-out -` standard output holds the CSV alone; the report goes to stderr.
    out = sys.stderr if getattr(args, "labels_out", None) == "-" else sys.stdout
    out.write(tree.format(labels=names, max_leaves=args.max_children) + "\n\n")
    text, scores = _summary(est, family)
    flat = _flat_clusters(est, family, getattr(args, "n_clusters", None))
    if flat is not None:
        text += _line("flat clusters", f"{len(np.unique(flat[0]))} ({flat[1]})")
    if family == "brt" and args.learn:
        rule = (
            f"dp_alpha = {est.dp_alpha_:.4g}" if est.mixing == "dp" else f"gamma = {est.gamma_:.4g}"
        )
        text += _line("learned", f"{rule}; {_describe(est.model_)}")
    elif family == "coalescent" and args.learn:
        text += _line("learned", f"Lambda = {_values(est.Lambda_)}")
    out.write(text)
    timed = family != "brt"
    if args.newick:
        # The coalescent's and the diffusion tree's heights are times: write them as branch
        # lengths (Tree.from_newick(..., leaf_time=0 or 1) reads them back).
        Path(args.newick).write_text(tree.to_newick(labels=names, lengths=timed) + "\n")
        out.write(f"wrote Newick{' with branch lengths' if timed else ''} to {args.newick}\n")
    if args.json:
        # Indentation grows with depth: quadratic in size for deep trees, so only shallow
        # trees are indented.
        indent = 1 if tree.depth() <= _INDENT_DEPTH else None
        doc = tree.to_dict(labels=names)
        doc = {"family": family, "n_leaves": doc.pop("n_leaves"), **scores, **doc}
        Path(args.json).write_text(_dumps(doc, indent) + "\n")
        out.write(f"wrote JSON to {args.json}\n")
    if args.labels_out:
        assert flat is not None  # _check_options refuses --labels-out without clusters
        labels = flat[0]
        to_stdout = args.labels_out == "-"
        with (
            contextlib.nullcontext(sys.stdout)
            if to_stdout
            else open(args.labels_out, "w", newline="")
        ) as fh:
            writer = csv.writer(fh, lineterminator="\n" if to_stdout else "\r\n")
            if names is None:
                writer.writerow(["cluster"])
                writer.writerows([int(k)] for k in labels)
            else:
                writer.writerow(["name", "cluster"])
                writer.writerows([name, int(k)] for name, k in zip(names, labels, strict=True))
        if not to_stdout:
            out.write(f"wrote cluster labels to {args.labels_out}\n")


def _brt_args(p: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    g = p.add_argument_group("Bayesian rose trees (--family brt)")
    g.add_argument(
        "--mixing",
        choices=MIXINGS,
        default=None,
        help="mixing-proportion rule (default: brt, eq 1.7)",
    )
    g.add_argument("--gamma", type=float, default=None, help="gamma in (0, 1) (default 0.5)")
    g.add_argument(
        "--dp-alpha", type=float, default=None, help="DP concentration (default 1) for --mixing dp"
    )
    g.add_argument(
        "--binary",
        action="store_true",
        default=None,
        help="joins only: Bayesian hierarchical clustering",
    )
    g.add_argument(
        "--contract",
        action="store_true",
        default=None,
        help="contract edges after the greedy search",
    )
    g.add_argument(
        "--restarts",
        type=int,
        default=None,
        metavar="K",
        help="random restarts of --learn (default 0)",
    )
    g.add_argument(
        "--flat",
        choices=ROSE_FLAT_CLUSTERS,
        default=None,
        help="flat clusters: dp = top-down cut r >= --cut-threshold with r under the "
        "Dirichlet-process prior (default), cut = the same with r under --mixing, "
        "map = most probable tree-consistent partition",
    )
    g.add_argument(
        "--cut-threshold",
        type=float,
        default=None,
        metavar="T",
        help="threshold of --flat dp or cut (default 0.5)",
    )
    return g


def _common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress lines on standard error (fits longer than a second and "
        "hyperparameter learning write them)",
    )
    p.add_argument(
        "--learn",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="learn the hyperparameters: brt, the cluster model's and gamma (or dp-alpha) by "
        "maximising ln p(D|T) (BRT section 1.4.2; default off); coalescent, Lambda "
        "(Teh et al. section 4.4; default off); pydt, c and sigma2, and alpha and beta "
        "unless --ddt (default on)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        metavar="N",
        help="random seed (default 0): of --restarts (brt), SMC (coalescent), the search or "
        "the sampler (pydt)",
    )
    p.add_argument(
        "--n-clusters",
        type=int,
        default=None,
        metavar="K",
        help="at most K flat clusters, the lowest cut of the tree's heights (brt: overrides "
        "--flat; coalescent: instead of --llr-threshold; pydt: its only flat clusters)",
    )
    p.add_argument(
        "--n-jobs", type=int, default=None, help="threads (brt, coalescent; default: all cores)"
    )
    p.add_argument(
        "--newick",
        metavar="FILE",
        help="write the tree in Newick format (coalescent, pydt: with branch lengths)",
    )
    p.add_argument("--json", metavar="FILE", help="write the tree with per-node statistics as JSON")
    p.add_argument(
        "--labels-out",
        metavar="FILE",
        help="write the flat clusters as CSV: a header, then one cluster label per data row "
        "(with its name, when the rows have names); - for standard output (the report then "
        "goes to standard error)",
    )
    p.add_argument(
        "--max-children",
        type=int,
        default=None,
        metavar="K",
        help="print at most K children per node",
    )


def _family_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "Kingman's coalescent and the diffusion tree (--family coalescent, pydt)"
    )
    g.add_argument(
        "--likelihood",
        # Both families have a multinomial likelihood: each choice once.
        choices=tuple(dict.fromkeys(("auto", *COALESCENT_LIKELIHOODS, *PYDT_LIKELIHOODS))),
        default=None,
        help="coalescent: auto (default: multinomial for 0/1 rows, else brownian), brownian "
        "(real values) or multinomial (categories 0, 1, ..., empty for missing); pydt: "
        "gaussian (real values; default), probit (0/1, empty for missing) or multinomial",
    )
    g.add_argument(
        "--inference",
        choices=(*COALESCENT_INFERENCES, *PYDT_INFERENCES),
        default=None,
        help="coalescent: greedy-rate1 (default), greedy-maxprob, greedy-minduration, or "
        "sequential Monte Carlo smc-priorprior, smc-priorpost, smc-postpost; pydt: mcmc "
        "(default, started from average linkage) or greedy-em",
    )
    g.add_argument(
        "--particles",
        type=int,
        default=None,
        metavar="N",
        help="coalescent: SMC particles (default 50)",
    )
    g.add_argument(
        "--lambda",
        dest="lambda_",
        type=float,
        default=None,
        metavar="L",
        help="coalescent: the Brownian covariance rate Lambda = L I, or the mutation rate "
        "(default: each column's variance, or rate 1; the start of --learn)",
    )
    g.add_argument(
        "--noise",
        type=float,
        default=None,
        metavar="E",
        help="coalescent: Brownian observation noise, in units of Lambda (default 0.1; 0 is "
        "the paper's noiseless model, which refuses equal rows)",
    )
    g.add_argument(
        "--llr-threshold",
        type=float,
        default=None,
        metavar="T",
        help="coalescent: flat clusters by the paper's rule instead of the default model "
        "comparison: split a node while its log likelihood ratio of two subtrees over one "
        "exceeds T",
    )
    g.add_argument(
        "--n-iter",
        type=int,
        default=None,
        metavar="N",
        help="pydt: greedy-em passes (at most) or mcmc sweeps (default 100)",
    )
    g.add_argument(
        "--ddt",
        action="store_true",
        default=None,
        help="pydt: Neal's Dirichlet diffusion tree (alpha = beta = 0: binary branch points)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``rosetree`` command."""
    parser = argparse.ArgumentParser(
        prog="rosetree",
        description="Bayesian hierarchical clustering: Bayesian rose trees (and BHC), Kingman's "
        "coalescent, Pitman-Yor diffusion trees.",
    )
    parser.add_argument("--version", action="version", version=f"rosetree {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    fit = sub.add_parser(
        "fit", help="cluster the rows of a CSV file (a header row, or --no-header)"
    )
    fit.add_argument("data", help="CSV file, one data item per row")
    fit.add_argument(
        "--family",
        choices=tuple(_FAMILIES),
        default="brt",
        help="; ".join(f"{k}: {v}" for k, v in _FAMILIES.items()) + " (default: brt)",
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
    fit.add_argument(
        "--standardize",
        action="store_true",
        help="centre every column and scale it to unit variance before fitting (the coalescent "
        "and the diffusion tree compare columns on one scale; the rose tree's default priors "
        "are set per column and need it less)",
    )
    _common_args(fit)
    brt = _brt_args(fit)
    brt.add_argument(
        "--model",
        choices=tuple(_MODELS),
        default=None,
        help="; ".join(f"{k}: {v}" for k, v in _MODELS.items()) + " (default: auto)",
    )
    brt.add_argument(
        "--alpha",
        type=float,
        default=None,
        help="prior pseudo-count alpha (default: bernoulli, each feature's smoothed frequency "
        "of ones; multinomial, 1)",
    )
    brt.add_argument(
        "--beta",
        type=float,
        default=None,
        help="prior pseudo-count beta (default: bernoulli, one minus the frequency of ones)",
    )
    _family_args(fit)
    demo = sub.add_parser("demo", help="cluster the bundled 33 animals x 102 features data")
    _common_args(demo)
    _brt_args(demo)
    demo.set_defaults(family="brt")
    return parser


def _flag_of(family: str, exc: Exception) -> str:
    """``"--flag: "`` of the option behind an estimator's parameter error, else ``""``."""
    if not isinstance(exc, InvalidParameterError):
        return ""
    for dest, param in _PARAMS[family].items():
        if param == exc.parameter:
            return _FAMILY_OPTIONS.get(dest, ("--" + dest.replace("_", "-"),))[0] + ": "
    return ""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rosetree`` command."""
    try:
        code = _run(build_parser().parse_args(argv))
        sys.stdout.flush()  # a reader that left shows here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away (`rosetree demo | head -1`): it read what it wanted, so stop
        # quietly with success. Python flushes stdout again at exit, so point it at devnull.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _standardize(X: np.ndarray) -> np.ndarray:
    """Columns centred and scaled to unit variance over their observed entries.

    A column without variance is only centred.
    """
    with np.errstate(all="ignore"):
        mean, sd = np.nanmean(X, axis=0), np.nanstd(X, axis=0)
    return cast(
        "np.ndarray", (X - np.nan_to_num(mean)) / np.where(np.isfinite(sd) & (sd > 0), sd, 1.0)
    )


def _csv_position(exc: Exception, columns: list[str] | None, header: bool) -> str:
    """Where in the CSV file a data error lies, for the error message.

    Its line (1-based, the header counted) and its column's name; empty when the error
    names no entry or no file was read.
    """
    row, column = getattr(exc, "row", None), getattr(exc, "column", None)
    if columns is None or (row is None and column is None):
        return ""
    parts = []
    if row is not None:
        parts.append(f"line {row + 1 + header} of the file")
    if column is not None and 0 <= column < len(columns):
        parts.append(f"column {columns[column]!r}")
    return f" ({', '.join(parts)})" if parts else ""


def _run(args: argparse.Namespace) -> int:
    columns: list[str] | None = None  # the data file's columns, once read
    try:
        for option in ("newick", "json", "labels_out"):
            path = getattr(args, option)
            if path is not None and path != "-" and not Path(path).resolve().parent.is_dir():
                flag = "--" + option.replace("_", "-")
                raise OSError(f"{flag} {path}: the directory does not exist")
        model: ClusterModel | AutoModel | None = None
        names: list[str] | None
        if args.command == "demo":
            model = BetaBernoulli()
        elif args.family == "brt":
            model = _model(args.model or "auto", args.alpha, args.beta)
        est = _estimator(args, model)
        if args.command == "demo":
            from .datasets import load_animals

            ds = load_animals()
            X, names = ds.data, ds.names
            print(
                f"{ds.description}; beta-Bernoulli clusters, mixing={args.mixing or 'brt'}\n",
                file=sys.stderr if args.labels_out == "-" else sys.stdout,
            )
        else:
            X, names, columns = read_csv(args.data, args.labels, args.ignore, not args.no_header)
            if args.standardize:
                X = _standardize(X)
            if names is not None and (args.newick or args.json):
                counts = collections.Counter(names)
                repeated = next((n for n in names if counts[n] > 1), None)
                if repeated is not None:
                    flag = "--newick" if args.newick else "--json"
                    raise ValueError(
                        f"--labels {args.labels}: the name {repeated!r} is repeated, and "
                        f"{flag} needs one name per leaf"
                    )
        est.fit(X)
    except BrokenPipeError:
        raise
    except (RoseTreeError, ValueError, OSError) as exc:
        flag = _flag_of(args.family, exc)
        where = _csv_position(exc, columns, not getattr(args, "no_header", False))
        if "beta-Bernoulli model takes" in str(exc):
            where += (
                "; for real-valued columns use --model auto, normal-gamma, gaussian or spherical"
            )
        print(f"rosetree: error: {flag}{exc}{where}", file=sys.stderr)
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
