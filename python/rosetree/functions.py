"""Functions on given trees: evidence of any tree, exhaustive search, excess code length."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from . import _core
from ._selection import constant_columns
from ._validation import check_array, check_flag, check_int, finite_array, mixing_args
from .config import ClusterModel, resolve_model
from .exceptions import (
    DegenerateModelWarning,
    InvalidParameterError,
    InvalidTreeError,
    NumericalError,
)
from .tree import RoseTree, nested_to_internal

__all__ = ["evaluate_tree", "excess_bits", "log_evidence", "optimal_tree"]


def evaluate_tree(
    X: Any,
    tree: Any,
    *,
    model: ClusterModel | None = None,
    mixing: str = "brt",
    gamma: float = 0.5,
    dp_alpha: float = 1.0,
    binary: bool = False,
) -> RoseTree:
    """The given tree over the rows of ``X``, with every node's quantities computed.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
    tree : nested lists of row indices, or Tree
        E.g. ``[[0, 1, 2], [3, 4]]`` (every row appears exactly once), a :class:`RoseTree`,
        or a published tree read by :meth:`Tree.from_newick`.
    model, mixing, gamma, dp_alpha
        As in :class:`BayesianRoseTree`.
    binary : bool, default=False
        Require a binary tree (raise :class:`InvalidTreeError` otherwise).

    Warns
    -----
    DegenerateModelWarning
        Where ``X`` has constant columns and ``model`` is Gaussian with its prior scale
        taken from the data. :class:`BayesianRoseTree` leaves such columns out
        (``constant_features_``); here every column is evaluated, as given.
    """
    X = check_array(X)
    model = resolve_model(model)
    model._check_data(X)
    constant = constant_columns(X, model)
    if constant.size:
        shown = [int(j) for j in constant[:10]]
        warnings.warn(
            f"X has {constant.size} constant column(s) {shown}{' …' if constant.size > 10 else ''}"
            f": under {type(model).__name__}'s prior, whose scale comes from the columns, they "
            "change every cluster's density without telling rows apart. BayesianRoseTree "
            "leaves them out (constant_features_); evaluate its tree on "
            "np.delete(X, est.constant_features_, axis=1) to get its log_evidence_.",
            DegenerateModelWarning,
            stacklevel=2,
        )
    internal = nested_to_internal(tree, X.shape[0])
    if check_flag(binary, "binary") and any(len(c) != 2 for c in internal):
        raise InvalidTreeError("binary=True, but the tree has a node with more than two children")
    kwargs = mixing_args(mixing, gamma, dp_alpha)
    return RoseTree(_core.evaluate_tree(X, model._spec(), internal, **kwargs))


def log_evidence(
    X: Any,
    tree: Any,
    *,
    model: ClusterModel | None = None,
    mixing: str = "brt",
    gamma: float = 0.5,
    dp_alpha: float = 1.0,
    binary: bool = False,
) -> float:
    r""":math:`\ln p(D \mid T)` (BRT eq 1.5) of a given tree; see :func:`evaluate_tree`."""
    return evaluate_tree(
        X, tree, model=model, mixing=mixing, gamma=gamma, dp_alpha=dp_alpha, binary=binary
    ).log_evidence


def optimal_tree(
    X: Any,
    *,
    model: ClusterModel | None = None,
    mixing: str = "brt",
    gamma: float = 0.5,
    dp_alpha: float = 1.0,
    binary: bool = False,
) -> RoseTree:
    r"""The maximum-likelihood tree :math:`T^* = \arg\max_T p(D \mid T)` by exhaustive search.

    For ``"brt"`` and ``"gamma"`` the search is a dynamic programme over subsets of rows
    (exact, up to 12 rows); for ``"dp"`` every rose tree is enumerated (up to 8 rows: 660,032
    trees). With ``binary=True`` only binary trees are considered.
    """
    X = check_array(X)
    model = resolve_model(model)
    model._check_data(X)
    kwargs = mixing_args(mixing, gamma, dp_alpha)
    core = _core.optimal_tree(X, model._spec(), binary=check_flag(binary, "binary"), **kwargs)
    return RoseTree(core)


def excess_bits(log_evidence_optimal: Any, log_evidence_found: Any, n_items: int) -> float:
    r""":math:`\Delta_l` of BRT eq 1.31: mean excess code length in bits per data item.

    .. math:: \Delta_l = \frac{1}{l\,n} \sum_{i=1}^{n}
              \log_2 p(D_i \mid T_i^*) - \log_2 p(D_i \mid T_i)

    Parameters
    ----------
    log_evidence_optimal, log_evidence_found : array_like of shape (n_datasets,)
        Natural-log evidences of the optimal and of the found trees.
    n_items : int
        *l*, the number of data items in each data set.
    """
    opt, got = (
        finite_array(value, name, max_ndim=1)
        for value, name in (
            (log_evidence_optimal, "log_evidence_optimal"),
            (log_evidence_found, "log_evidence_found"),
        )
    )
    if opt.shape != got.shape or opt.ndim != 1 or opt.size == 0:
        raise InvalidParameterError(
            "log_evidence_optimal and log_evidence_found must be non-empty 1-D arrays of the "
            "same length",
            "log_evidence_found",
        )
    check_int(n_items, "n_items")
    value = float(_core.excess_bits(opt.tolist(), got.tolist(), int(n_items)))
    if not np.isfinite(value):
        raise NumericalError(
            "the excess bits overflow double precision (log evidences near the float range)"
        )
    return value
