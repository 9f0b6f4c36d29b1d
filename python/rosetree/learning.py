r"""Hyperparameter learning (BRT §1.4.2).

Gradients of :math:`\ln p(D \mid T)` and coordinate ascent between the greedy tree and the
hyperparameters.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from . import _core
from ._validation import check_array, check_flag, check_int, check_seed, mixing_args
from .config import ClusterModel, resolve_model
from .exceptions import InvalidParameterError, NumericalError
from .tree import RoseTree, nested_to_internal

__all__ = ["EvidenceGradient", "LearningResult", "evidence_gradient", "learn_hyperparameters"]

#: Bounds of the unconstrained (log or logit) coordinates, wide enough for any sensible
#: prior and tight enough that no step overflows: exp(±12) ≈ 6e-6 … 1.6e5.
_LOG_BOUND = 12.0
#: L-BFGS-B's relative tolerance on ln p(D | T): 1e-4 nats on an evidence of 1e4, far below
#: anything reported, and a third of the evaluations of SciPy's default.
_FTOL = 1e-8


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


# --------------------------------------------------------------------------- coordinates
@dataclass
class _Coordinates:
    r"""Maps the model's and the mixing rule's hyperparameters to an unconstrained vector.

    The model's part is the model class's own (``_learning_start``, ``_at_coordinates``,
    ``_coordinate_gradient``; see :class:`~rosetree.ClusterModel`); the mixing parameter
    is optimised on a logit scale (:math:`\gamma`) or a log scale (the DP concentration).
    Every vector within the bounds is a valid prior.
    """

    model: ClusterModel
    resolved: dict[str, Any]
    mixing: str
    tie: bool

    def initial(self, gamma: float, dp_alpha: float) -> np.ndarray:
        eta = self.model._learning_start(self.resolved, self.tie)
        theta = math.log(dp_alpha) if self.mixing == "dp" else math.log(gamma) - math.log1p(-gamma)
        return np.append(eta, theta)

    def shared_start(self) -> bool:
        """Whether the model has per-feature values and they all start equal."""
        return self.model._shared_start(self.resolved)

    def untie(self, u: np.ndarray) -> np.ndarray:
        """Tied coordinates ``u`` as per-feature ones: each shared value repeated."""
        return np.append(self.model._untie(self.resolved, u[:-1]), u[-1])

    def decode(self, u: np.ndarray) -> tuple[ClusterModel, float, float]:
        """(model, gamma, dp_alpha) at the unconstrained point ``u``."""
        eta, theta = u[:-1], float(u[-1])
        model = self.model._at_coordinates(self.resolved, eta, self.tie)
        if self.mixing == "dp":
            return model, 0.5, math.exp(theta)
        return model, _expit(theta), 1.0

    def chain(self, u: np.ndarray, flat: np.ndarray, g_mix: float) -> np.ndarray:
        """The gradient with respect to ``u``, from the one with respect to the values."""
        eta, theta = u[:-1], float(u[-1])
        g_eta = self.model._coordinate_gradient(self.resolved, eta, flat, self.tie)
        if self.mixing == "dp":
            g_theta = g_mix * math.exp(theta)
        else:
            gamma = _expit(theta)
            g_theta = g_mix * gamma * (1.0 - gamma)
        return np.append(g_eta, g_theta)


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
        The final evidence reached from each start (the first is the given hyperparameters).
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
    in the BRT chapter (which used 10).

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
        ``fit_tree(X, model, gamma, dp_alpha) -> RoseTree``: the tree search. Default: the
        exact greedy search (with ``binary``). :class:`BayesianRoseTree` passes its own, with
        all of its search options.
    verbose : bool, default=False
        Write a line to standard error after each iteration: the start, the iteration and
        :math:`\ln p(D \mid T)`. Ctrl-C stops the learning with ``KeyboardInterrupt``.

    Returns
    -------
    LearningResult
    """
    from scipy.optimize import minimize

    X = check_array(X)
    model = resolve_model(model)
    _check_learnable(model)
    mixing_args(mixing, gamma, dp_alpha)
    # The starting value of the learnt mixing parameter must be a valid one.
    if mixing == "dp" and not (0 < dp_alpha < math.inf):
        raise InvalidParameterError(
            f"dp_alpha (the starting value when learnt) must be finite and > 0, got {dp_alpha!r}",
            "dp_alpha",
        )
    if mixing != "dp" and not 0 < gamma < 1:
        raise InvalidParameterError(
            f"gamma (the starting value when learnt) must lie strictly between 0 and 1, "
            f"got {gamma!r}",
            "gamma",
        )
    for name, value, low in (("n_restarts", n_restarts, 0), ("max_iter", max_iter, 1)):
        check_int(value, name, low=low)
    if not (isinstance(tol, (int, float)) and tol >= 0):
        raise InvalidParameterError(f"tol must be a number >= 0, got {tol!r}", "tol")
    binary, tie = check_flag(binary, "binary"), check_flag(tie, "tie")
    if fit_tree is None:

        def fit_tree(X: np.ndarray, m: ClusterModel, g: float, a: float) -> RoseTree:
            params = _core.BrtParams(mixing=mixing, gamma=g, dp_alpha=a, binary=binary)
            return RoseTree(_core.fit_brt(X, m._spec(), params).tree())

    resolved = _core.resolved_model(X, model._spec())
    coords = _Coordinates(model, resolved, mixing, tie)
    # Per-feature values are learned from the optimum of shared ones when the start is
    # shared: from Beta(1, 1), the direct per-feature ascent can end at γ → 0 and a nearly
    # flat tree on sparse data (newsgroups, docs/experiments.md), a far worse optimum.
    staged = not tie and coords.shared_start()
    first = _Coordinates(model, resolved, mixing, True) if staged else coords
    u0 = first.initial(gamma, dp_alpha)
    rng = np.random.default_rng(check_seed(random_state))
    starts = [u0] + [
        np.clip(u0 + rng.standard_normal(u0.size), -_LOG_BOUND, _LOG_BOUND)
        for _ in range(int(n_restarts))
    ]

    def ascend(
        c: _Coordinates, u: np.ndarray, tree: RoseTree, trace: list[float], start: int
    ) -> tuple[np.ndarray, RoseTree]:
        def negative(u: np.ndarray, internal: list[list[int]]) -> tuple[float, np.ndarray]:
            m, g, a = c.decode(u)
            log_ev, flat, g_mix = _core.evidence_gradient(
                X, m._spec(), internal, mixing=mixing, gamma=g, dp_alpha=a
            )
            return -float(log_ev), -c.chain(u, np.asarray(flat), float(g_mix))

        for it in range(int(max_iter)):
            internal = [list(ch) for ch in tree.children[tree.n_leaves :]]
            res = minimize(
                negative,
                # A given start outside the box is kept until a point in the box beats it.
                np.clip(u, -_LOG_BOUND, _LOG_BOUND),
                args=(internal,),
                jac=True,
                method="L-BFGS-B",
                options={"ftol": _FTOL},
                bounds=[(-_LOG_BOUND, _LOG_BOUND)] * u.size,
            )
            if -res.fun > tree.log_evidence:
                # The optimiser's value comes from the gradient code; keep the point only if
                # the tree's own evaluation agrees that it is better (on extreme priors the
                # two can differ in the last digits).
                moved = _evaluate(X, internal, mixing, *c.decode(res.x))
                if moved.log_evidence >= tree.log_evidence:
                    u, tree = res.x, moved
            trace.append(tree.log_evidence)
            candidate = fit_tree(X, *c.decode(u))
            if candidate.log_evidence > tree.log_evidence:
                tree = candidate
            trace.append(tree.log_evidence)
            if verbose:
                print(
                    f"learning: start {start + 1}/{len(starts)}, iteration {it + 1}: "
                    f"ln p(D|T) = {tree.log_evidence:.6g}",
                    file=sys.stderr,
                    flush=True,
                )
            if trace[-1] - trace[-3] <= tol * max(1.0, abs(trace[-1])):
                break
        return u, tree

    best: LearningResult | None = None
    finals = []
    for start, u in enumerate(starts):
        tree = fit_tree(X, *first.decode(u))
        trace = [tree.log_evidence]
        u, tree = ascend(first, u, tree, trace, start)
        if staged:
            # The same prior in per-feature coordinates, so the evidence carries over.
            u, tree = ascend(coords, first.untie(u), tree, trace, start)
        finals.append(tree.log_evidence)
        if best is None or tree.log_evidence > best.log_evidence:
            m, g, a = coords.decode(u)
            best = LearningResult(m, g, a, tree, tree.log_evidence, trace, [])
    assert best is not None
    return LearningResult(
        best.model, best.gamma, best.dp_alpha, best.tree, best.log_evidence, best.trace, finals
    )


def _expit(theta: float) -> float:
    """``1 / (1 + exp(-theta))`` without overflow for starts as far out as ``gamma=5e-324``."""
    if theta >= -700.0:
        return 1.0 / (1.0 + math.exp(-theta))
    e = math.exp(theta)
    return e / (1.0 + e)


def _evaluate(
    X: np.ndarray,
    internal: list[list[int]],
    mixing: str,
    model: ClusterModel,
    gamma: float,
    dp_alpha: float,
) -> RoseTree:
    spec = model._spec()
    return RoseTree(
        _core.evaluate_tree(X, spec, internal, mixing=mixing, gamma=gamma, dp_alpha=dp_alpha)
    )
