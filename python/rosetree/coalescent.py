"""Hierarchical clustering with Kingman's coalescent (Teh, Daumé & Roy 2007)."""

from __future__ import annotations

import time
from typing import Any, NamedTuple, cast

import numpy as np

from . import _core
from ._base import ClusterEstimator
from ._choices import COALESCENT_FLAT_CLUSTERS as _FLAT_CLUSTERS
from ._choices import COALESCENT_INFERENCES as _INFERENCES
from ._choices import COALESCENT_LIKELIHOODS as _LIKELIHOODS
from ._choices import COALESCENT_SMC as _SMC
from ._flat import FlatClusters, category_indicators, choose_cluster_model
from ._selection import data_kind, equal_valued_columns
from ._validation import (
    check_approx,
    check_array,
    check_choice,
    check_count,
    check_cut_threshold,
    check_flag,
    check_n_jobs,
    check_new_rows,
    check_nonnegative,
    check_positive,
    check_seed,
    check_verbose,
    column_variances,
    feature_names,
    is_int,
    is_real,
    set_feature_names,
    unit_variances,
)
from .config import BetaBernoulli, NormalGamma
from .exceptions import (
    InvalidDataError,
    InvalidParameterError,
    InvalidTreeError,
    NumericalError,
)
from .tree import Tree


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


#: The observation noise of Brownian diffusion when ``noise=None``, in units of ``Lambda``
#: (with ``Lambda="auto"``, the columns' variances): chosen on iris, wine, breast_cancer and
#: digits by dendrogram purity (``benchmarks/bench_coalescent_defaults.py``).
_DEFAULT_NOISE = 0.1


def _auto_lambda(X: np.ndarray) -> np.ndarray:
    """Each column's variance (NaN ignored); 1 where a column is constant or unobserved."""
    var, ok = column_variances(X)
    return np.where(ok, var, 1.0)


def _auto_rate(X: np.ndarray) -> np.ndarray:
    """``Lambda="auto"``: the columns' unit variances (:func:`unit_variances`).

    One rate for every column, the mean of their variances, unless the columns' ranges
    differ by more than a factor of 100; then each column's own variance (a diagonal
    ``Lambda``).
    Brownian motion from a flat root for coalescent times of order one then spreads rows
    about as widely as the data, whatever the columns' units. One rate where the columns
    share a unit keeps the data's geometry: on principal components (MNIST PCA-20) and on
    binary rows, per-column rates gave dendrogram purities of 0.35 and 0.48 where one rate
    gave 0.43 and 0.61 (``benchmarks/bench_quality.py``); on standardized columns the two
    are the same, and on columns in different units (raw wine, breast cancer, penguins)
    one rate lets the widest column decide the tree (``bench_quality.py --raw``).
    """
    variances, by_column = unit_variances(X)
    return variances if by_column else np.array(variances[0])


def _noise(noise: Any, likelihood: str) -> float:
    """The observation noise factor: ``None`` is the default (Brownian) or 0 (multinomial)."""
    if noise is None:
        return _DEFAULT_NOISE if likelihood == "brownian" else 0.0
    value = check_nonnegative(noise, "noise")
    if value and likelihood != "brownian":
        raise InvalidParameterError("noise is a parameter of the Brownian likelihood only", "noise")
    return value


def _root(root: Any) -> float | None:
    """``None`` for the flat root, else the variance factor ``s0`` of ``N(0, s0 Λ)``."""
    if isinstance(root, str):
        if root == "flat":
            return None
        raise InvalidParameterError(
            f'root must be "flat" or a number s0 >= 0, got {root!r}', "root"
        )
    if not is_real(root):
        raise InvalidParameterError(
            f'root must be "flat" or a number s0 >= 0, got {root!r}', "root"
        )
    return float(root)


def _likelihood(likelihood: Any) -> str:
    return check_choice(likelihood, "likelihood", _LIKELIHOODS)


def _auto_likelihood(X: np.ndarray, noise: Any, root: Any, inference: str) -> str:
    """The likelihood of ``likelihood="auto"`` for the rows ``X``.

    The mutation model for binary rows (every observed entry 0 or 1), unless an option that
    only Brownian diffusion has is set (observation noise, a proper root, SMC-PostPost);
    Brownian diffusion otherwise.
    """
    if data_kind(X) != "binary":
        return "brownian"
    brownian_only = (
        (noise is not None and is_real(noise) and noise != 0)
        or not (isinstance(root, str) and root == "flat")
        or inference == "smc-postpost"
    )
    return "brownian" if brownian_only else "multinomial"


def _wrap(structure: Any) -> Tree:
    """An :class:`rt.Tree <rosetree.Tree>` around a core tree."""
    tree = Tree.__new__(Tree)
    tree._set_structure(structure)
    return tree


