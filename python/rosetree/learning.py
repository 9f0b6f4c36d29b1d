r"""Hyperparameter learning (BRT §1.4.2).

Gradients of :math:`\ln p(D \mid T)` and coordinate ascent between the greedy tree and the
hyperparameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from . import _core
from ._streaming import explicit_model, model_from_hyperparameters
from ._validation import check_array, check_flag, check_int, check_seed, mixing_args
from .config import ClusterModel, NormalGamma, resolve_model
from .exceptions import InvalidParameterError, NumericalError
from .tree import RoseTree, nested_to_internal

__all__ = ["EvidenceGradient", "LearningResult", "evidence_gradient", "learn_hyperparameters"]


class EvidenceGradient(NamedTuple):
    r""":math:`\ln p(D \mid T)` and its gradient (BRT eqs 1.27–1.28).

    Attributes
    ----------
    log_evidence : float
    model : dict of str to ndarray
        :math:`\partial \ln p / \partial \eta` by hyperparameter name: ``alpha``, ``beta`` (one
        entry per feature) for :class:`BetaBernoulli`; ``alpha`` for
        :class:`DirichletMultinomial`; ``kappa0``, ``nu0`` and ``psi0_scale`` (the derivative
        with respect to *c* in :math:`\Psi_0 \to c\,\Psi_0`, at *c* = 1) for
        :class:`NormalInverseWishart`; ``m0``, ``kappa0``, ``a0`` and ``b0`` (``m0`` and
        ``b0`` per feature) for :class:`NormalGamma`.
    mixing : float
        :math:`\partial \ln p / \partial \gamma`, or :math:`\partial \ln p / \partial a` (the
        DP concentration) for ``mixing="dp"``.
    """

    log_evidence: float
    model: dict[str, np.ndarray]
    mixing: float


def _check_learnable(model: ClusterModel) -> None:
    if not model._learnable:
        if isinstance(model, NormalGamma):
            raise InvalidParameterError(
                "hyperparameter learning is not available for NormalGamma(shared_precision="
                "True): its gradient is not implemented; give its hyperparameters, or learn "
                "those of NormalGamma()",
                "model",
            )
        raise InvalidParameterError(
            "hyperparameter learning needs a built-in model (BetaBernoulli, "
            "NormalInverseWishart, NormalGamma or DirichletMultinomial), got "
            f"{type(model).__name__}",
            "model",
        )


def evidence_gradient(
    X: Any,
    tree: Any,
    *,
    model: ClusterModel | None = None,
    mixing: str = "brt",
    gamma: float = 0.5,
    dp_alpha: float = 1.0,
) -> EvidenceGradient:
    r"""The gradient of :math:`\ln p(D \mid T)` with respect to the hyperparameters.

    Computed by the recursions of BRT eqs 1.27 (cluster hyperparameters :math:`\eta`) and
    1.28 (the mixing parameter), in one pass over the tree.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
    tree : nested lists of row indices, or RoseTree
    model, mixing, gamma, dp_alpha
        As in :class:`BayesianRoseTree`.

    Returns
    -------
    EvidenceGradient
    """
    X = check_array(X)
    model = resolve_model(model)
    _check_learnable(model)
    internal = nested_to_internal(tree, X.shape[0])
    log_ev, flat, g_mix = _core.evidence_gradient(
        X, model._spec(), internal, **mixing_args(mixing, gamma, dp_alpha)
    )
    parts = model._gradient_parts(np.asarray(flat))
    if not (np.isfinite(log_ev) and np.isfinite(g_mix) and np.all(np.isfinite(flat))):
        raise NumericalError(
            "ln p(D | T) or its gradient is not finite in double precision (hyperparameters "
            "or data too extreme)"
        )
    return EvidenceGradient(float(log_ev), parts, float(g_mix))


@dataclass(frozen=True)
class LearningResult:
    r"""The outcome of :func:`learn_hyperparameters`.

    Attributes
    ----------
    model : ClusterModel
        The cluster model with the learned hyperparameters.
    gamma : float
        Learned :math:`\gamma` (``"brt"``, ``"gamma"``); the given value for ``"dp"``.
    dp_alpha : float
        Learned DP concentration (``"dp"``); the given value otherwise.
    tree : RoseTree
        The greedy tree under the learned hyperparameters.
    log_evidence : float
        :math:`\ln p(D \mid T)` of ``tree`` under the learned hyperparameters.
    trace : list of float
        The best start's evidence after every step, alternating the greedy tree and the
        hyperparameter optimisation; it never decreases.
    start_log_evidences : list of float
        The final evidence reached from each start (the first is the given hyperparameters);
        ``-inf`` for a random start that is no prior in double precision (drawn around an
        extreme given prior) or whose search fails numerically.
    """

    model: ClusterModel
    gamma: float
    dp_alpha: float
    tree: RoseTree
    log_evidence: float
    trace: list[float]
    start_log_evidences: list[float]


def learn_hyperparameters(
    X: Any,
    *,
    model: ClusterModel | None = None,
    mixing: str = "brt",
    gamma: float = 0.5,
    dp_alpha: float = 1.0,
    binary: bool = False,
    tie: bool = False,
    n_restarts: int = 0,
    max_iter: int = 20,
    tol: float = 1e-6,
    random_state: int | None = None,
    fit_tree: Callable[[np.ndarray, ClusterModel, float, float], RoseTree] | None = None,
    verbose: bool = False,
) -> LearningResult:
    r"""Coordinate ascent on :math:`\ln p(D \mid T)` over the tree and the hyperparameters.

    Alternates the greedy tree for the current hyperparameters with L-BFGS-B on the
    hyperparameters for the current tree (gradients from :func:`evidence_gradient`), until
    an iteration improves the evidence by less than ``tol`` (relative), at most ``max_iter``
    times. A new greedy tree is kept only if it is more likely than the old one, so the
    evidence never decreases: it ends at least as high as at the given hyperparameters. Each
    hyperparameter is searched between :math:`e^{-12}` and :math:`e^{12}` on its log scale
    (:math:`\gamma` on its logit scale); a given value outside that range is kept (not
    clipped) until a value inside it gives a more likely tree. With ``n_restarts`` the
    ascent is repeated from random starts around the given hyperparameters (each log-scale
    coordinate moved by a standard normal draw), and the most likely result is returned, as
    in the BRT chapter (which used 10). The whole ascent runs in the compiled core
    (``rosetree::brt::learn`` in Rust): the optimiser is the L-BFGS-B of Nocedal and
    Morales's version 3.0, the algorithm and stopping rules of SciPy's.

    Parameters
    ----------
    X : array_like of shape (n_samples, n_features)
    model, mixing, gamma, dp_alpha
        The starting point, as in :class:`BayesianRoseTree`.
    binary : bool, default=False
        Learn for BHC (binary trees).
    tie : bool, default=False
        Learn one value shared by all features (``alpha`` and ``beta`` of
        :class:`BetaBernoulli`, ``alpha`` of :class:`DirichletMultinomial`; for
        :class:`NormalGamma`, one factor on every ``b0`` with ``m0`` held) instead of one
        per feature. Without ``tie``, when the starting values are the same for every
        feature, the shared values are learned first and the per-feature ascent starts from
        their optimum (so it ends at least as likely as ``tie=True``); the trace holds both
        stages. With ``tie`` and per-feature starting values that differ (such as the
        defaults resolved from the data), the ascent starts from their mean, another prior,
        so the result can be less likely than the given per-feature values.
    n_restarts : int, default=0
    max_iter : int, default=20
    tol : float, default=1e-6
    random_state : int, default=None
        Seed of the restarts (``None`` means 0).
    fit_tree : callable, optional
        ``fit_tree(X, model, gamma, dp_alpha) -> RoseTree``: the tree search, called with
        the interpreter held (the core waits for it). Default: the exact greedy search
        (with ``binary``), in the core. :class:`BayesianRoseTree` uses the core's search
        with all of its search options.
    verbose : bool, default=False
        Write a line to standard error after each iteration: the start, the iteration and
        :math:`\ln p(D \mid T)`. Ctrl-C stops the learning with ``KeyboardInterrupt``.

    Returns
    -------
    LearningResult
    """
    result, _ = _learn(
        X,
        model=model,
        mixing=mixing,
        gamma=gamma,
        dp_alpha=dp_alpha,
        search={"binary": check_flag(binary, "binary")},
        tie=tie,
        n_restarts=n_restarts,
        max_iter=max_iter,
        tol=tol,
        random_state=random_state,
        fit_tree=fit_tree,
        verbose=verbose,
    )
    return result


def _learn(
    X: Any,
    *,
    model: ClusterModel | None,
    mixing: str,
    gamma: float,
    dp_alpha: float,
    search: dict[str, Any],
    tie: bool,
    n_restarts: int,
    max_iter: int,
    tol: float,
    random_state: int | None,
    fit_tree: Callable[[np.ndarray, ClusterModel, float, float], RoseTree] | None,
    verbose: bool,
) -> tuple[LearningResult, _core.BrtFit]:
    """:func:`learn_hyperparameters` with the core search's options ``search``.

    ``search`` holds the options of ``_core.BrtParams`` other than the mixing rule. Also
    returns the core's fit of the learnt model and tree.
    """
    X = check_array(X)
    model = resolve_model(model)
    _check_learnable(model)
    kw = mixing_args(mixing, gamma, dp_alpha)
    for name, value, low in (("n_restarts", n_restarts, 0), ("max_iter", max_iter, 1)):
        check_int(value, name, low=low)
    if not (isinstance(tol, (int, float)) and tol >= 0):
        raise InvalidParameterError(f"tol must be a number >= 0, got {tol!r}", "tol")
    tie, verbose = check_flag(tie, "tie"), check_flag(verbose, "verbose")
    seed = check_seed(random_state)
    # Checks the starting value of the learnt mixing parameter too.
    params = _core.BrtParams(**kw, **search)
    learnt_dp = kw["mixing"] == "dp"

    def with_value(value: float) -> tuple[float, float]:
        """(gamma, dp_alpha) with the learnt one at ``value``."""
        return (kw["gamma"], value) if learnt_dp else (value, kw["dp_alpha"])

    callback = None
    if fit_tree is not None:
        user_fit_tree = fit_tree

        def callback(family: str, hyperparameters: dict[str, Any], value: float) -> Any:
            at = model_from_hyperparameters(family, hyperparameters)
            tree = user_fit_tree(X, at, *with_value(value))
            if not isinstance(tree, RoseTree):
                raise InvalidParameterError(
                    f"fit_tree must return a rosetree.RoseTree, got {type(tree).__name__}",
                    "fit_tree",
                )
            return tree._core

    fit, learnt_value, trace, finals = _core.learn_brt(
        X,
        model._spec(),
        params,
        tie=tie,
        n_restarts=int(n_restarts),
        max_iter=int(max_iter),
        tol=float(tol),
        seed=seed,
        fit_tree=callback,
        verbose=verbose,
    )
    learnt = explicit_model(fit)
    if tie:
        learnt = learnt._tied()
    tree = RoseTree(fit.tree())
    g, a = with_value(float(learnt_value))
    result = LearningResult(learnt, g, a, tree, tree.log_evidence, list(trace), list(finals))
    return result, fit
