"""Hierarchical clustering with Kingman's coalescent (Teh, Daumé & Roy 2007)."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _core
from ._validation import check_array, check_n_jobs, check_seed
from .exceptions import InvalidParameterError, InvalidTreeError, NotFittedError
from .tree import Tree

_LIKELIHOODS = ("brownian", "multinomial")
_SMC = ("smc-priorprior", "smc-priorpost", "smc-postpost")
_INFERENCES = ("greedy-rate1", *_SMC)
_PLANNED = ("greedy-maxprob", "greedy-minduration")


def _lambda(Lambda: Any) -> np.ndarray:
    """``Lambda`` as a float array (0-, 1- or 2-D); the core checks its shape and values."""
    try:
        arr = np.asarray(Lambda, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"Lambda must be a number, a (d,) vector or a (d, d) matrix, got {Lambda!r}", "Lambda"
        ) from None
    if arr.ndim > 2:
        raise InvalidParameterError(
            f"Lambda must have at most 2 dimensions, got {arr.ndim}", "Lambda"
        )
    return np.array(arr, dtype=np.float64, order="C")


def _root(root: Any) -> float | None:
    """``None`` for the flat root, else the variance factor ``s0`` of ``N(0, s0 Λ)``."""
    if isinstance(root, str):
        if root == "flat":
            return None
        raise InvalidParameterError(
            f'root must be "flat" or a number s0 >= 0, got {root!r}', "root"
        )
    if isinstance(root, bool) or not isinstance(root, (int, float, np.integer, np.floating)):
        raise InvalidParameterError(
            f'root must be "flat" or a number s0 >= 0, got {root!r}', "root"
        )
    return float(root)


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidParameterError(f"{name} must be a positive integer, got {value!r}", name)
    return int(value)


def _likelihood(likelihood: Any) -> str:
    if likelihood not in _LIKELIHOODS:
        raise InvalidParameterError(
            f"likelihood must be one of {_LIKELIHOODS}, got {likelihood!r}", "likelihood"
        )
    return str(likelihood)


def _wrap(structure: Any) -> Tree:
    """An :class:`rt.Tree <rosetree.Tree>` around a core tree."""
    tree = Tree.__new__(Tree)
    tree._set_structure(structure)
    return tree


class KingmanCoalescent:
    r"""Bayesian hierarchical clustering with Kingman's coalescent prior on the tree.

    The tree is a draw from Kingman's n-coalescent: leaves at time 0, coalescence times
    negative, every pair of lineages merging at rate 1 (so the ``i``-th waiting time is
    exponential with rate :math:`\binom{n-i+1}{2}`). The data are a Markov process run
    along the branches and observed at the leaves: Brownian diffusion with covariance rate
    :math:`\Lambda` per unit time, or independent-sites mutation of categorical features.

    Parameters
    ----------
    likelihood : {"brownian", "multinomial"}, default="brownian"
        Brownian diffusion of real-valued rows (eqs 11–13), or mutation of categories
        ``0, 1, ..., K_d - 1`` per column with NaN for missing (eqs 14–15); ``K_d`` is one
        more than the largest category seen (at least 2), the equilibrium the smoothed
        observed frequencies.
    Lambda : float, array of shape (d,) or (d, d), default=1.0
        Brownian: the covariance rate :math:`\Lambda = \lambda I`, a diagonal, or a full
        symmetric positive-definite matrix. Multinomial: the mutation rate of every feature
        (one number, or one per feature).
    inference : str, default="greedy-rate1"
        ``"greedy-rate1"`` (§4.2): each pair's most probable coalescence time with the
        pairwise rate 1, the pair coalescing soonest first; :math:`O(n^2)` time, :math:`O(nd)`
        memory. ``"smc-priorprior"``, ``"smc-priorpost"``, ``"smc-postpost"`` (§4.1):
        sequential Monte Carlo with ``n_particles`` particles, proposing the next merge's
        duration and pair from the local prior or posterior, resampling when the effective
        sample size falls below half; it estimates :math:`\ln p(x)` without bias (in
        :math:`p`). PostPost costs :math:`O(n^3)` per particle and needs the Brownian
        likelihood. Greedy-MaxProb and Greedy-MinDuration are not available yet.
    root : "flat" or float, default="flat"
        Brownian: the flat (improper) root, or a proper root :math:`N(0, s_0 \Lambda)` given
        by ``s0``. The multinomial root is its equilibrium (``"flat"``).
    n_particles : int, default=50
        SMC particles (unused by greedy inference).
    random_state : int, default=None
        Seed of the SMC (``None`` means 0); results are the same for any ``n_jobs``.
    n_jobs : int, default=None
        Threads for scoring pairs or moving particles (``None`` or -1: all cores).

    Attributes
    ----------
    tree_ : Tree
        The fitted tree (SMC: the heaviest particle); ``heights`` are the coalescence times
        (0 at the leaves, negative above), and ``to_newick(lengths=True)`` gives branch
        lengths.
    log_joint_ : float
        :math:`\ln p(x, \pi)` of ``tree_`` (eq 7, the true rates in the prior).
    log_marginal_ : float or None
        The SMC estimate of :math:`\ln p(x)`; ``None`` for greedy inference.
    particles_ : list of Tree or None
        SMC: every particle's tree (``tree_`` is the heaviest, the first on a tie);
        ``None`` for greedy inference, like the next two.
    particle_log_weights_ : ndarray of shape (n_particles,) or None
        SMC: the particles' normalised log weights.
    ess_ : ndarray of shape (n_samples - 1,) or None
        SMC: the effective sample size before each merge step's resampling decision.

    Examples
    --------
    >>> import numpy as np, rosetree as rt
    >>> X = np.array([[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0]])
    >>> est = rt.KingmanCoalescent(Lambda=1.0).fit(X)
    >>> est.tree_.to_nested()
    [[0, 1], [2, 3]]
    """

    def __init__(
        self,
        likelihood: str = "brownian",
        Lambda: Any = 1.0,
        inference: str = "greedy-rate1",
        n_particles: int = 50,
        root: Any = "flat",
        random_state: int | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.likelihood = likelihood
        self.Lambda = Lambda
        self.inference = inference
        self.n_particles = n_particles
        self.root = root
        self.random_state = random_state
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any = None) -> KingmanCoalescent:
        """Fit a coalescent tree to the rows of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data, one row per leaf.
        y : ignored

        Returns
        -------
        self : KingmanCoalescent

        Raises
        ------
        InvalidParameterError
            For an unknown likelihood or inference, or a bad ``Lambda`` (wrong shape, not
            positive, not symmetric positive definite) or ``root``.
        InvalidDataError
            For NaN with the Brownian likelihood, or a value that is not a category with the
            multinomial, naming its row and column.
        """
        likelihood = _likelihood(self.likelihood)
        if self.inference not in _INFERENCES:
            known = _INFERENCES + _PLANNED
            reason = "is not available yet" if self.inference in _PLANNED else "is unknown"
            raise InvalidParameterError(
                f"inference {self.inference!r} {reason}; available: {_INFERENCES}"
                f" (planned: {known[1:]})",
                "inference",
            )
        X = check_array(X, min_rows=1)
        options = dict(
            likelihood=likelihood,
            lambda_=_lambda(self.Lambda),
            root=_root(self.root),
            n_jobs=check_n_jobs(self.n_jobs),
        )
        self.log_marginal_: float | None = None
        self.particles_: list[Tree] | None = None
        self.particle_log_weights_: np.ndarray | None = None
        self.ess_: np.ndarray | None = None
        if self.inference in _SMC:
            trees, log_w, log_marginal, ess, best, log_joint = _core.coalescent_smc(
                X,
                proposal=self.inference.removeprefix("smc-"),
                n_particles=_positive_int(self.n_particles, "n_particles"),
                seed=check_seed(self.random_state),
                **options,
            )
            self.particles_ = [_wrap(t) for t in trees]
            self.particle_log_weights_ = np.asarray(log_w)
            self.ess_ = np.asarray(ess)
            self.log_marginal_ = float(log_marginal)
            self.tree_ = self.particles_[best]
        else:
            structure, log_joint = _core.fit_coalescent(X, inference=self.inference, **options)
            self.tree_ = _wrap(structure)
        self.log_joint_ = float(log_joint)
        self.n_features_in_ = X.shape[1]
        return self

    def __repr__(self) -> str:
        return (
            f"KingmanCoalescent(likelihood={self.likelihood!r}, Lambda={self.Lambda!r}, "
            f"inference={self.inference!r}, n_particles={self.n_particles!r}, "
            f"root={self.root!r})"
        )

    def _check_fitted(self) -> None:
        if not hasattr(self, "tree_"):
            raise NotFittedError("call fit before using the fitted tree")


def _from_nested(tree: Any, n_leaves: int) -> Tree:
    """A timed tree from nested dicts ``{"t": time, "children": [...]}`` with int leaves."""
    internal: list[list[int]] = []
    heights: list[float] = []
    seen: set[int] = set()

    def leaf(v: Any) -> int:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise InvalidTreeError(f"leaves must be row indices (int), got {v!r}")
        if not 0 <= int(v) < n_leaves:
            raise InvalidTreeError(f"leaf {v} is not a row of the data (0 .. {n_leaves - 1})")
        return int(v)

    def node(d: Any) -> tuple[float, list[Any]]:
        if not isinstance(d, dict) or "t" not in d or "children" not in d:
            raise InvalidTreeError(
                f'an internal node must be a dict {{"t": time, "children": [...]}}, got {d!r}'
            )
        if id(d) in seen:
            raise InvalidTreeError("the tree contains the same node twice (or a cycle)")
        seen.add(id(d))
        return float(d["t"]), list(d["children"])

    if not isinstance(tree, dict):
        if n_leaves != 1 or leaf(tree) != 0:
            raise InvalidTreeError(
                f'a tree over {n_leaves} rows must be a dict {{"t": time, "children": [...]}}'
            )
        return Tree(1, [], [0.0])
    # Post-order with an explicit stack, so any depth works.
    t0, kids = node(tree)
    stack: list[tuple[float, Any, list[int]]] = [(t0, iter(kids), [])]
    while stack:
        t, items, ids = stack[-1]
        child = next(items, None)
        if child is None:
            stack.pop()
            internal.append(ids)
            heights.append(t)
            if stack:
                stack[-1][2].append(n_leaves + len(internal) - 1)
        elif isinstance(child, dict):
            tc, kc = node(child)
            stack.append((tc, iter(kc), []))
        else:
            ids.append(leaf(child))
    return Tree(n_leaves, internal, [0.0] * n_leaves + heights)


def coalescent_log_joint(
    X: Any,
    tree: Any,
    likelihood: str = "brownian",
    Lambda: Any = 1.0,
    root: Any = "flat",
) -> float:
    r""":math:`\ln p(x, \pi)` of the rows of ``X`` and a timed binary tree (Teh et al. eq 7).

    The prior term is Kingman's (eq 2) with the true rates :math:`\binom{n-i+1}{2}`; the
    likelihood is integrated over the internal values by message passing.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The data; row ``i`` is leaf ``i``.
    tree : Tree or dict
        A :class:`Tree` whose heights are the coalescence times (0 at the leaves, ``<= 0``
        above), or nested dicts ``{"t": time, "children": [left, right]}`` whose leaves are
        row indices (at time 0).
    likelihood, Lambda, root
        As in :class:`KingmanCoalescent`.

    Returns
    -------
    float

    Raises
    ------
    InvalidTreeError
        If the tree is not binary, has no times, positive times, or a parent more recent
        than a child, or does not have one leaf per row.
    InvalidParameterError, InvalidDataError
        As :meth:`KingmanCoalescent.fit`.
    """
    X = check_array(X, min_rows=1)
    if not isinstance(tree, Tree):
        tree = _from_nested(tree, X.shape[0])
    if tree.n_leaves != X.shape[0]:
        raise InvalidTreeError(f"the tree has {tree.n_leaves} leaves, but X has {X.shape[0]} rows")
    return float(
        _core.coalescent_log_joint(
            X,
            tree._structure,
            likelihood=_likelihood(likelihood),
            lambda_=_lambda(Lambda),
            root=_root(root),
        )
    )