class KingmanCoalescent(ClusterEstimator):
    r"""Bayesian hierarchical clustering with Kingman's coalescent prior on the tree.

    The tree is a draw from Kingman's n-coalescent: leaves at time 0, coalescence times
    negative, every pair of lineages merging at rate 1 (so the ``i``-th waiting time is
    exponential with rate :math:`\binom{n-i+1}{2}`). The data are a Markov process run
    along the branches and observed at the leaves: Brownian diffusion with covariance rate
    :math:`\Lambda` per unit time, or independent-sites mutation of categorical features.

    Parameters
    ----------
    likelihood : {"auto", "brownian", "multinomial"}, default="auto"
        Brownian diffusion of real-valued rows (eqs 11–13; NaN marks a missing entry, with
        a scalar or diagonal ``Lambda``: the features then diffuse independently and a
        missing entry is integrated out), or mutation of categories
        ``0, 1, ..., K_d - 1`` per column with NaN for missing (eqs 14–15); ``K_d`` is one
        more than the largest category seen (at least 2), the equilibrium the smoothed
        observed frequencies. ``"auto"``: the mutation model for binary rows (every
        observed entry 0 or 1; the paper's model for SPAMBASE: dendrogram purity 0.715
        against Brownian diffusion's 0.646 and SciPy average linkage's 0.704 in
        ``benchmarks/bench_quality.py``), Brownian diffusion for any other rows and
        wherever ``noise``, a proper ``root`` or ``"smc-postpost"``, which only Brownian
        diffusion has, is given; ``likelihood_`` says which. Counts are not taken as
        categories: give ``"multinomial"`` for them. The mutation model costs 10–30 times
        SciPy's average linkage on 1,000–4,000 binary rows (each pair's time is a root, not
        a closed form; ``benchmarks/bench_coalescent.py --binary``); ``"brownian"`` fits
        them at about SciPy's cost, less purely.
    Lambda : "auto", float, array of shape (d,) or (d, d), default="auto"
        Brownian: the covariance rate :math:`\Lambda = \lambda I`, a diagonal, or a full
        symmetric positive-definite matrix. ``"auto"`` takes the rates from the data, so
        that the tree does not depend on the columns' units: :math:`\lambda I` with
        :math:`\lambda` the mean of the columns' variances, or, where the columns' ranges
        differ by more than a factor of 100 (columns in different units, such as grams
        beside millimetres), each column's own variance (a diagonal; ``Lambda_`` says
        which). One rate where the columns share a unit keeps the geometry of principal
        components, pixel counts and binary rows, where per-column rates lost purity
        (MNIST PCA-20: 0.35 against 0.43).
        Multinomial: the mutation rate of every feature (one number, or one per feature);
        ``"auto"`` is 1.
    noise : float, default=None
        Brownian: observation noise. Each row is observed as
        :math:`x_i \sim N(y_i, \eta\Lambda)` around the diffusion's value :math:`y_i` at its
        leaf, ``noise`` being :math:`\eta` (in units of ``Lambda``: the same as running the
        diffusion a further time :math:`\eta` below every leaf). ``0`` is Teh et al.'s
        noiseless model, under which two equal rows have infinite density and are refused;
        with ``noise > 0`` equal rows are ordinary data. ``None`` is 0.1 (with
        ``Lambda="auto"`` on standardized columns, noise of a third of a column's standard
        deviation). It is held
        fixed by ``learn_hyperparameters``. The multinomial likelihood has no noise
        (``None`` or 0).
    inference : str, default="greedy-rate1"
        ``"greedy-rate1"`` (§4.2): each pair's most probable coalescence time with the
        pairwise rate 1, the pair coalescing soonest first; :math:`O(n^2)` time, :math:`O(nd)`
        memory. ``"greedy-maxprob"`` and ``"greedy-minduration"`` (§4.2) use the true rate:
        before the ``i``-th merge, with :math:`m = n - i + 1` lineages and the last merge at
        time ``now``, each live pair's optimal duration :math:`\delta^* \ge 0` maximises the
        ``i``-th term of eq 7, :math:`-\binom{m}{2}\delta + \ln Z(L_0 + 2\delta)`, where
        :math:`L_0 = (t_l - \mathrm{now}) + (t_r - \mathrm{now})` is the branch length the
        pair has already, and the pair merges at :math:`\mathrm{now} - \delta^*`. MaxProb
        takes the pair with the largest term at :math:`\delta^*`; MinDuration the pair with
        the smallest :math:`\delta^*` (ties at :math:`\delta^* = 0` go to the larger term).
        Ties left over go to the lower node ids. Every pair is rescored at every step:
        :math:`O(n^3)` time, :math:`O(nd)` memory. ``"smc-priorprior"``,
        ``"smc-priorpost"``, ``"smc-postpost"`` (§4.1): sequential Monte Carlo with
        ``n_particles`` particles, proposing the next merge's duration and pair from the
        local prior or posterior, resampling when the effective sample size falls below
        half; it estimates :math:`\ln p(x)` without bias (in :math:`p`). PostPost costs
        :math:`O(n^3)` per particle and needs the Brownian likelihood (with missing entries
        it proposes each duration from a tractable surrogate of its posterior and corrects
        the weight exactly).
    root : "flat" or float, default="flat"
        Brownian: the flat (improper) root, or a proper root :math:`N(0, s_0 \Lambda)` given
        by ``s0``. The multinomial root is its equilibrium (``"flat"``).
    n_particles : int, default=50
        SMC particles (unused by greedy inference).
    flat_clusters : {"dp", "llr"}, default="dp"
        How ``labels_`` is read off ``tree_``. ``"dp"``: a Bayesian model comparison at each
        node, Heller & Ghahramani's cut under the Dirichlet-process prior over partitions
        (concentration ``dp_alpha``), the rule of :class:`BayesianRoseTree`'s default labels:
        each node of ``tree_`` is scored as one cluster of a conjugate cluster model against
        the tree-consistent splits below it, and, going down from the root, the first node
        whose posterior probability of being one cluster is at least ``cut_threshold`` is a
        cluster. For Brownian data the cluster model reads the standardized columns (those
        whose observed values are all equal left out, as the rose tree leaves them out: they
        say nothing about clusters, and under the models' data-driven priors each would
        favour large clusters) and is
        :class:`NormalGamma` (diagonal; NaN marginalised) or :class:`NormalInverseWishart`
        (full covariance; a candidate without NaN and with more rows than columns), each
        with its data-driven defaults, whichever shows the stronger cluster structure on
        ``tree_`` (:class:`AutoModel`'s ``"structure"`` rule: the log Bayes factor of the
        tree against one cluster of all rows; ``cluster_model_selection_`` has the
        scores); the full covariance wins on correlated clusters such as principal
        components (MNIST PCA-20: adjusted Rand index 0.34 against 0.17). For the
        multinomial likelihood it is :class:`BetaBernoulli` over one indicator per
        category. The model comparison does not depend on the data's units. ``"llr"``:
        Teh et al.'s log-likelihood-ratio rule (§5) with ``llr_threshold`` (see
        :meth:`cluster_labels`), which depends on the data's units and on a flat root puts
        almost every row in its own cluster on real data.
    dp_alpha : float, default=1.0
        The Dirichlet-process concentration of ``flat_clusters="dp"``.
    cut_threshold : float, default=0.5
        The posterior probability of one cluster at which ``flat_clusters="dp"`` stops
        descending, in [0, 1].
    llr_threshold : float, default=0.0
        The threshold of ``flat_clusters="llr"`` (§5): going down from the root, a node
        splits into its two children while its ``split_llr_`` exceeds this threshold; the
        first node on each path that does not split is a cluster. Larger thresholds give
        fewer clusters.
    learn_hyperparameters : bool, default=False
        Alternate between the tree and the hyperparameters (§4.4), starting from
        ``Lambda``: given the tree, ``Lambda`` is set to its posterior mode (Brownian: a
        closed form from the tree's independent contrasts, under an inverse-Wishart prior
        for a full matrix and inverse-gamma priors for a diagonal or a number; multinomial:
        each feature's rate, or the one shared rate, by golden-section search on the log
        rate under a Gamma prior); given ``Lambda``, the tree is inferred again and kept
        only if it raises :math:`\ln p(x, \pi \mid \Lambda) + \ln p(\Lambda)`, so that
        objective never decreases (``hyper_trace_``). Stops after ``hyper_iter`` rounds, or
        earlier when a round gains nothing. With SMC the tree step uses the heaviest
        particle, and the particles are drawn once more under the final ``Lambda_``.
    hyper_iter : int, default=10
        The most rounds of hyperparameter learning.
    Lambda_prior : tuple, default=None
        Brownian: ``(nu, Psi)``, ``Psi`` of the shape of ``Lambda``; the prior is
        :math:`IW(\nu, \Psi)` for a full ``Lambda`` (needs ``nu > d - 1``), and
        :math:`\mathrm{InvGamma}(\nu/2, \psi_j/2)` per feature for a diagonal, or
        :math:`\mathrm{InvGamma}(d\nu/2, \psi/2)` for a number (``nu > 0``); ``nu``
        counts pseudo-contrasts. ``None``: the weak proper prior whose mode is ``Lambda``
        (``nu = d + 1``, :math:`\Psi = (2d + 2)\Lambda`; or ``nu = 2`` and
        :math:`\psi = 4\lambda_j` per feature, :math:`(2d + 2)\lambda` for a number).
        Multinomial: ``(shape, rate)`` of a Gamma prior on each rate (``rate`` a number or
        one per feature); ``None`` is ``(2, 1 / Lambda)``, whose mode is ``Lambda``.
    approximate : bool, default=False
        Greedy-Rate1 on large data, in time about linear in ``n``: a part of more than
        ``exact_below`` rows fits a random sample of ``approx_sample`` of its rows, cuts the
        sample tree into groups (its oldest merges first, until each group is expected to
        hold at most ``exact_below`` rows; at most 64), sends every row to the group whose
        subtree the coalescent most probably attaches it to (the predictive probability of
        :meth:`attach_proba`, summed over the group's branches), and treats each group's
        rows the same way, in parallel, until they get the exact Greedy-Rate1 search. The
        sample tree's structure above the groups joins the parts; each join is re-timed by
        the Greedy-Rate1 rule from the two subtrees it joins (their most probable merge
        time under rate 1, never after either), so the result is a valid coalescent tree,
        and ``log_joint_`` (and ``split_llr_``, ``labels_``) are computed exactly for the
        tree returned. What is approximated is the search: rows sent to different groups
        only meet above the groups. Same tree for any ``n_jobs`` given ``random_state``;
        with ``n <= exact_below`` it is the exact search. Greedy-Rate1 only (other
        inferences refuse it). See "Large data" in the coalescent guide and
        ``benchmarks/bench_scale.py``.
    exact_below : int, default=4000
        Part size at and below which the approximate search is exact.
    approx_sample : int, default=1000
        Rows sampled to split a larger part (at most ``exact_below`` are used).
    random_state : int, default=None
        Seed of the SMC and of the approximate search's samples (``None`` means 0); results
        (greedy or SMC) are the same for any ``n_jobs``.
    n_jobs : int, default=None
        Threads for scoring pairs or moving particles (``None`` or -1: all cores).
    verbose : bool or "auto", default="auto"
        Progress on standard error: about once a second during a greedy search or SMC run,
        and after each round of hyperparameter learning. ``True``: from the first second;
        ``"auto"``: only once a fit has run for 10 seconds, so that quick fits stay silent
        and long ones (an SMC fit's cost grows with ``n_particles`` and about the square of
        the number of rows, and can run to minutes) say how far they have come; ``False``:
        never. Fits stop on Ctrl-C (``KeyboardInterrupt``) within a fraction of a second
        either way.

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
    split_llr_ : ndarray of shape (n_nodes,)
        For each internal node ``v`` of ``tree_`` with children ``l, r``, the log likelihood
        ratio of two independent trees over the children's data against one tree over
        ``v``'s data, :math:`E(l) + E(r) - E(v)` with :math:`E(u) = \ln p(x_u \mid \pi_u)`
        the evidence of the subtree below ``u`` with the root prior on ``u`` itself (Teh et
        al., footnote 1). With the multinomial likelihood it is :math:`-\ln Z_v` of eq 7.
        With the Brownian likelihood and the flat root it is :math:`-\ln Z_v` too, but
        :math:`Z_v` is then a density, so the ratio depends on the units of the data;
        a proper root (``root=s0``) makes it a ratio of probabilities. ``-inf`` at leaves.
    likelihood_ : str
        The likelihood fitted, ``"brownian"`` or ``"multinomial"`` (``likelihood``, or the
        choice of ``"auto"``).
    Lambda_ : float or ndarray
        The hyperparameters of ``tree_``: ``Lambda`` itself (under ``"auto"``, one rate
        or each column's), or the learned values (of the same shape).
    noise_ : float
        The observation noise factor :math:`\eta` used (``noise``, or its default).
    hyper_trace_ : ndarray or None
        With ``learn_hyperparameters``: the objective
        :math:`\ln p(x, \pi \mid \Lambda) + \ln p(\Lambda)` at the start and after every
        accepted half-step (non-decreasing); ``None`` otherwise.
    labels_ : ndarray of shape (n_samples,)
        Flat clusters of ``tree_`` by the ``flat_clusters`` rule, numbered by their first
        row.
    cluster_tree_ : RoseTree
        ``tree_`` evaluated as a rose tree under the cluster model of ``flat_clusters="dp"``
        and the DP mixing (its :attr:`RoseTree.log_r` are the model comparisons); used by
        :meth:`predict_proba`.
    cluster_model_ : ClusterModel
        That cluster model, chosen by :meth:`fit` (:meth:`partial_fit` keeps it).
    cluster_model_selection_ : dict
        Brownian data: why it was chosen, as :attr:`BayesianRoseTree.model_selection_`
        (each candidate's ``log_evidence`` on ``tree_``, ``log_marginal_one_cluster`` and
        ``score``).
    n_clusters_ : int
        The number of distinct ``labels_``.
    n_features_in_ : int
        Number of columns seen in :meth:`fit`.
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a pandas DataFrame; prediction then requires the same
        columns in the same order.

    Examples
    --------
    >>> import numpy as np, rosetree as rt
    >>> X = np.array([[0.0, 0.1], [0.1, 0.0], [3.0, 3.1], [3.1, 3.0]])
    >>> est = rt.KingmanCoalescent(Lambda=1.0).fit(X)
    >>> est.tree_.to_nested()
    [[0, 1], [2, 3]]
    """

    #: How :meth:`partial_fit` places a row: ``"density"``, the MAP join point, or
    #: ``"mass"``, the branch of the largest predictive probability (a benchmark setting).
    _join_rule: str = "density"
    #: Whether :meth:`partial_fit` re-places the leaves next to each new row (a benchmark
    #: setting; off: it raised ln p but not purity or depth, see ``BENCHMARKS.md``).
    _repair: bool = False
    #: Whether a row that joins a block of nodes of one time goes down to the block's
    #: shallowest child (same ln p; a benchmark setting, on: see ``BENCHMARKS.md``).
    _balance: bool = True
    #: Whether :meth:`partial_fit` moves the nodes on each new row's path to the root to
    #: the times that raise ln p (a benchmark setting; see ``BENCHMARKS.md``).
    _retime: bool = False
    #: Whether :meth:`partial_fit` makes the best rotation that raises ln p at each node on
    #: each new row's path (a benchmark setting; see ``BENCHMARKS.md``).
    _rotate: bool = False

    def __init__(
        self,
        likelihood: str = "auto",
        Lambda: Any = "auto",
        inference: str = "greedy-rate1",
        n_particles: int = 50,
        root: Any = "flat",
        llr_threshold: float = 0.0,
        flat_clusters: str = "dp",
        dp_alpha: float = 1.0,
        cut_threshold: float = 0.5,
        learn_hyperparameters: bool = False,
        hyper_iter: int = 10,
        Lambda_prior: Any = None,
        random_state: int | None = None,
        n_jobs: int | None = None,
        verbose: bool | str = "auto",
        noise: float | None = None,
        approximate: bool = False,
        exact_below: int = 4000,
        approx_sample: int = 1000,
    ) -> None:
        self.likelihood = likelihood
        self.noise = noise
        self.Lambda = Lambda
        self.inference = inference
        self.n_particles = n_particles
        self.root = root
        self.llr_threshold = llr_threshold
        self.flat_clusters = flat_clusters
        self.dp_alpha = dp_alpha
        self.cut_threshold = cut_threshold
        self.learn_hyperparameters = learn_hyperparameters
        self.hyper_iter = hyper_iter
        self.Lambda_prior = Lambda_prior
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.approximate = approximate
        self.exact_below = exact_below
        self.approx_sample = approx_sample

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
            For a value that is not a category with the multinomial likelihood, naming its
            row and column; for a column with no observed value under Brownian diffusion
            with the flat root (its predictive distribution would be improper).
        InvalidParameterError
            Also for missing entries with a full ``Lambda`` or with
            ``learn_hyperparameters`` under Brownian diffusion.
        """
        check_choice(self.likelihood, "likelihood", ("auto", *_LIKELIHOODS))
        check_choice(self.inference, "inference", _INFERENCES)
        names = feature_names(X)
        X = check_array(X, min_rows=1)
        if self.likelihood == "auto":
            likelihood = _auto_likelihood(X, self.noise, self.root, self.inference)
        else:
            likelihood = _likelihood(self.likelihood)
        self.likelihood_ = likelihood
        if isinstance(self.Lambda, str) and self.Lambda == "auto":
            lam = _auto_rate(X) if likelihood == "brownian" else _lambda(1.0)
        else:
            lam = _lambda(self.Lambda)
        noise = _noise(self.noise, likelihood)
        options = dict(
            likelihood=likelihood,
            lambda_=lam,
            root=_root(self.root),
            noise=noise,
            n_jobs=check_n_jobs(self.n_jobs),
        )
        approx = check_approx(
            self.approximate, self.exact_below, self.approx_sample, check_seed(self.random_state)
        )
        if approx is not None and self.inference != "greedy-rate1":
            raise InvalidParameterError(
                f"approximate=True is a Greedy-Rate1 search; inference={self.inference!r} "
                'has no approximate mode (use inference="greedy-rate1")',
                "approximate",
            )
        self._approx = approx
        learn = check_flag(self.learn_hyperparameters, "learn_hyperparameters")
        hyper_iter = check_count(self.hyper_iter, "hyper_iter")
        if likelihood == "brownian":
            _check_brownian_missing(X, options["root"] is None, learn)
        self.hyper_trace_: np.ndarray | None = None
        # Progress from this many seconds into the fit (None: none).
        self._progress = (check_verbose(self.verbose), time.monotonic())
        if learn:
            fitted, lam, trace = self._learn(X, options, hyper_iter)
            options["lambda_"] = lam
            self.hyper_trace_ = np.asarray(trace)
        else:
            fitted = self._infer(X, options)
        self.Lambda_ = lam.copy() if lam.ndim else float(lam)
        self.noise_ = noise
        self.tree_, self.log_joint_ = fitted.tree, fitted.log_joint
        self.log_marginal_ = fitted.log_marginal
        self.particles_ = fitted.particles
        self.particle_log_weights_ = fitted.particle_log_weights
        self.ess_ = fitted.ess
        self.n_features_in_ = X.shape[1]
        set_feature_names(self, names)
        self._X = X
        self._model_options = _model_options(options)
        self._forget_predictors()
        evidence = np.asarray(self._model().subtree_evidence(X, self.tree_._structure))
        self.split_llr_ = _split_llr(self.tree_, evidence)
        self._set_flat_clusters(X, likelihood)
        return self

    def partial_fit(self, X: Any, y: Any = None) -> KingmanCoalescent:
        r"""Add the rows of ``X`` to the fitted tree, one at a time, without refitting.

        Each row joins the tree where the coalescent's own predictive distribution puts it
        (the distribution of :meth:`score_samples` and :meth:`attach_proba`): at the
        branch and time of the largest joint density of the row and the join, the MAP
        join point (every branch scored on a grid of at most about a hundred times, the
        best refined by Brent's method). A new internal node is made there, with the
        branch's lower node and the new leaf as children (above the root: a new root); a
        row that joins at the very time of a block of nodes of one time (rows within the
        noise of a cluster merged at that time) goes down the block to where the tree stays
        shallowest, at the same log joint. Every other node keeps its time, so ``tree_``
        stays a valid coalescent tree. An estimator that is not fitted yet is fitted to
        ``X``.

        Parameters
        ----------
        X : array-like of shape (n_rows, n_features)
            New rows with the columns of the fit (a DataFrame's names must match); NaN
            marks a missing entry (as in :meth:`fit`).
        y : ignored

        Returns
        -------
        self : KingmanCoalescent

        Raises
        ------
        InvalidParameterError
            For an SMC fit (``inference="smc-..."``): its particles are a weighted sample
            of trees that one inserted row would not keep a sample of; refit instead. Also
            for missing entries with a full ``Lambda``.
        InvalidDataError
            For a wrong number of columns (or names), infinite values, a value that is not
            a category (multinomial likelihood), naming the row of ``X`` and the column; a
            column with no observed value in any row seen (Brownian, flat root).

        Notes
        -----
        What holds after every call: ``tree_`` contains every row seen (leaf *i* is the
        *i*-th row over all calls), ``log_joint_`` is :math:`\ln p(x, \pi)` of that tree
        over all rows (:func:`coalescent_log_joint` with ``Lambda_``, ``noise_`` and
        ``root``), ``split_llr_``, ``labels_``, ``cluster_tree_``, prediction and pickling
        describe that tree, and the same calls give the same tree (insertion has no
        randomness). ``Lambda_`` and ``noise_`` stay those of the first fit (learned
        hyperparameters are not learned again); the multinomial likelihood's categories
        and equilibrium frequencies and the flat clusters' standardization are, as in
        every method, those of all the rows seen.

        What does not: the tree is not the one :meth:`fit` would build from all the rows,
        and it depends on their order. Each row costs a pass over the whole tree (a
        downward pass of messages and a bounded grid per branch, ``O(n (d + log n))``),
        and each call an ``O(n)`` refresh of the subtree evidence and flat clusters; see
        ``docs/streaming.md`` and ``BENCHMARKS.md``.
        """
        if not hasattr(self, "tree_"):
            return self.fit(X)
        if self.particles_ is not None:
            raise InvalidParameterError(
                f"partial_fit adds rows to one tree, but inference={self.inference!r} gave a "
                "weighted sample of trees (SMC particles) that inserted rows would not keep "
                "a sample of; refit with all the rows, or use a greedy inference",
                "inference",
            )
        X = self._new_rows(X)
        likelihood = self._model_options["likelihood"]
        if likelihood == "multinomial":
            _refuse_non_categories(X)
        X_all = np.vstack([self._X, X])
        if likelihood == "brownian":
            _check_brownian_missing(X_all, self._model_options["root"] is None, learn=False)
        # The model of all the rows seen (the multinomial's categories and equilibrium).
        model = _core.CoalescentModel(X_all, **self._model_options)
        structure, log_joint, _ = model.insert(
            X_all,
            self.tree_._structure,
            join_rule=self._join_rule,
            balance=self._balance,
            repair=self._repair,
            retime=self._retime,
            rotate=self._rotate,
        )
        tree = _wrap(structure)
        if log_joint == np.inf:
            _refuse_zero_time_merge(tree)
        if np.isnan(log_joint) or log_joint == -np.inf:
            raise NumericalError(
                f"the grown tree's log joint is {log_joint} in double precision (data or "
                "Lambda too extreme); rescale the data"
            )
        split_llr = _split_llr(tree, np.asarray(model.subtree_evidence(X_all, structure)))
        self.tree_, self.log_joint_, self._X = tree, float(log_joint), X_all
        self._forget_predictors()
        self._cached("model", lambda: model)
        self.split_llr_ = split_llr
        self._set_flat_clusters(X_all, likelihood, keep_model=True)
        return self

    def _cluster_data(self, X: np.ndarray) -> np.ndarray:
        """The rows as the cluster model of ``flat_clusters="dp"`` reads them."""
        if self._model_options["likelihood"] == "brownian":
            # A fit pickled before constant columns were left out read every column.
            columns = getattr(self, "_cluster_columns", slice(None))
            return cast(
                "np.ndarray", ((X - self._cluster_center) / self._cluster_scale)[:, columns]
            )
        return category_indicators(X, self._n_categories)

    def _set_flat_clusters(self, X: np.ndarray, likelihood: str, keep_model: bool = False) -> None:
        """``labels_``, ``n_clusters_``, ``cluster_nodes_`` and ``cluster_tree_``.

        ``keep_model``: the cluster model stays the one the fit chose (:meth:`partial_fit`,
        whose every call would otherwise score both candidates on the whole tree again).
        """
        rule = check_choice(self.flat_clusters, "flat_clusters", _FLAT_CLUSTERS)
        alpha = check_positive(self.dp_alpha, "dp_alpha")
        t = check_cut_threshold(self.cut_threshold)
        if likelihood == "multinomial":
            observed = np.where(np.isnan(X), -1.0, X)
            self._n_categories = [max(int(c.max()) + 1, 2) for c in observed.T]
            model: Any = BetaBernoulli()
            self.cluster_model_selection_: dict[str, Any] = {"data": "categories"}
            data = self._cluster_data(X)
        else:
            self._cluster_center = np.nanmean(np.where(np.isnan(X).all(axis=0), 0.0, X), axis=0)
            self._cluster_scale = np.sqrt(_auto_lambda(X))
            # A column whose observed values are all equal says nothing about clusters, and
            # under the cluster models' priors, scaled from the columns' variances, it would
            # decide the cut alone: it is left out, as BayesianRoseTree leaves it out.
            self._cluster_columns = np.delete(np.arange(X.shape[1]), equal_valued_columns(X))
            data = self._cluster_data(X)
            if keep_model:  # a fit pickled before the choice existed used NormalGamma
                model = getattr(self, "cluster_model_", None) or NormalGamma()
            else:
                model, self.cluster_model_selection_ = self._cluster_model(data, float(alpha))
        self.cluster_model_ = model
        if rule == "dp":
            flat = FlatClusters.cut(data, self.tree_, model, float(alpha), float(t))
        else:
            labels = self.cluster_labels()
            flat = FlatClusters.of_labels(data, self.tree_, model, labels, float(alpha))
        self._flat = flat
        self.cluster_tree_ = flat.tree
        self.labels_ = flat.labels
        self.n_clusters_ = flat.n_clusters
        self.cluster_nodes_ = flat.nodes

    def _cluster_model(self, data: np.ndarray, alpha: float) -> tuple[Any, dict[str, Any]]:
        """The cluster model of the flat clusters, chosen on ``tree_`` (see ``flat_clusters``)."""
        return choose_cluster_model(data, self.tree_, alpha)

    def predict_proba(self, X: Any) -> np.ndarray:
        r"""Posterior probability of each flat cluster (:attr:`labels_`) given each new row.

        :math:`P(c \mid x) \propto n_c f(x \mid D_c)`, with :math:`n_c` the training rows in
        cluster :math:`c` and :math:`f(x \mid D_c)` the posterior predictive of the cluster
        model of ``flat_clusters="dp"`` (as :meth:`BayesianRoseTree.predict_proba`).

        Parameters
        ----------
        X : array-like of shape (n_new, n_features)
            New rows; NaN entries are marginalised.

        Returns
        -------
        proba : ndarray of shape (n_new, n_clusters_)
            Column ``k`` is the cluster labelled ``k``; rows sum to one.
        """
        self._check_fitted()
        X = self._new_rows(X)
        if self._model_options["likelihood"] == "multinomial":
            _refuse_non_categories(X)
        return self._flat.predict_proba(
            self._cluster_data(self._X), self._cluster_data(X), check_n_jobs(self.n_jobs)
        )

    def _params(self, options: dict[str, Any]) -> Any:
        """The core's options of the configured inference."""
        smc = self.inference in _SMC
        return _core.CoalescentParams(
            inference=self.inference,
            n_jobs=options["n_jobs"],
            approx=self._approx,
            n_particles=check_count(self.n_particles, "n_particles") if smc else 1,
            seed=check_seed(self.random_state),
        )

    def _infer(self, X: np.ndarray, options: dict[str, Any]) -> _Fitted:
        """The configured inference under the hyperparameters in ``options``."""
        smc = self.inference in _SMC
        if smc and options["likelihood"] == "brownian" and options["noise"] == 0.0:
            _refuse_equal_rows(X)
        model = _core.CoalescentModel(X, **_model_options(options))
        run = model.fit(X, self._params(options), verbose=self._progress[0])
        return _smc_fitted(run) if smc else _greedy_fitted(*run)

    def _learn(
        self, X: np.ndarray, options: dict[str, Any], hyper_iter: int
    ) -> tuple[_Fitted, np.ndarray, list[float]]:
        """The inference and ``Lambda`` learnt with it (§4.4; ``rosetree::coalescent::learn``)."""
        smc = self.inference in _SMC
        if smc and options["likelihood"] == "brownian" and options["noise"] == 0.0:
            _refuse_equal_rows(X)
        model = _core.CoalescentModel(X, **_model_options(options))
        run, lam, trace = model.learn(
            X,
            self._params(options),
            rounds=hyper_iter,
            prior=_lambda_prior(self.Lambda_prior),
            verbose=self._progress[0],
        )
        fitted = _smc_fitted(run) if smc else _greedy_fitted(*run)
        return fitted, np.asarray(lam), list(trace)

    def cluster_labels(self, llr_threshold: float | None = None) -> np.ndarray:
        """Flat clusters of ``tree_`` by the log-likelihood-ratio rule (Teh et al. §5).

        Going down from the root, a node splits into its children while its ``split_llr_``
        (the evidence for two independent subtrees over one) exceeds ``llr_threshold``; the
        first node on each path that does not split is a cluster, and leaves always are.

        Parameters
        ----------
        llr_threshold : float, default=None
            The threshold; ``None`` uses the estimator's ``llr_threshold``.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Cluster numbers ``0, 1, ...`` in the order of each cluster's first row.
        """
        self._check_fitted()
        threshold = _threshold(self.llr_threshold if llr_threshold is None else llr_threshold)
        tree = self.tree_
        clusters: list[int] = []
        stack = [tree.root]
        while stack:
            v = stack.pop()
            if v >= tree.n_leaves and self.split_llr_[v] > threshold:
                stack.extend(tree.children[v])
            else:
                clusters.append(v)
        return tree.labels_of(clusters)

    # ------------------------------------------------------------------ prediction
    def _weighted_predictors(self) -> list[tuple[float, Any]]:
        """``(log weight, core predictor)`` of ``tree_``, or of every SMC particle."""
        self._check_fitted()
        trees = [self.tree_] if self.particles_ is None else self.particles_
        weights = [0.0] if self.particle_log_weights_ is None else self.particle_log_weights_
        return self._cached(
            "weighted",
            lambda: [
                (float(w), self._predictor(t))
                for w, t in zip(weights, trees, strict=True)
                if np.isfinite(w)
            ],
        )

    def _model(self) -> Any:
        """The core's model of the training rows under the fitted hyperparameters."""
        return self._cached("model", lambda: _core.CoalescentModel(self._X, **self._model_options))

    def _predictor(self, tree: Tree) -> Any:
        """The core's messages of the training rows on ``tree``, ready to predict."""
        return self._model().predictor(self._X, tree._structure)

    def _new_rows(self, X: Any) -> np.ndarray:
        return check_new_rows(self, X)

    def score_samples(self, X: Any) -> np.ndarray:
        r"""Log predictive density of each row of ``X`` under the fitted tree (§4.4).

        A new point joins the tree as an extra leaf of the coalescent: it coalesces with
        each lineage alive at time :math:`t` at rate 1, so it joins a given branch at time
        :math:`t` with density :math:`\exp(-\int_t^0 k(s)\,ds)`, :math:`k(s)` the number
        of branches alive at :math:`s`; its value is drawn from the process run from the
        posterior at the joining point. The density sums over the branches and integrates
        over :math:`t` by Gauss quadrature, split where :math:`k` changes. With SMC it is
        averaged over the particles with their weights. For the multinomial likelihood it
        is the log probability of the row's categories; NaN entries are marginalised.

        Parameters
        ----------
        X : array-like of shape (n_new, n_features)

        Returns
        -------
        log_density : ndarray of shape (n_new,)
        """
        X = self._new_rows(X)
        terms = [
            w + np.asarray(p.log_density(X, n_jobs=check_n_jobs(self.n_jobs))[0])
            for w, p in self._weighted_predictors()
        ]
        out = np.asarray(_logsumexp_rows(np.vstack(terms)))
        if np.isnan(out).any():
            row = int(np.flatnonzero(np.isnan(out))[0])
            raise NumericalError(
                f"the predictive density of row {row} is NaN in double precision (data or "
                "Lambda too extreme); rescale the data"
            )
        return out

    def attach_proba(self, X: Any) -> np.ndarray:
        """Where each new row would join ``tree_``: probabilities per branch.

        Returns
        -------
        proba : ndarray of shape (n_new, n_nodes)
            Entry ``[i, v]`` is the posterior probability that row ``i`` joins the branch
            above node ``v`` of ``tree_`` (for the root, the lineage above it); rows sum
            to 1.
        """
        X = self._new_rows(X)
        self._check_fitted()
        if self.particles_ is None:
            predictor = self._weighted_predictors()[0][1]
        else:
            predictor = self._cached("tree", lambda: self._predictor(self.tree_))
        proba = np.asarray(predictor.log_density(X, n_jobs=check_n_jobs(self.n_jobs))[1])
        if np.isnan(proba).any():
            row = int(np.flatnonzero(np.isnan(proba).any(axis=1))[0])
            raise NumericalError(
                f"where row {row} joins is undefined in double precision: its density is 0 or "
                "infinite on every branch (data or Lambda too extreme, or a pinned root)"
            )
        return proba

    def predict_proba_missing(self) -> np.ndarray:
        """Posterior predictive probabilities of every training entry's category.

        For the multinomial likelihood: the posterior at each leaf, given all the data,
        of each feature's state (averaged over the particles with their weights for SMC).
        For an observed entry it is the observed category; for a NaN entry it is the
        prediction.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_features, K_max)
            ``proba[i, j, k]``: the probability that entry ``(i, j)`` is category ``k``;
            zeros beyond feature ``j``'s ``K_j`` categories.

        Raises
        ------
        InvalidParameterError
            For the Brownian likelihood (use :meth:`impute`).
        """
        self._check_fitted()
        if self._model_options["likelihood"] != "multinomial":
            raise InvalidParameterError(
                "predict_proba_missing needs the multinomial likelihood", "likelihood"
            )
        total: np.ndarray | None = None
        for w, p in self._weighted_predictors():
            part = np.exp(w) * np.asarray(p.leaf_posteriors())
            total = part if total is None else total + part
        assert total is not None
        return cast("np.ndarray", total / total.sum(axis=2, keepdims=True))

    def impute(self) -> np.ndarray:
        """The training data with every NaN entry replaced by its prediction.

        The most probable category (multinomial), or the posterior mean at the leaf
        (Brownian), given all the data and the fitted tree (SMC: all particles, weighted).
        """
        self._check_fitted()
        X = self._X.copy()
        missing = np.isnan(X)
        if not missing.any():
            return cast("np.ndarray", X)
        if self._model_options["likelihood"] == "multinomial":
            X[missing] = self.predict_proba_missing().argmax(axis=2)[missing]
        else:
            means = sum(
                np.exp(w) * np.asarray(p.leaf_posteriors())[:, :, 0]
                for w, p in self._weighted_predictors()
            )
            X[missing] = np.asarray(means)[missing]
        return cast("np.ndarray", X)

    def log_predictive_missing(self, X_true: Any, rows: Any = None, columns: Any = None) -> float:
        r"""Summed log predictive probability of true values at entries missing in training.

        Parameters
        ----------
        X_true : array-like of shape (n_samples, n_features)
            The complete data; only the cells asked for are read.
        rows, columns : array-like of int, optional
            The cells ``(rows[k], columns[k])``; by default every NaN entry of the training
            data.

        Returns
        -------
        float
            :math:`\sum_k \ln p(x_{r_k c_k} \mid \text{observed entries})` under the
            fitted tree (SMC: each cell's predictive is the particles' weighted mixture):
            a log probability for the multinomial likelihood, a log density (of a Gaussian
            per tree) for Brownian diffusion.
        """
        self._check_fitted()
        if rows is None or columns is None:
            rows, columns = np.nonzero(np.isnan(self._X))
        X_true = check_array(X_true, min_rows=1, name="X_true")
        if X_true.shape != self._X.shape:
            raise InvalidDataError(
                f"X_true has shape {X_true.shape}, the training data {self._X.shape}"
            )
        rows, columns = (
            _cell_indices(value, name, size)
            for value, name, size in (
                (rows, "rows", X_true.shape[0]),
                (columns, "columns", X_true.shape[1]),
            )
        )
        if rows.shape != columns.shape:
            raise InvalidParameterError(
                f"rows and columns must have the same length, got {rows.size} and {columns.size}",
                "columns",
            )
        values = X_true[rows, columns]
        if np.isnan(values).any():
            raise InvalidDataError("X_true has NaN at a cell asked for")
        if self._model_options["likelihood"] == "multinomial":
            proba = self.predict_proba_missing()
            # A category the fit never saw has no predictive probability to look up.
            bad = (values != np.round(values)) | (values < 0) | (values >= proba.shape[2])
            if bad.any():
                k = int(np.flatnonzero(bad)[0])
                raise InvalidDataError(
                    f"X_true has {values[k]!r} in row {rows[k]}, column {columns[k]}: the "
                    f"multinomial fit's categories are 0 .. {proba.shape[2] - 1}"
                )
            return float(np.log(proba[rows, columns, values.astype(int)]).sum())
        # Brownian: each cell's posterior is Gaussian given a tree; a mixture over particles.
        terms = []
        for w, p in self._weighted_predictors():
            post = np.asarray(p.leaf_posteriors())[rows, columns]
            # The posterior is the diffusion's value at the leaf; an entry is observed
            # around it with variance noise * Lambda_jj (the diagonal of a full Lambda).
            lam = np.asarray(self._model_options["lambda_"], dtype=np.float64)
            lam = np.diag(lam) if lam.ndim == 2 else np.broadcast_to(lam, (X_true.shape[1],))
            mean, var = post[:, 0], post[:, 1] + self._model_options["noise"] * lam[columns]
            with np.errstate(divide="ignore", invalid="ignore"):
                log_pdf = -0.5 * (np.log(2 * np.pi * var) + (values - mean) ** 2 / var)
            # A zero-length branch above a leaf makes its posterior a point mass.
            log_pdf = np.where(var > 0, log_pdf, np.where(values == mean, np.inf, -np.inf))
            terms.append(w + log_pdf)
        return float(_logsumexp_rows(np.vstack(terms)).sum())


class _Fitted(NamedTuple):
    """One run of the inference: its tree and, for SMC, the particles."""

    tree: Tree
    log_joint: float
    log_marginal: float | None = None
    particles: list[Tree] | None = None
    particle_log_weights: np.ndarray | None = None
    ess: np.ndarray | None = None


def _greedy_fitted(structure: Any, log_joint: float) -> _Fitted:
    """A greedy search's tree, refused where its log joint is infinite."""
    tree = _wrap(structure)
    if log_joint == np.inf:
        _refuse_zero_time_merge(tree)
    if log_joint == -np.inf:
        raise NumericalError(
            "the fitted tree's log joint is -inf in double precision: two different rows "
            "merged after no time (their distance is below double precision relative to "
            "Lambda; give the model observation noise, noise > 0, or rescale the data)"
        )
    return _Fitted(tree, float(log_joint))


def _smc_fitted(run: Any) -> _Fitted:
    """An SMC run's particles, the heaviest as the tree."""
    trees, log_w, log_marginal, ess, best, log_joint = run
    particles = [_wrap(t) for t in trees]
    return _Fitted(
        particles[best],
        float(log_joint),
        float(log_marginal),
        particles,
        np.asarray(log_w),
        np.asarray(ess),
    )


def _lambda_prior(prior: Any) -> tuple[float, np.ndarray] | None:
    """``Lambda_prior`` as the pair ``(nu or shape, Psi or rate)`` the core checks."""
    if prior is None:
        return None

    def bad(reason: str) -> InvalidParameterError:
        return InvalidParameterError(f"Lambda_prior {reason}", "Lambda_prior")

    try:
        a, b = prior
    except (TypeError, ValueError):
        raise bad(f"must be a pair (nu, Psi) or (shape, rate), got {prior!r}") from None
    if not is_real(a) or not np.isfinite(a):
        raise bad(f"must be a pair with a finite number first, got {a!r}")
    try:
        second = np.asarray(b, dtype=np.float64)
    except (TypeError, ValueError):
        raise bad(f"must be a pair with numbers second, got {b!r}") from None
    return float(a), second


def _logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """``ln sum exp`` down the columns of ``a`` (one column per new row)."""
    top = a.max(axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):  # every term -inf: the sum is -inf
        return cast("np.ndarray", safe + np.log(np.exp(a - safe).sum(axis=0)))


def _check_brownian_missing(X: np.ndarray, flat_root: bool, learn: bool) -> None:
    """What Brownian diffusion with missing entries cannot do, as clear errors."""
    missing = np.isnan(X)
    if not missing.any():
        return
    if learn:
        raise InvalidParameterError(
            "learn_hyperparameters needs complete data under Brownian diffusion; impute the "
            "missing entries or set Lambda by hand",
            "learn_hyperparameters",
        )
    empty = np.flatnonzero(missing.all(axis=0))
    if flat_root and empty.size:
        raise InvalidDataError(
            f"column {empty[0]} has no observed value: with the flat root its predictive "
            "distribution is improper (drop the column or give a proper root)"
        )


def _model_options(options: dict[str, Any]) -> dict[str, Any]:
    """The model options of ``options`` (likelihood, ``Lambda`` and root)."""
    return {k: options[k] for k in ("likelihood", "lambda_", "root", "noise")}


def _threshold(value: Any) -> float:
    if not is_real(value):
        raise InvalidParameterError(
            f"llr_threshold must be a number, got {value!r}", "llr_threshold"
        )
    value = float(value)  # a Python int beyond 64 bits too
    if np.isnan(value):
        raise InvalidParameterError("llr_threshold must not be NaN", "llr_threshold")
    return cast(float, value)


def _refuse_equal_rows(X: np.ndarray) -> None:
    """Name two equal complete rows, which have infinite density without noise (SMC)."""
    complete = np.flatnonzero(~np.isnan(X).any(axis=1))
    if complete.size < 2:
        return
    _, first, inverse = np.unique(X[complete], axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    for k, group in enumerate(inverse):
        if first[group] != k:
            a, b = int(complete[first[group]]), int(complete[k])
            raise InvalidDataError(
                f"rows {a} and {b} are equal: under Brownian diffusion without observation "
                "noise (noise=0), equal rows have infinite density and the SMC weights "
                "diverge. Give the model observation noise (noise > 0, the default) to keep "
                "every row",
                b,
            )


#: Categories of the multinomial likelihood are whole numbers below this.
MAX_CATEGORY = 1e6


def non_category(X: np.ndarray) -> tuple[int, int] | None:
    """Row and column of the first entry of ``X`` that is not a category, if any.

    A category of the multinomial likelihood is a whole number ``0 <= x < MAX_CATEGORY``;
    NaN (missing) passes.
    """
    bad = ~np.isnan(X) & ~((X >= 0) & (X == np.round(X)) & (X < MAX_CATEGORY))
    if not bad.any():
        return None
    r, c = np.argwhere(bad)[0]
    return int(r), int(c)


def _refuse_non_categories(X: np.ndarray) -> None:
    """InvalidDataError naming the first entry of ``X`` that is not a category."""
    where = non_category(X)
    if where is not None:
        r, c = where
        raise InvalidDataError(f"X has {X[r, c]} in row {r}, column {c}: not a category", r, c)


def _refuse_zero_time_merge(tree: Tree) -> None:
    """Name the rows behind an infinite Brownian log joint: a merge at the leaves' time.

    Without observation noise, two rows equal on their observed columns have unbounded
    density as their merge time approaches 0, so a greedy search puts the merge there and
    the tree's density is infinite.
    """
    heights = np.asarray(tree.heights)
    for v in tree.internal_nodes:
        if heights[v] == 0.0:
            rows = sorted(tree.leaves(v))
            raise InvalidDataError(
                f"rows {rows[0]} and {rows[1]} are equal (on the columns observed in both): "
                "under Brownian diffusion without observation noise (noise=0), equal rows "
                "have infinite density, so the tree's log joint is +inf. Give the model "
                "observation noise (noise > 0, the default) to keep every row",
                rows[1],
            )
    raise NumericalError("the tree's log joint is +inf")


def _cell_indices(value: Any, name: str, size: int) -> np.ndarray:
    """Row or column indices of cells: a 1-D array of integers in ``[0, size)``."""
    arr = np.asarray(value)
    if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise InvalidParameterError(f"{name} must be a 1-D sequence of integers", name)
    if arr.size and not (0 <= arr.min() and arr.max() < size):
        raise InvalidParameterError(f"{name} must lie in [0, {size}), got {arr.tolist()}", name)
    return arr.astype(np.int64)


def _split_llr(tree: Tree, evidence: np.ndarray) -> np.ndarray:
    """``E(l) + E(r) - E(v)`` for every internal node ``v``; ``-inf`` at the leaves."""
    llr = np.full(len(evidence), -np.inf)
    with np.errstate(invalid="ignore"):  # inf - inf: refused just below
        for v in tree.internal_nodes:
            llr[v] = sum(evidence[c] for c in tree.children[v]) - evidence[v]
    if np.isnan(llr).any():
        raise NumericalError(
            "the subtrees' log evidence is not finite (a root pinned at the origin, root=0, "
            "gives single rows zero density away from it); use root='flat' or root > 0"
        )
    return llr


def tree_from_nested(tree: Any, n_leaves: int | None = None, *, leaf_time: float = 0.0) -> Tree:
    """A timed tree from nested dicts ``{"t": time, "children": [...]}`` with int leaves.

    Leaves are row indices, all at ``leaf_time`` (0 for the coalescent, 1 for the diffusion
    tree). ``n_leaves`` defaults to the number of leaves found, which must then be the rows
    ``0 .. n - 1``.
    """
    internal: list[list[int]] = []
    heights: list[float] = []
    leaves: list[int] = []
    seen: set[int] = set()

    def leaf(v: Any) -> int:
        if not is_int(v):
            raise InvalidTreeError(f"leaves must be row indices (int), got {v!r}")
        leaves.append(int(v))
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
        if n_leaves not in (None, 1) or leaf(tree) != 0:
            rows = "" if n_leaves is None else f"over {n_leaves} rows "
            raise InvalidTreeError(
                f'a tree {rows}must be a dict {{"t": time, "children": [...]}} or the leaf 0'
            )
        return Tree(1, [], [leaf_time])
    # Post-order with an explicit stack, so any depth works. Internal node k is recorded as
    # -(k + 1) until the number of leaves, and with it its id, is known.
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
                stack[-1][2].append(-len(internal))
        elif isinstance(child, dict):
            tc, kc = node(child)
            stack.append((tc, iter(kc), []))
        else:
            ids.append(leaf(child))
    n = len(leaves) if n_leaves is None else n_leaves
    for v in leaves:
        if not 0 <= v < n:
            raise InvalidTreeError(f"leaf {v} is not a row of the data (0 .. {n - 1})")
    internal = [[c if c >= 0 else n - c - 1 for c in ids] for ids in internal]
    return Tree(n, internal, [leaf_time] * n + heights)


def coalescent_log_joint(
    X: Any,
    tree: Any,
    likelihood: str = "brownian",
    Lambda: Any = 1.0,
    root: Any = "flat",
    noise: float = 0.0,
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
        As in :class:`KingmanCoalescent` (``Lambda`` a value, not ``"auto"``).
    noise : float, default=0.0
        The Brownian observation noise factor :math:`\eta` (see :class:`KingmanCoalescent`);
        0 is Teh et al.'s noiseless model. A fitted estimator's ``log_joint_`` is this
        function at its ``Lambda_`` and ``noise_``.

    Returns
    -------
    float
        ``+inf`` where the density is that of a point mass: equal rows merged at time 0,
        or a root pinned at a point (``root=0``) that a row sits on at time 0.

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
        tree = tree_from_nested(tree, X.shape[0])
    if tree.n_leaves != X.shape[0]:
        raise InvalidTreeError(f"the tree has {tree.n_leaves} leaves, but X has {X.shape[0]} rows")
    model = _core.CoalescentModel(
        X,
        likelihood=_likelihood(likelihood),
        lambda_=_lambda(Lambda),
        root=_root(root),
        noise=_noise(noise, _likelihood(likelihood)),
    )
    value = float(model.log_joint(X, tree._structure))
    if np.isnan(value):
        raise NumericalError(
            "the log joint is NaN in double precision (data or Lambda too extreme); rescale "
            "the data or Lambda"
        )
    return value
