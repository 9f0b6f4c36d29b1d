"""The rose tree's default model.

The data's type, constant columns, and the choice among real-valued cluster models
(:class:`~rosetree.AutoModel`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ._validation import _in_different_units, is_sparse
from .config import (
    AutoModel,
    BetaBernoulli,
    ClusterModel,
    DirichletMultinomial,
    NormalGamma,
    NormalInverseWishart,
)
from .exceptions import DegenerateModelWarning

__all__ = ["candidates_for", "choose_model", "constant_columns", "data_kind"]

#: ``NormalGamma(shared_precision=True)`` is a candidate of ``model="auto"`` only for at
#: least this many columns, all in one unit (their ranges within ``RANGE_SPREAD``). It
#: measures every column in one unit, which the ranges cannot always tell: the penguins'
#: bills in tenths of a millimetre beside their mass in grams have ranges within a factor
#: of 60, and the shared precision, chosen there, let the mass decide the tree (dendrogram
#: purity 0.64 against 0.93; ``benchmarks/bench_integer_data.py``). Few columns are most
#: often measurements in units of their own, and the shared precision gains where many
#: columns of noise would otherwise weigh as much as the rest
#: (``benchmarks/bench_many_columns.py``).
SHARED_PRECISION_MIN_COLUMNS = 10


def _observed_values(X: Any) -> np.ndarray:
    """The stored values of ``X`` (a sparse matrix's explicit entries), NaN left out."""
    values = np.asarray(X.data if is_sparse(X) else X, dtype=np.float64).ravel()
    return values[~np.isnan(values)]


def data_kind(X: Any) -> str:
    """``"binary"`` (entries 0 or 1), ``"counts"`` (non-negative integers, some 0) or ``"real"``.

    NaN entries (missing) are left out; a sparse matrix's implicit entries are zeros.
    Counts start at zero: integers of which none is 0 (lengths in millimetres, masses in
    grams, years, ratings from 1) are measurements in whole units, and ``"real"``.
    """
    dtype = getattr(X, "dtype", None)
    if dtype == np.bool_ or (dtype == np.uint8 and X.size and X.max() <= 1):
        return "binary"  # read in place: no float64 copy of a large binary array
    implicit_zero = is_sparse(X) and X.nnz < np.prod(X.shape)
    if dtype == np.uint8:
        stored = X.data if is_sparse(X) else X
        return "counts" if implicit_zero or not stored.all() else "real"
    values = _observed_values(X)
    if np.all((values == 0.0) | (values == 1.0)):
        return "binary"
    if np.all(values >= 0.0) and np.all(values == np.floor(values)):
        return "counts" if implicit_zero or np.any(values == 0.0) else "real"
    return "real"


def _in_one_unit(rows: Any) -> bool:
    """Whether the columns look to share a unit (their ranges within ``RANGE_SPREAD``)."""
    if is_sparse(rows):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            lo = np.asarray(rows.min(axis=0).todense(), dtype=np.float64).ravel()
            hi = np.asarray(rows.max(axis=0).todense(), dtype=np.float64).ravel()
        return not _in_different_units(np.vstack([lo, hi]))[0]
    return not _in_different_units(np.asarray(rows, dtype=np.float64))[0]


def _has_data_driven_scale(model: ClusterModel) -> bool:
    """Whether the Gaussian model's location and scale come from the data's columns."""
    if isinstance(model, NormalGamma):
        return model.m0 is None and model.b0 is None
    if isinstance(model, NormalInverseWishart):
        return model.mu0 is None and model.psi0 is None
    return False


def constant_columns(X: Any, model: Any) -> np.ndarray:
    """Columns to leave out of a Gaussian model's fit: those whose observed values are equal.

    Under a Gaussian cluster model whose prior scale is set from the data's column
    variances, a constant column gets a prior variance near zero, and every cluster's
    density in it grows without bound as it takes more rows: such a column outweighs the
    others and decides the tree alone (a zero column added to scikit-learn's wine data
    changes its clusters). Under one precision for every column
    (``NormalGamma(shared_precision=True)``) it only adds entries without spread to every
    cluster. Either way it says nothing about which rows belong together, so it is left
    out, with a :class:`~rosetree.DegenerateModelWarning`. Returns the indices (empty for
    other models, sparse input, or when every column is constant).
    """
    if is_sparse(X) or not _has_data_driven_scale(model):
        return np.empty(0, dtype=np.int64)
    return equal_valued_columns(X)


def equal_valued_columns(X: np.ndarray) -> np.ndarray:
    """Columns of dense ``X`` whose observed values are all equal (or none observed).

    Empty when every column is so: there is then nothing else to read.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns
        lo, hi = np.nanmin(X, axis=0), np.nanmax(X, axis=0)
    constant = np.flatnonzero(~(lo < hi))
    if constant.size == X.shape[1]:
        return np.empty(0, dtype=np.int64)
    return constant


def warn_constant(constant: np.ndarray, names: Any, who: str, stacklevel: int) -> None:
    """Say which constant columns ``who`` leaves out (a model, or "auto"'s candidates)."""
    shown = [str(names[j]) if names is not None else str(j) for j in constant[:10]]
    more = f" and {constant.size - 10} more" if constant.size > 10 else ""
    warnings.warn(
        f"{who} leaves out {constant.size} constant column(s) "
        f"({', '.join(shown)}{more}): a column without variance says nothing about which "
        "rows belong together, and with a variance per column set from the data it would "
        "decide the tree alone. They are listed in constant_features_.",
        DegenerateModelWarning,
        stacklevel=stacklevel + 1,
    )


def choose_model(
    auto: AutoModel,
    X: Any,
    fit_log_evidence: Callable[[ClusterModel, Any], float],
    seed: int,
) -> tuple[ClusterModel, dict[str, Any]]:
    r"""The model :class:`~rosetree.AutoModel` picks for ``X``, with the record of the choice.

    ``fit_log_evidence(model, rows)`` fits the estimator's greedy tree with ``model`` to
    ``rows`` and returns its :math:`\ln p(D \mid T)`. Real-valued data are scored on at
    most ``auto.sample`` rows drawn with ``seed``.
    """
    auto._check()
    kind = data_kind(X)
    record: dict[str, Any] = {"data": kind, "rule": auto.rule}
    if kind == "binary":
        model: ClusterModel = BetaBernoulli()
    elif kind == "counts":
        model = DirichletMultinomial()
    else:
        model = _choose_real(auto, X, fit_log_evidence, seed, record)
    record["chosen"] = type(model).__name__
    return model, record


def candidates_for(auto: AutoModel, rows: Any) -> list[ClusterModel]:
    """The real-valued candidates of ``auto`` that can be fitted to ``rows`` (maybe none)."""
    dense = not is_sparse(rows)
    missing = bool(np.isnan(rows.data if is_sparse(rows) else rows).any())
    one_unit = _in_one_unit(rows)
    n, d = rows.shape
    return [
        m
        for m in auto._candidates()
        if m._reads_sparse or dense
        if m._accepts_missing or not missing
        # One precision for every column measures them all in one unit: on columns in
        # different units (grams beside millimetres) the widest would decide the tree.
        if (one_unit and d >= SHARED_PRECISION_MIN_COLUMNS)
        or not (isinstance(m, NormalGamma) and m.shared_precision is True)
        # A full covariance needs more rows than columns, or it follows its prior.
        if not (isinstance(m, NormalInverseWishart) and d >= n)
    ]


def _choose_real(
    auto: AutoModel,
    X: Any,
    fit_log_evidence: Callable[[ClusterModel, Any], float],
    seed: int,
    record: dict[str, Any],
) -> ClusterModel:
    n = X.shape[0]
    rows = X
    if n > auto.sample:
        picked = np.sort(np.random.default_rng(seed).choice(n, auto.sample, replace=False))
        rows = X[picked]
        record["rows"] = int(auto.sample)
    else:
        record["rows"] = int(n)
    candidates = candidates_for(auto, rows)
    if not candidates:
        candidates = [NormalGamma()]
    record["candidates"] = []
    best: tuple[float, ClusterModel] | None = None
    for m in candidates:
        log_evidence = float(fit_log_evidence(m, rows))
        one = float(m.log_marginal(rows.toarray() if is_sparse(rows) else rows))
        score = log_evidence - one if auto.rule == "structure" else log_evidence
        record["candidates"].append(
            {
                "model": m,
                "log_evidence": log_evidence,
                "log_marginal_one_cluster": one,
                "score": score,
            }
        )
        # The first candidate wins a tie.
        if best is None or score > best[0]:
            best = (score, m)
    assert best is not None
    return best[1]
