"""Scikit-learn–style estimators."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from . import _core
from ._base import ClusterEstimator
from ._choices import MERGE_RULES as _MERGE_RULES
from ._choices import ROSE_FLAT_CLUSTERS as _FLAT_CLUSTERS
from ._selection import choose_model, constant_columns, data_kind, warn_constant
from ._streaming import explicit_model
from ._validation import (
    check_approx,
    check_array,
    check_choice,
    check_csr,
    check_cut_threshold,
    check_flag,
    check_n_jobs,
    check_new_rows,
    check_seed,
    feature_names,
    is_int,
    is_sparse,
    mixing_args,
    naming_columns,
    set_feature_names,
)
from .config import AutoModel, ClusterModel, NormalGamma, resolve_model
from .exceptions import InvalidDataError, InvalidParameterError
from .learning import _learn
from .tree import RoseTree

__all__ = ["BayesianRoseTree"]


#: Rows sampled to find the top-level clusters of a part in the approximate search.
_APPROX_SAMPLE = 1000


def _core_data(data: Any) -> Any:
    """Data as the core's fit takes them: a dense array, or a sparse matrix's CSR arrays.

    Models with sparse-aware statistics read CSR rows directly; the others are given dense
    data (the Normal-inverse-Wishart defaults, a Python model's callbacks).
    """
    return (*check_csr(data), data.shape[1]) if is_sparse(data) else data


def check_merge_rule(rule: Any) -> str:
    """``rule`` if it names a merge rule of the greedy search."""
    return check_choice(rule, "merge_rule", _MERGE_RULES)


class BayesianRoseTree(ClusterEstimator):
    r"""Greedy Bayesian rose tree (Blundell, Teh & Heller 2010), or BHC with ``binary=True``.

    The tree is a mixture over the partitions of the data consistent with it (BRT eq 1.4),
    computed by the recursion :math:`p(D \mid T) = \pi_T f(D) + (1 - \pi_T) \prod_i p(D_i
    \mid T_i)` (eq 1.5). It is built by greedy agglomeration: at each step the pair of trees
    and the merge (join, absorb, collapse) with the highest likelihood ratio (eq 1.23) is
    taken (or, with ``merge_rule="posterior"``, the one whose new node is most probably a
    cluster).

    Parameters
    ----------
    model : ClusterModel, AutoModel or "auto", default="auto"
        The cluster model :math:`f(D)`: :class:`BetaBernoulli`,
        :class:`NormalInverseWishart`, :class:`NormalGamma`, :class:`DirichletMultinomial`
        or a model of your own; ``"auto"`` (``AutoModel()``, also ``None``) chooses from
        the data: :class:`BetaBernoulli` for binary data, :class:`DirichletMultinomial`
        for counts (non-negative integers, some of them 0), and for real-valued data
        (integers without a zero among them) :class:`NormalGamma` or
        :class:`NormalInverseWishart`, whichever shows the stronger cluster structure (see
        :class:`AutoModel`; :attr:`model_selection_` records why). Gaussian models whose
        scale comes from the data leave out constant columns (:attr:`constant_features_`).
    mixing : {"brt", "gamma", "dp"}, default="brt"
        How :math:`\pi_T` is set: ``"brt"`` is :math:`1 - (1 - \gamma)^{n_c - 1}` for a node
        with :math:`n_c` children (eq 1.7); ``"gamma"`` is the constant :math:`\gamma`;
        ``"dp"`` is Heller & Ghahramani's Dirichlet-process rule with concentration
        ``dp_alpha``.
    gamma : float, default=0.5
        :math:`\gamma \in (0, 1)` for the ``"brt"`` and ``"gamma"`` rules.
    dp_alpha : float, default=1.0
        DP concentration for ``mixing="dp"``.
    binary : bool, default=False
        Consider joins only: Bayesian hierarchical clustering (BHC-γ with ``"gamma"`` or
        ``"brt"``, which coincide on binary trees; BHC-DP with ``"dp"``). Rose trees (the
        default) are simpler and more probable (higher :math:`\ln p(D \mid T)`); binary trees
        order every merge, and their dendrogram purity was a little higher on most labelled
        sets of ``benchmarks/bench_quality.py`` (by 0.00–0.04).
    merge_rule : {"likelihood_ratio", "posterior"}, default="likelihood_ratio"
        How the greedy search ranks candidate merges. ``"likelihood_ratio"`` is the BRT
        chapter's rule (eq 1.23): the merge that most raises :math:`p(D \mid T)` locally,
        :math:`\ln L = \ln p(T_m) - \ln p(T_i) - \ln p(T_j)`. ``"posterior"`` is Heller &
        Ghahramani's BHC rule: the merge whose new node has the highest posterior merge
        probability :math:`r_m = \pi_m f(D_m) / p(D_m \mid T_m)` (eq 1.26); with rose-tree
        merges the operation of each pair (join, absorb, collapse) is still the most likely
        one, and pairs are ranked by :math:`r` of the node it makes. Use ``"posterior"`` to
        reproduce BHC as published (``binary=True``, ``mixing="dp"``); the likelihood ratio
        is the rule under which greedy rose trees were studied. Both rank merges as exact
        arithmetic would: hopeless merges, whose scores round to the same double, are still
        ordered by how hopeless they are.
    contract : bool, default=False
        After the greedy search, contract every edge whose removal raises
        :math:`p(D \mid T)`, until none does. With ``binary=True`` the search is binary and
        its tree is then contracted, so the tree returned may have nodes with more than two
        children: it is a rose tree (evaluate it with ``binary=False``), not a BHC tree.
    n_jobs : int, default=None
        Threads for pair scoring; ``None`` or ``-1`` uses every core. The tree does not
        depend on it.
    approximate : bool, default=False
        For large data: find the top of the tree on a random sample of 1,000 rows (doubled,
        up to ``exact_below``, while the sample's clusters average fewer than 16 rows), send
        every row to the top-level group holding the sample's cluster under which it is
        most likely (its predictive probability, eq 1.25's cluster term; up to 1,024
        clusters), and repeat within each part until parts have at most ``exact_below``
        rows, which get the exact greedy search (in the manner of Heller & Ghahramani's
        randomised BHC). A part whose rows the sample does not split
        (they look alike) is cut into blocks of 1,000 rows, each built exactly, under one
        node. The parts' plausible clusters (at most ``exact_below`` of them) are then
        joined afresh by the greedy search, so that a cluster whose rows went to several
        parts can meet again; where that raises the evidence by more than 0.01 nats a row
        (the parts split clusters), finer units are joined, and with at most 8 rows a unit
        the parts are drawn again from that tree and rebuilt exactly, and their finer units
        joined once more. Of these trees the
        most probable is returned. What is approximated is the search, not the model:
        merges are only considered within a part or between whole units;
        ``log_evidence_`` is the exact evidence of the tree returned. The parts are built
        in parallel, and the tree does not depend on ``n_jobs``. The cost is at most about
        ``n * exact_below`` pair scores instead of ``n**2``: linear in ``n`` (10⁶ binary
        rows in about a minute on two cores; ``benchmarks/bench_scale.py``). Where the
        rebuild runs (data with many small clusters, ``n <= 8 * exact_below``) it can cost
        more than the exact search. With ``n <= exact_below`` this is the exact search.
    exact_below : int, default=4000
        Part size below which the approximate search is exact.
    random_state : int, default=None
        Seed of the approximate search's samples and of the restarts of hyperparameter
        learning (``None`` means 0: fits are reproducible).
    learn_hyperparameters : bool, default=False
        Learn the cluster model's hyperparameters and :math:`\gamma` (or ``dp_alpha``) by
        maximising :math:`\ln p(D \mid T)`: coordinate ascent that alternates the greedy tree
        and gradient steps on the hyperparameters (BRT §1.4.2, eqs 1.27–1.28), starting from
        the given ones. See :func:`rosetree.learn_hyperparameters`. Sparse input is
        densified. Under ``model="auto"`` the choice is then among the candidates whose
        hyperparameters can be learnt (not ``NormalGamma(shared_precision=True)``).
    n_restarts : int, default=0
        Further starts of the learning, at random points around the given hyperparameters;
        the most likely result is kept (the BRT chapter used 10).
    tie_hyperparameters : bool, default=False
        Learn one ``alpha`` and ``beta`` shared by all features instead of one per feature
        (:class:`BetaBernoulli`, :class:`DirichletMultinomial`; for :class:`NormalGamma`, one
        factor on every ``b0``). Per-feature learning from a
        shared start first learns the shared values and continues from their optimum.
    flat_clusters : {"dp", "cut", "map"}, default="dp"
        How :attr:`labels_` is read off the tree. ``"cut"``: Heller & Ghahramani's top-down
        cut, a node whose posterior merge probability :math:`r_T \ge` ``cut_threshold``
        (eq 1.26) is one cluster (:meth:`RoseTree.cut`). ``"dp"``: the same cut with
        :math:`r_T` computed under the Dirichlet-process prior over partitions (Heller &
        Ghahramani's rule, concentration ``dp_alpha``) on the fitted tree
        (``tree_.remix("dp", dp_alpha=dp_alpha).cut()``); the same as ``"cut"`` when
        ``mixing="dp"``. ``"map"``: the most probable tree-consistent partition
        (:meth:`RoseTree.map_partition`), which has no parameter. See the Notes of
        :class:`RoseTree` for when to use which.

        Why ``"dp"`` by default: under ``"brt"`` or ``"gamma"`` a node's prior probability
        of being one cluster does not grow with its size, while a split found by a greedy
        search fits a little better per row, so ``"cut"`` splits ever more as n grows
        (five separated Gaussian blobs in 8 dimensions: 17 clusters at n = 1,000, 46 at
        3,000). The DP prior's :math:`\pi_T` weighs a node against the number of ways to
        split it and keeps them whole: 5 clusters at every n from 150 to 10,000, and an
        adjusted Rand index at least that of ``"cut"`` on 8 of 9 labelled sets
        (``benchmarks/bench_flat.py``).
    n_clusters : int, default=None
        If given, overrides ``flat_clusters``: ``min(n_clusters, n_samples)`` clusters.
        They are the lowest cut of the tree's heights that gives no more (as SciPy's
        ``fcluster(Z, n_clusters, "maxclust")`` on ``tree_.to_linkage()``); where a
        multi-way node (or tied heights) leaves no cut with exactly that many, the node's
        largest children become clusters and its other children one cluster together
        (:meth:`RoseTree.max_clusters` with ``split_multiway=True``). Such a cluster is a
        union of sibling subtrees: its entry of :attr:`cluster_nodes_` is -1 and
        :attr:`cluster_members_` lists the subtrees.
    cut_threshold : float, default=0.5
        The threshold on :math:`r_T` of ``flat_clusters="cut"``, in [0, 1].
    verbose : bool, default=False
        Progress on standard error: about once a second during a greedy search that takes
        longer than a second, and after each iteration of hyperparameter learning. Fits
        stop on Ctrl-C (``KeyboardInterrupt``) within a fraction of a second either way.

    Attributes
    ----------
    tree_ : RoseTree
        The fitted tree.
    log_evidence_ : float
        :math:`\ln p(D \mid T)` of the fitted tree (eq 1.5). For ``mixing="dp"`` this is the
        tree's own marginal likelihood, not the DP lower bound.
    labels_ : ndarray of shape (n_samples,)
        Flat clusters read off the tree by the rule of ``flat_clusters`` / ``n_clusters``
        (by default descending from the root, a node whose posterior :math:`r_T \ge 0.5`
        under the DP prior is one cluster), numbered ``0 .. K-1`` by first row.
    cluster_nodes_ : ndarray of shape (K,)
        The node of :attr:`tree_` that is each flat cluster: rows with label *k* are
        ``tree_.leaves(cluster_nodes_[k])``. The columns of :meth:`predict_proba`. -1 for a
        cluster that is a union of sibling subtrees (only with ``n_clusters``).
    cluster_members_ : list of ndarray
        The nodes of :attr:`tree_` whose leaves make up each flat cluster: one node, or for
        a union of sibling subtrees (only with ``n_clusters``) several children of one node.
    model_ : ClusterModel
        The cluster model of the fitted tree: ``model`` itself, the one ``"auto"`` chose,
        or the learned one.
    model_selection_ : dict or None
        With ``model="auto"``: the data type (``"binary"``, ``"counts"``, ``"real"``), the
        rule, the chosen model's class name, and for real-valued data the rows scored and
        each candidate's ``log_evidence``, ``log_marginal_one_cluster`` and ``score``.
        ``None`` when a model was given.
    constant_features_ : ndarray of int
        Columns left out of the fit because all their values are equal (Gaussian models
        with a data-driven scale only; empty otherwise). ``model_`` and ``log_evidence_``
        describe the other columns: ``rt.log_evidence(np.delete(X, constant_features_,
        axis=1), tree_, model=model_, ...)`` is ``log_evidence_``.
    gamma_, dp_alpha_ : float
        The mixing parameters of the fitted tree (learned ones for the rule in use).
    evidence_trace_ : list of float
        With ``learn_hyperparameters``: the evidence after each step of the ascent.
    restart_log_evidences_ : list of float
        With ``learn_hyperparameters``: the evidence reached from each start.
    n_features_in_ : int
        Number of columns seen in :meth:`fit`.
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a pandas DataFrame; prediction then requires the same
        columns in the same order.

    Examples
    --------
    >>> import numpy as np, rosetree as rt
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]])
    >>> est = rt.BayesianRoseTree(model=rt.BetaBernoulli(alpha=1.0, beta=1.0)).fit(X)
    >>> est.tree_.to_nested()
    [[0, 1], [2, 3]]
    >>> rt.BayesianRoseTree().fit(X).model_selection_["chosen"]
    'BetaBernoulli'
    """

    def __init__(
        self,
        model: ClusterModel | AutoModel | str | None = "auto",
        *,
        mixing: str = "brt",
        gamma: float = 0.5,
        dp_alpha: float = 1.0,
        binary: bool = False,
        merge_rule: str = "likelihood_ratio",
        contract: bool = False,
        n_jobs: int | None = None,
        approximate: bool = False,
        exact_below: int = 4000,
        random_state: int | None = None,
        learn_hyperparameters: bool = False,
        n_restarts: int = 0,
        tie_hyperparameters: bool = False,
        flat_clusters: str = "dp",
        n_clusters: int | None = None,
        cut_threshold: float = 0.5,
        verbose: bool = False,
    ) -> None:
        self.model = model
        self.mixing = mixing
        self.gamma = gamma
        self.dp_alpha = dp_alpha
        self.binary = binary
        self.merge_rule = merge_rule
        self.contract = contract
        self.n_jobs = n_jobs
        self.approximate = approximate
        self.exact_below = exact_below
        self.random_state = random_state
        self.learn_hyperparameters = learn_hyperparameters
        self.n_restarts = n_restarts
        self.tie_hyperparameters = tie_hyperparameters
        self.flat_clusters = flat_clusters
        self.n_clusters = n_clusters
        self.cut_threshold = cut_threshold
        self.verbose = verbose

    def _model_spec(self) -> ClusterModel | AutoModel:
        """``model`` as given, ``"auto"`` and ``None`` as :class:`AutoModel`."""
        model = self.model
        if model is None or (isinstance(model, str) and model == "auto"):
            return AutoModel()
        if isinstance(model, AutoModel):
            model._check()
            return model
        return resolve_model(model)

    @property
    def _accepts_nan(self) -> bool:  # type: ignore[override]
        try:
            return self._model_spec()._accepts_missing
        except InvalidParameterError:
            return True

    def fit(self, X: Any, y: Any = None) -> BayesianRoseTree:
        """Build the tree over the rows of ``X``.

        Parameters
        ----------
        X : array_like or sparse matrix of shape (n_samples, n_features)
            Data rows (NumPy array, nested lists, pandas DataFrame, SciPy sparse matrix).
            NaN marks a missing entry where the model supports it. Sparse input is read
            without a dense copy, except for :class:`NormalInverseWishart`, whose default
            prior is computed from the dense data.
        y : ignored

        Returns
        -------
        self : BayesianRoseTree
        """
        spec = self._model_spec()
        mixing_args(self.mixing, self.gamma, self.dp_alpha)
        self._check_flat_args()
        verbose = check_flag(self.verbose, "verbose")
        learn = check_flag(self.learn_hyperparameters, "learn_hyperparameters")
        options = dict(
            binary=check_flag(self.binary, "binary"),
            merge_rule=check_merge_rule(self.merge_rule),
            contract=check_flag(self.contract, "contract"),
            n_jobs=check_n_jobs(self.n_jobs),
            approx=self._approx_args(),
        )
        names = feature_names(X)
        with naming_columns(names):
            # The conjugate models read bool, uint8 and float32 arrays in place.
            narrow = not learn and (isinstance(spec, AutoModel) or spec._reads_sparse)
            if not (is_sparse(X) and spec._reads_sparse and not learn):
                X = check_array(
                    X,
                    allow_nan=spec._accepts_missing,
                    keep_narrow=narrow,
                    nan_hint=_missing_hint(spec),
                )
            n_features = int(X.shape[1])
            # Under "auto", real-valued data get a Gaussian model either way.
            auto_real = isinstance(spec, AutoModel) and data_kind(X) == "real"
            constant = constant_columns(X, NormalGamma() if auto_real else spec)
            if constant.size:
                who = "model='auto'" if auto_real else type(spec).__name__
                warn_constant(constant, names, who, stacklevel=2)
                X = np.delete(X, constant, axis=1)
            kept = np.delete(np.arange(n_features), constant) if constant.size else None
            with naming_columns(None, kept):
                self._fit_columns(X, spec, options, verbose, learn)
        self.constant_features_ = constant
        self.n_features_in_ = n_features
        set_feature_names(self, names)
        return self

    def _fit_core(
        self, data: Any, model: ClusterModel, gamma: float, dp_alpha: float, **options: Any
    ) -> Any:
        """The core's greedy fit of ``data`` (dense, or sparse for models that read it)."""
        verbose = options.pop("verbose", False)
        params = _core.BrtParams(**mixing_args(self.mixing, gamma, dp_alpha), **options)
        return _core.fit_brt(_core_data(data), model._spec(), params, verbose=verbose)

    def _fit_columns(
        self,
        X: Any,
        spec: ClusterModel | AutoModel,
        options: dict[str, Any],
        verbose: bool,
        learn: bool,
    ) -> None:
        """The fit of the columns that the model takes (constant ones left out)."""
        gamma, dp_alpha = float(self.gamma), float(self.dp_alpha)
        self.model_selection_: dict[str, Any] | None = None
        # Fits the choice made on all rows, by candidate: the chosen one is not fitted twice.
        chosen_fits: dict[int, Any] = {}

        def candidate_log_evidence(candidate: ClusterModel, rows: Any) -> float:
            fit = self._fit_core(rows, candidate, gamma, dp_alpha, **options)
            if rows is X:
                chosen_fits[id(candidate)] = fit
            return float(fit.tree().log_evidence)

        if isinstance(spec, AutoModel):
            auto = spec
            if learn:  # the candidates whose hyperparameters can be learnt
                learnable = tuple(m for m in spec._candidates() if m._learnable)
                auto = dataclasses.replace(spec, real=learnable or spec._candidates())
            model, self.model_selection_ = choose_model(
                auto, X, candidate_log_evidence, self._seed()
            )
        else:
            model = spec
        model._check_data(X, stacklevel=3)

        if learn:
            result, self._fit = _learn(
                X,
                model=model,
                mixing=self.mixing,
                gamma=self.gamma,
                dp_alpha=self.dp_alpha,
                search=options,
                tie=check_flag(self.tie_hyperparameters, "tie_hyperparameters"),
                n_restarts=self.n_restarts,
                max_iter=20,
                tol=1e-6,
                random_state=self._seed(),
                fit_tree=None,
                verbose=verbose,
            )
            self.tree_ = result.tree
            self.model_, self.gamma_, self.dp_alpha_ = result.model, result.gamma, result.dp_alpha
            self.evidence_trace_ = result.trace
            self.restart_log_evidences_ = result.start_log_evidences
        else:
            chosen = chosen_fits.get(id(model))
            if chosen is None:
                chosen = self._fit_core(X, model, gamma, dp_alpha, **options, verbose=verbose)
            self._fit = chosen
            self.tree_ = RoseTree(self._fit.tree())
            self.model_ = model
            self.gamma_, self.dp_alpha_ = gamma, dp_alpha
        self._set_flat_clusters()

    def _set_flat_clusters(self) -> None:
        """``log_evidence_``, ``labels_``, ``cluster_nodes_`` and ``cluster_members_``."""
        self.log_evidence_ = self.tree_.log_evidence
        groups = self._flat_groups(self.tree_)
        self.labels_ = self.tree_._labels_of_groups(groups)
        self.cluster_members_ = [np.asarray(g, dtype=np.int64) for g in groups]
        self.cluster_nodes_ = np.asarray([g[0] if len(g) == 1 else -1 for g in groups], np.int64)

    def partial_fit(self, X: Any, y: Any = None) -> BayesianRoseTree:
        r"""Add the rows of ``X`` to the fitted tree, one at a time, without refitting.

        Each row follows, from the root, the child under which it is most probable as one
        more member of a cluster; every node on that path is a candidate position, beside
        the node (a join) or as one more child of it (an absorb, rose trees only), and the
        row takes the position where :math:`\ln p(D \mid T)` of the whole tree gains most:
        the likelihood ratio by which the batch
        search ranks merges (eq 1.23). Every node on its path has its statistics and
        :math:`\ln f` updated. Local repairs follow on the path: swaps of a node's child
        with the node's sibling (PERCH's rotations), edge contraction, and a greedy rebuild
        of the top of a small subtree from its clusters, each taken only when it raises the
        evidence. An estimator that is not fitted yet is fitted to ``X`` (at least two
        rows).

        Parameters
        ----------
        X : array_like or sparse matrix of shape (n_rows, n_features)
            New rows with the columns of the fit (a DataFrame's names must match). NaN marks
            a missing entry where the model supports it.
        y : ignored

        Returns
        -------
        self : BayesianRoseTree

        Raises
        ------
        InvalidDataError
            For a wrong number of columns (or names), NaN or infinite values the model does
            not accept, or values outside its support (with the row of ``X`` and column).
        InvalidParameterError
            For a model written in Python, whose clusters have no statistics to update.

        Notes
        -----
        What holds after every call: ``tree_`` contains every row seen (leaf *i* is the
        *i*-th row over all calls), ``log_evidence_`` is :math:`\ln p(D \mid T)` of that
        tree over all rows (``rt.log_evidence(X_all, est.tree_, model=est.model_, ...)``),
        ``labels_``, prediction and pickling describe that tree, and the same calls with
        the same ``random_state`` give the same tree. ``model_`` becomes the model of the
        first fit with its data-driven defaults written out (the column means and
        variances of the first rows are not recomputed), and the hyperparameters, a
        learned :math:`\gamma` and the constant columns left out stay those of the first
        fit.

        What does not: the tree is not the one :meth:`fit` would build from all the rows,
        and it depends on their order; the evidence per row is usually a little lower (see
        ``BENCHMARKS.md``). A row passes O(depth) nodes, so a call costs
        O(rows · depth · d) model evaluations plus O(n) to hand the tree back; insert rows
        in batches rather than one call per row on large trees. ``contract=True`` is not
        applied to the new nodes.
        """
        if not hasattr(self, "_fit"):
            return self.fit(X)
        self._check_flat_args()
        mixing = mixing_args(self.mixing, self.gamma_, self.dp_alpha_)
        binary = check_flag(self.binary, "binary")
        X = self._check_new_rows(X)
        model = explicit_model(self._fit)
        self._fit = self._fit.partial_fit(X, **mixing, binary=binary)
        self.model_ = model
        self.tree_ = RoseTree(self._fit.tree())
        self._set_flat_clusters()
        return self

    def _check_flat_args(self) -> None:
        check_choice(self.flat_clusters, "flat_clusters", _FLAT_CLUSTERS)
        k = self.n_clusters
        if k is not None and (not is_int(k) or k < 1):
            raise InvalidParameterError(
                f"n_clusters must be None or a positive integer, got {k!r}", "n_clusters"
            )
        check_cut_threshold(self.cut_threshold)

    def _flat_groups(self, tree: RoseTree) -> list[list[int]]:
        """The nodes of each flat cluster chosen by the estimator's parameters, by first row.

        A cluster is one node, or with ``n_clusters`` possibly several children of a
        multi-way node.
        """
        if self.n_clusters is not None:
            return tree.max_clusters_groups(int(self.n_clusters), split_multiway=True)
        if self.flat_clusters == "map":
            nodes = tree.map_nodes()
        else:
            threshold = float(self.cut_threshold)
            if self.flat_clusters == "dp":
                # The cut of tree_.remix("dp", ...), without building that tree.
                dp = mixing_args("dp", 0.5, self.dp_alpha_)
                nodes = list(tree._core.cut_remixed(threshold=threshold, **dp))
            else:
                nodes = tree.cut_nodes(threshold)
        # Labels are numbered by first row.
        return [[v] for v in tree._in_first_row_order(nodes)]

    def _seed(self) -> int:
        return check_seed(self.random_state)

    def _approx_args(self) -> tuple[int, int, int] | None:
        return check_approx(self.approximate, self.exact_below, _APPROX_SAMPLE, self._seed())

    # ------------------------------------------------------------------ prediction
    _fitted_attribute = "_fit"

    def __getstate__(self) -> dict[str, Any]:
        # The fit lives in Rust; a pickle keeps its training data and rebuilds it.
        state = super().__getstate__()
        fit = state.pop("_fit", None)
        if fit is not None:
            state["_fit_training"] = fit.training()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        training = state.pop("_fit_training", None)
        self.__dict__.update(state)
        if training is not None:
            self._fit = _core.brt_fit_for_tree(training, self.model_._spec(), self.tree_._core)

    def _check_new_rows(self, X: Any) -> np.ndarray:
        self._check_fitted()
        X = check_new_rows(
            self, X, allow_nan=self.model_._accepts_missing, nan_hint=_missing_hint(self.model_)
        )
        return self._fitted_columns(X)

    def _fitted_columns(self, X: np.ndarray) -> np.ndarray:
        """The columns of ``X`` that the model was fitted to (constant ones left out)."""
        constant = getattr(self, "constant_features_", None)
        if constant is None or not constant.size:
            return X
        return np.ascontiguousarray(np.delete(X, constant, axis=1))

    def _predict_core(
        self, X: np.ndarray, responsibilities: bool, clusters: Any = None
    ) -> tuple[Any, Any]:
        return self._fit.predict(
            X,
            responsibilities=responsibilities,
            clusters=None if clusters is None else [int(v) for v in clusters],
            n_jobs=check_n_jobs(self.n_jobs),
        )

    def score_samples(self, X: Any) -> np.ndarray:
        r"""Log predictive probability (or density) of each new row under the fitted tree.

        BRT eq 1.25: a new item belongs to cluster *S* (any node of the tree, leaves
        included) with prior weight :math:`w_S` (:meth:`RoseTree.log_cluster_weights`) and
        is then drawn from that cluster's posterior predictive,

        .. math:: p(x \mid D, T) = \sum_S w_S \, f(D_S \cup \{x\}) / f(D_S).

        Parameters
        ----------
        X : array_like of shape (n_rows, n_features)
            New rows. For :class:`BetaBernoulli` and :class:`NormalGamma`, NaN entries are
            missing and marginalised out (an all-NaN row scores 0); the other built-in
            models reject NaN.

        Returns
        -------
        ndarray of shape (n_rows,)
            :math:`\ln p(x \mid D, T)` of each row: a log probability for discrete models
            (for :class:`DirichletMultinomial`, of the count vector when
            ``multinomial_coefficient=True``, else of one ordering of its tokens), a log
            density for :class:`NormalInverseWishart` and :class:`NormalGamma`.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        InvalidDataError
            For a wrong number of columns, or values the model does not accept.
        """
        X = self._check_new_rows(X)
        log_p, _ = self._predict_core(X, responsibilities=False)
        return np.asarray(log_p)

    def predict_proba(self, X: Any) -> np.ndarray:
        r"""Posterior probability of each flat cluster (:attr:`labels_`) given each new row.

        .. math:: P(c \mid x) \propto n_c\, f(x \mid D_c), \qquad
                  f(x \mid D_c) = f(D_c \cup \{x\}) / f(D_c),

        with :math:`n_c` the training rows in cluster *c* and :math:`f(x \mid D_c)` its
        posterior predictive under the cluster model: the new row joins one of the fitted
        clusters, in proportion to their sizes. (For the posterior over every node of the
        tree, eq 1.25's mixture, see :meth:`predict_node_proba`.)

        Parameters
        ----------
        X : array_like of shape (n_rows, n_features)
            New rows (NaN as in :meth:`score_samples`).

        Returns
        -------
        ndarray of shape (n_rows, n_clusters)
            Column *k* is the cluster with label *k* (node ``cluster_nodes_[k]``); each row
            sums to one.

        Raises
        ------
        NotFittedError, InvalidDataError
            As :meth:`score_samples`.
        """
        X = self._check_new_rows(X)
        members = self.cluster_members_
        nodes = np.concatenate(members)
        _, proba = self._predict_core(X, responsibilities=True, clusters=nodes)
        return _sum_over_members(np.asarray(proba), members)

    def predict_node_proba(self, X: Any) -> np.ndarray:
        r"""Posterior probability of each cluster of the tree given each new row.

        :math:`P(S \mid x, D, T) = w_S f(x \mid D_S) / p(x \mid D, T)`, with the weights
        and cluster predictives of eq 1.25 (see :meth:`score_samples`). The prior
        probabilities, before seeing *x*, are ``np.exp(est.tree_.log_cluster_weights())``.

        Parameters
        ----------
        X : array_like of shape (n_rows, n_features)
            New rows (NaN as in :meth:`score_samples`).

        Returns
        -------
        ndarray of shape (n_rows, tree_.n_nodes)
            Column *S* is node *S* of :attr:`tree_` (leaves ``0 .. n_samples - 1`` are the
            training rows as singleton clusters, then the internal nodes, the root last).
            Each row sums to one.

        Raises
        ------
        NotFittedError, InvalidDataError
            As :meth:`score_samples`.
        """
        X = self._check_new_rows(X)
        _, resp = self._predict_core(X, responsibilities=True)
        return np.asarray(resp)

    def _training_rows(self, start: int, stop: int) -> np.ndarray:
        """Training rows ``start:stop`` as a dense array (NaN where missing)."""
        return np.asarray(self._fit.training_rows(start, stop))

    def log_predictive_missing(self, X_full: Any) -> float:
        r"""Log predictive probability of filled-in missing entries of the training data.

        BRT eq 1.24 with the fitted tree *T* held fixed:
        :math:`\ln p(D^m \mid D_\text{obs}, T) = \ln p(D_\text{full} \mid T) -
        \ln p(D_\text{obs} \mid T)`, where :math:`D^m` are the entries that were missing
        (NaN) in the training data and are given in ``X_full``. Summed over every way of
        filling the same entries, the probabilities add up to one.

        Parameters
        ----------
        X_full : array_like of shape (n_samples, n_features)
            The training data with some or all missing entries filled in. It must equal the
            training data wherever those were observed; entries left NaN stay missing.

        Returns
        -------
        float
            :math:`\ln p(D^m \mid D_\text{obs}, T)`; 0 when nothing is filled in.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        InvalidDataError
            For a shape other than the training data's, an entry that differs from an
            observed training entry (with its row and column), or a filled-in value the
            model does not accept.
        """
        self._check_fitted()
        X_full = check_array(X_full, min_rows=1, name="X_full")
        n, d = self.tree_.n_leaves, self.n_features_in_
        if X_full.shape != (n, d):
            raise InvalidDataError(
                f"X_full must have the training data's shape {(n, d)}, got {X_full.shape}"
            )
        # The fit's columns (constant ones left out), and their numbers in X_full.
        columns = self._fitted_columns(np.arange(d)[None, :])[0]
        X_full = self._fitted_columns(X_full)
        rows: list[np.ndarray] = []
        chunk = max(1, 2**20 // d)
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            obs, full = self._training_rows(start, stop), X_full[start:stop]
            missing = np.isnan(obs)
            # NaN != anything, so a NaN in X_full where the training data are observed is
            # caught too.
            bad = ~missing & (full != obs)
            if bad.any():
                i, j = (int(k) for k in np.argwhere(bad)[0])
                raise InvalidDataError(
                    f"X_full differs from the training data in row {start + i}, column "
                    f"{columns[j]} ({full[i, j]} instead of the observed {obs[i, j]})",
                    start + i,
                    int(columns[j]),
                )
            rows.append(start + np.flatnonzero((missing & ~np.isnan(full)).any(axis=1)))
        filled = np.concatenate(rows)
        return float(
            self._fit.log_predictive_missing(
                [int(i) for i in filled],
                np.ascontiguousarray(X_full[filled]),
                n_jobs=check_n_jobs(self.n_jobs),
            )
        )

    def predict_missing_proba(self) -> Any:
        r"""Impute the missing entries of binary training data with their probabilities.

        For every entry :math:`x_{ij}` that was missing (NaN) when a :class:`BetaBernoulli`
        model was fitted, :math:`P(x_{ij} = 1 \mid D_\text{obs}, T)` under the fitted tree
        (BRT eq 1.24 with that one entry filled in). Filling one entry changes the cluster
        likelihood of each ancestor of its row by a single-feature predictive, so each
        probability costs one walk from the row's leaf to the root.

        Returns
        -------
        ndarray or scipy.sparse.csr_array of shape (n_samples, n_features)
            The training data with each missing entry replaced by its probability of being
            one (observed entries unchanged). Sparse training data give a CSR array with the
            training data's sparsity structure.

        Raises
        ------
        NotFittedError
            Before :meth:`fit`.
        InvalidParameterError
            When the model is not :class:`BetaBernoulli` (for other models, compare
            completions with :meth:`log_predictive_missing`).
        """
        self._check_fitted()
        if self._fit.family != "bernoulli":
            raise InvalidParameterError(
                "predict_missing_proba needs a BetaBernoulli model; the estimator was fitted "
                f"with {self.model!r}. Use log_predictive_missing to score completions.",
                "model",
            )
        rows, cols, probs = self._fit.missing_probabilities(n_jobs=check_n_jobs(self.n_jobs))
        training = self._fit.training()
        if isinstance(training, np.ndarray):
            # bool training data come back as bool: the completions are probabilities.
            training = training.astype(np.float64, copy=False)
            training[rows, cols] = probs
            return training
        from scipy import sparse

        indptr, indices, data, n_cols = training
        # Canonical CSR lists entries row-major, the order of the probabilities.
        data[np.isnan(data)] = probs
        return sparse.csr_array(
            (data, indices.copy(), indptr.copy()), shape=(len(indptr) - 1, n_cols)
        )


def _sum_over_members(proba: np.ndarray, members: list[np.ndarray]) -> np.ndarray:
    """Columns of ``proba`` (one per member node, in order) summed cluster by cluster."""
    if all(len(m) == 1 for m in members):
        return proba
    starts = np.cumsum([0] + [len(m) for m in members[:-1]])
    return np.add.reduceat(proba, starts, axis=1)


def _missing_hint(model: Any) -> str:
    """How to go on when ``model`` meets a missing entry (NaN) it does not take."""
    return (
        f": {type(model).__name__} takes no missing entries; NormalGamma() (real values) and "
        "BetaBernoulli() (0/1) integrate them out, or impute them first"
    )
