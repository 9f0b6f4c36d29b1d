"""Cluster-model configuration: frozen values that describe a conjugate prior.

They hold hyperparameters only; the Rust core validates them when a model is fitted, and the
error names the hyperparameter at fault.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import _core
from ._validation import check_flag, is_int, real_array
from .exceptions import DegenerateModelWarning, InvalidParameterError, NumericalError

__all__ = [
    "AutoModel",
    "BetaBernoulli",
    "ClusterModel",
    "DirichletMultinomial",
    "NormalGamma",
    "NormalInverseWishart",
]


def _vector(name: str, value: Any) -> list[float]:
    """A scalar or 1-D hyperparameter as a list of floats."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            f"{name} must be a number or a 1-D array of numbers", name
        ) from None
    if arr.ndim > 1:
        raise InvalidParameterError(f"{name} must be a scalar or 1-D, got shape {arr.shape}", name)
    return [float(v) for v in np.atleast_1d(arr)]


def _optional_scalar(name: str, value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}", name) from None


class ClusterModel:
    r"""Base of the cluster models :math:`f(D)` (BRT eq 1.1) that rosetree can fit.

    The built-in models are computed in Rust from sufficient statistics. A model of your own
    is a subclass that implements :meth:`log_marginal`; the greedy search then calls it
    for every candidate cluster (from worker threads, holding the interpreter lock), so it
    plugs into everything the built-in models do. Each call gets the cluster's rows as a
    2-D float64 array and must return :math:`\ln f(D)` as a float; an exception it raises
    stops the fit and propagates unchanged.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy.special import betaln
    >>> class Coin(ClusterModel):
    ...     def log_marginal(self, X):
    ...         k, n = X.sum(axis=0), X.shape[0]
    ...         return float(np.sum(betaln(1 + k, 1 + n - k)))
    """

    def _spec(self) -> _core.ModelSpec:
        if type(self).log_marginal is ClusterModel.log_marginal:
            raise InvalidParameterError(
                f"{type(self).__name__} must implement log_marginal(X) to be used as a "
                "cluster model",
                "model",
            )
        return _core.ModelSpec.callback(self)

    #: Whether the statistics are built from the rows of a sparse matrix without a dense
    #: copy of it.
    _reads_sparse = False
    #: Whether NaN may mark missing entries (scikit-learn's ``allow_nan`` tag).
    _accepts_missing = True
    #: Whether the hyperparameters can be learned (the core has the gradient of the model).
    _learnable = False

    # Hyperparameter learning (rosetree.learning) runs in the core (rosetree::brt::learn),
    # which holds each model's coordinates; the classes only name the gradient's parts.

    def _gradient_parts(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """The core's flat gradient of ln f, by hyperparameter name."""
        raise NotImplementedError

    def _tied(self) -> ClusterModel:
        """The model learnt with ``tie``, each shared hyperparameter given as one value."""
        return self

    def _check_data(self, X: Any, stacklevel: int = 2) -> None:
        """Warn about data the model cannot describe well.

        Called with the validated data by everything that fits or evaluates the model;
        ``stacklevel=2`` points a warning at the caller of the function that calls this.
        """

    def log_marginal(self, X: Any) -> float:
        r""":math:`\ln f(D)` (BRT eq 1.1) of all rows of ``X`` taken as one cluster.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        float
        """
        from ._validation import check_array

        X = check_array(X, min_rows=1)
        self._check_data(X)
        value = float(_core.log_marginal(X, self._spec()))
        if np.isnan(value) or value == np.inf:
            raise NumericalError(
                f"ln f is {value} in double precision (hyperparameters or data too extreme)"
            )
        return value


class _PositivePerFeature(ClusterModel):
    """Models with positive per-feature hyperparameters.

    ``_per_feature`` names them in the core's gradient order; learning with ``tie`` gives
    each one value shared by all features.
    """

    _per_feature: tuple[str, ...] = ()
    _learnable = True

    def _gradient_parts(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        return dict(zip(self._per_feature, np.split(flat, len(self._per_feature)), strict=True))

    def _tied(self) -> ClusterModel:
        # Learnt tied, every feature holds the shared value.
        shared = {n: np.atleast_1d(np.asarray(getattr(self, n)))[:1] for n in self._per_feature}
        return replace(self, **shared)  # type: ignore[type-var]


@dataclass(frozen=True)
class BetaBernoulli(_PositivePerFeature):
    r"""Independent beta–Bernoulli features for binary data (BRT eq 1.19).

    .. math::
        f(D) = \prod_{i=1}^{d}
               \frac{B(\alpha_i + k_i,\ \beta_i + N_i - k_i)}{B(\alpha_i, \beta_i)}

    where :math:`k_i` counts the ones and :math:`N_i` the observed entries of column *i*.

    Parameters
    ----------
    alpha : float or array_like of shape (n_features,), default=None
        Pseudo-count of ones per feature (prior mean of :math:`P(x_i = 1)` is
        :math:`\alpha_i / (\alpha_i + \beta_i)`). ``None``: from the data, see Notes.
    beta : float or array_like of shape (n_features,), default=None
        Pseudo-count of zeros per feature. ``None``: from the data, see Notes.

    Notes
    -----
    Entries must be 0 or 1. NaN marks a missing entry, which is marginalised out.

    The default prior is set from the data: each feature's prior mean is its smoothed
    frequency of ones, :math:`m_i = (k_i + 1/2) / (N_i + 1)` over the :math:`N_i` observed
    entries, with the weight of one observation: :math:`\alpha_i = m_i`,
    :math:`\beta_i = 1 - m_i`. With :math:`\alpha = \beta = 1` every feature is a priori as
    likely on as off, and on sparse data rows that share their zeros look alike; measured on
    five labelled binary data sets (``benchmarks/bench_quality.py``), the data-driven prior
    raised the dendrogram purity of the trees from below SciPy's average linkage to above
    it on every one. Pass ``alpha=1.0, beta=1.0`` for the uniform prior.
    """

    alpha: float | ArrayLike | None = None
    beta: float | ArrayLike | None = None

    _per_feature = ("alpha", "beta")
    _reads_sparse = True

    def _spec(self) -> _core.ModelSpec:
        return _core.ModelSpec.beta_bernoulli(
            alpha=None if self.alpha is None else _vector("alpha", self.alpha),
            beta=None if self.beta is None else _vector("beta", self.beta),
        )


@dataclass(frozen=True)
class NormalInverseWishart(ClusterModel):
    r"""Multivariate Gaussian clusters with a conjugate Normal–inverse-Wishart prior.

    :math:`\Sigma \sim \mathcal{IW}(\Psi_0, \nu_0)`, :math:`\mu \mid \Sigma \sim
    \mathcal{N}(\mu_0, \Sigma / \kappa_0)`, :math:`x \sim \mathcal{N}(\mu, \Sigma)`.

    Parameters
    ----------
    mu0 : array_like of shape (n_features,), optional
        Prior mean. Default: the column means of the data.
    kappa0 : float, optional
        Prior pseudo-count of the mean (the BRT paper's *r*). Default: 0.01, a vague prior on
        where clusters lie.
    nu0 : float, optional
        Degrees of freedom, ``nu0 > n_features - 1``. Default: ``n_features + 2``, the
        smallest integer for which the prior mean of :math:`\Sigma` exists.
    psi0 : array_like of shape (n_features, n_features) or (n_features,), optional
        Scale matrix, symmetric positive definite (the paper's Wishart scale *S* is
        ``inv(psi0)``); a 1-D array is the diagonal of a diagonal scale matrix. Default:
        ``(nu0 - n_features - 1) * diag(v)``, where ``v`` holds the data's column variances
        plus ``1e-6`` times their mean (so that a constant column stays positive), so that
        the prior mean of :math:`\Sigma` is ``diag(v)``.

    Notes
    -----
    Why the default scale is diagonal: on labelled continuous data (MNIST PCA-20, optdigits
    and the BHC digits 0/2/4 as raw pixels, Gaussian blobs; ``benchmarks/niw_defaults.py``),
    the diagonal default gave a mean dendrogram purity of 0.63 against 0.49 for the data
    covariance, with cluster counts nearer the number of classes; other multiples of it, a
    larger ``nu0`` or ``kappa0`` of 0.1 or 1 did no better on average. The full covariance of
    raw pixels is nearly singular, and singular whenever ``n_features >= n_samples``, where
    the diagonal stays well defined.

    With ``n_features >= n_samples`` no cluster has enough rows to estimate a full
    covariance matrix and the fit follows the prior: fitting or evaluating then emits a
    :class:`~rosetree.DegenerateModelWarning`. A diagonal model or fewer features (e.g. by
    PCA) suit such data better.

    Scoring is fast in many dimensions: statistics are kept in coordinates whitened by the
    prior, and a cluster of ``m`` rows costs :math:`O(m^2 d)` to score rather than
    :math:`O(d^3)` while ``m`` is small against ``d``. A full (non-diagonal) ``psi0`` is
    factorised once, :math:`O(d^3)`.

    Missing values are not supported.
    """

    mu0: ArrayLike | None = None
    kappa0: float | None = None
    nu0: float | None = None
    psi0: ArrayLike | None = None

    _accepts_missing = False
    # Learnt (in the core) as ln κ0, ln(ν0 − d + 1) and ln c of Ψ0 → c Ψ0.
    _learnable = True

    def _gradient_parts(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        return {"kappa0": flat[:1], "nu0": flat[1:2], "psi0_scale": flat[2:3]}

    def _check_data(self, X: Any, stacklevel: int = 2) -> None:
        n, d = X.shape
        if d >= n:
            warnings.warn(
                f"NormalInverseWishart with n_features={d} >= n_samples={n}: no cluster has "
                f"enough rows to estimate a full {d}x{d} covariance matrix, so the marginal "
                "likelihoods follow the prior and can be degenerate. Use a model with "
                "independent features (rt.NormalGamma) or fewer features (e.g. after PCA).",
                DegenerateModelWarning,
                stacklevel=stacklevel + 1,
            )

    def _spec(self) -> _core.ModelSpec:
        psi0 = psi0_diagonal = None
        if self.psi0 is not None:
            arr = real_array(self.psi0, "psi0")
            if arr.ndim == 1:
                psi0_diagonal = [float(v) for v in arr]
            elif arr.ndim == 2 and arr.shape[0] == arr.shape[1]:
                psi0 = [float(v) for v in arr.ravel()]
            else:
                raise InvalidParameterError(
                    f"psi0 must be a square matrix or a 1-D diagonal, got shape {arr.shape}",
                    "psi0",
                )
        return _core.ModelSpec.normal_inverse_wishart(
            mu0=None if self.mu0 is None else _vector("mu0", self.mu0),
            kappa0=_optional_scalar("kappa0", self.kappa0),
            nu0=_optional_scalar("nu0", self.nu0),
            psi0=psi0,
            psi0_diagonal=psi0_diagonal,
        )


@dataclass(frozen=True)
class NormalGamma(ClusterModel):
    r"""Real-valued clusters with independent Normal–Gamma features (a diagonal Gaussian).

    Per feature *j*: :math:`x_j \mid \mu_j, \lambda_j \sim \mathcal{N}(\mu_j, 1/\lambda_j)`,
    :math:`\mu_j \mid \lambda_j \sim \mathcal{N}(m_{0j}, 1/(\kappa_0 \lambda_j))`,
    :math:`\lambda_j \sim \mathrm{Gamma}(a_0, \text{rate } b_{0j})`, so that

    .. math::
        \ln f(D) = \sum_j \Big[\ln\Gamma(a_n) - \ln\Gamma(a_0) + a_0 \ln b_{0j}
                  - a_n \ln b_{nj} + \tfrac12 \ln\frac{\kappa_0}{\kappa_n}
                  - \tfrac{n}{2} \ln 2\pi\Big]

    with :math:`\kappa_n = \kappa_0 + n`, :math:`a_n = a_0 + n/2` and
    :math:`b_{nj} = b_{0j} + \tfrac12 \sum (x_j - \bar x_j)^2
    + \kappa_0 n (\bar x_j - m_{0j})^2 / (2\kappa_n)` (Murphy 2007, eq 95), *n* counting
    the observed entries of feature *j*.

    Parameters
    ----------
    m0 : float or array_like of shape (n_features,), optional
        Prior mean of each feature. Default: the column means of the data.
    kappa0 : float, optional
        Prior pseudo-count of the means. Default: 1.0, so that cluster means spread about
        as widely as the rows of one cluster.
    a0 : float, optional
        Gamma shape of the precisions. Default: 5.0.
    b0 : float or array_like of shape (n_features,), optional
        Gamma rate of each feature's precision (prior mean precision ``a0 / b0``).
        Default: ``0.2 * a0`` times the column variance (plus a ridge of 1e-6 times the mean
        variance), so that a cluster's prior mean precision is five times that of the whole
        data; a column with fewer than two observed values takes the mean variance. With
        ``shared_precision``, one number, by default ``0.2 * a0`` times the columns' mean
        variance.
    shared_precision : bool, default=False
        One precision :math:`\lambda \sim \mathrm{Gamma}(a_0, b_0)` for every feature of
        a cluster instead of one per feature: a spherical Gaussian, whose clusters are balls
        as in Ward's criterion. Then

        .. math::
            \ln f(D) = \sum_j \Big[\tfrac12 \ln\frac{\kappa_0}{\kappa_{n_j}}
                      - \tfrac{n_j}{2} \ln 2\pi\Big] + \ln\Gamma(a_N) - \ln\Gamma(a_0)
                      + a_0 \ln b_0 - a_N \ln\Big(b_0 + \sum_j (b_{n_j} - b_0)\Big)

        with :math:`a_N = a_0 + N/2` and :math:`N` the cluster's observed entries. A
        feature of small variance then weighs little, where the per-feature model measures
        every feature against its own spread (on standardized columns, the same thing). It
        suits many columns in one unit (pixels, principal components, embeddings), where
        ``model="auto"`` takes it (see :class:`AutoModel`). Its hyperparameters cannot be
        learnt.

    Notes
    -----
    The defaults gave the highest mean dendrogram purity among 90 candidate rules on
    labelled continuous data (MNIST PCA-20, optdigits and digits024 subsets; see
    ``experiments/normal_gamma_defaults.py``). NaN marks a missing
    entry, which drops out of its feature (marginalised). Unlike
    :class:`NormalInverseWishart`, the features are independent within a cluster, which
    costs no matrix algebra and estimates no covariances; sparse input is read without a
    dense copy.
    """

    m0: float | ArrayLike | None = None
    kappa0: float | None = None
    a0: float | None = None
    b0: float | ArrayLike | None = None
    shared_precision: bool = False

    _reads_sparse = True
    # Learnt (in the core) with ``b0`` relative to its start and ``m0`` as the shift from
    # its start in units of the prior standard deviation, so that neither depends on the
    # scale of the data; with ``tie``, ``m0`` stays at its start and one factor scales
    # every ``b0``. κ0 and a0 on a log scale. The shared precision has no gradient.

    def _gradient_parts(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        d = (flat.size - 2) // 2
        return {
            "m0": flat[:d],
            "kappa0": flat[d : d + 1],
            "a0": flat[d + 1 : d + 2],
            "b0": flat[d + 2 :],
        }

    @property
    def _learnable(self) -> bool:  # type: ignore[override]
        return self.shared_precision is False

    def _spec(self) -> _core.ModelSpec:
        from ._validation import check_flag

        shared = check_flag(self.shared_precision, "shared_precision")
        b0 = None if self.b0 is None else _vector("b0", self.b0)
        if shared and b0 is not None and len(b0) != 1:
            raise InvalidParameterError(
                f"with shared_precision=True b0 is one number, got {len(b0)} values", "b0"
            )
        return _core.ModelSpec.normal_gamma(
            m0=None if self.m0 is None else _vector("m0", self.m0),
            kappa0=_optional_scalar("kappa0", self.kappa0),
            a0=_optional_scalar("a0", self.a0),
            b0=b0,
            shared_precision=shared,
        )


@dataclass(frozen=True)
class DirichletMultinomial(_PositivePerFeature):
    r"""Dirichlet–multinomial clusters for rows of counts (word counts, say).

    .. math:: \ln f(D) = \ln\Gamma(A) - \ln\Gamma(A + N)
              + \sum_k [\ln\Gamma(\alpha_k + c_k) - \ln\Gamma(\alpha_k)]

    with :math:`A = \sum_k \alpha_k`, :math:`c_k` the column totals and :math:`N` the total.

    Parameters
    ----------
    alpha : float or array_like of shape (n_features,), default=1.0
        Dirichlet concentration per category.
    multinomial_coefficient : bool, default=False
        Add :math:`\sum_\text{rows} \ln(N_r! / \prod_k x_{rk}!)`. It adds the same constant to
        every tree, so it never changes which tree is found; include it to report the
        probability of the counts rather than of one ordering of the tokens.
    """

    alpha: float | ArrayLike = 1.0
    multinomial_coefficient: bool = False

    _per_feature = ("alpha",)
    _reads_sparse = True

    def _spec(self) -> _core.ModelSpec:
        return _core.ModelSpec.dirichlet_multinomial(
            _vector("alpha", self.alpha),
            multinomial_coefficient=check_flag(
                self.multinomial_coefficient, "multinomial_coefficient"
            ),
        )


@dataclass(frozen=True)
class AutoModel:
    r"""Choose the cluster model from the data: the default ``model`` of :class:`BayesianRoseTree`.

    The data's type decides first:

    - every observed entry 0 or 1: :class:`BetaBernoulli`;
    - every observed entry a non-negative integer, some above 1, and some 0 (counts; a
      sparse matrix's implicit entries are zeros): :class:`DirichletMultinomial`. Counts
      start at zero: integers of which none is 0 (lengths in millimetres, masses in grams,
      years, ratings from 1) are measurements in whole units, and real-valued (iris in
      millimetres: dendrogram purity 0.82 under the Gaussian model chosen, 0.65 as counts;
      ``benchmarks/bench_integer_data.py``);
    - anything else (real-valued): a choice among the candidates ``real`` (by default
      :class:`NormalGamma`, one precision per feature; :class:`NormalInverseWishart`, full
      covariance; and ``NormalGamma(shared_precision=True)``, one precision for all
      features of a cluster), each with its data-driven defaults, by ``rule``.
      :class:`NormalInverseWishart` takes no missing entries, needs dense rows and more
      rows than columns: otherwise it is not a candidate. The shared precision measures
      every column in one unit: it is a candidate only for ten columns or more whose
      ranges lie within a factor of 100 of each other (as for the coalescent's
      ``Lambda="auto"``). On columns in different units the widest would decide the tree
      (the raw penguins and wine: dendrogram purity 0.62 and 0.64 against 0.94 and 0.93),
      and the ranges cannot always tell (the penguins' bills in tenths of a millimetre
      beside their mass in grams: within a factor of 60, purity 0.64 against 0.93); few
      columns are most often measurements in units of their own.

    Each real-valued candidate fits the greedy tree of the estimator's own settings to the
    data (or to a random sample of ``sample`` rows) and is scored by ``rule``:

    ``"structure"`` (the default)
        :math:`\ln p(D \mid T_m) - \ln f_m(D)`: the log Bayes factor, under model *m*, of
        its greedy tree against one cluster of all rows; the model under which the data
        show the strongest cluster structure wins. Unitless, so comparable between models.
    ``"evidence"``
        :math:`\ln p(D \mid T_m)` itself: the marginal likelihood of each model's greedy
        tree, the Bayesian choice of the better density model.

    Why ``"structure"``: on seven labelled real-valued data sets (scikit-learn's iris, wine,
    breast cancer and digits, the Palmer penguins, MNIST PCA-20 and, held out, the cars
    data; six subsets each, in their own units, ``benchmarks/bench_model_choice.py``), it
    picked the candidate of the purest rose tree on 35 of 42 subsets (6 of 6 on the
    held-out set), the evidence on 13 and held-out predictive density on 13. A full
    covariance explains correlated features (breast cancer's radius, perimeter and area)
    far better, so its evidence and its predictive density win by thousands of nats, while
    its trees are much less pure (dendrogram purity 0.57 against 0.89). The evidence does
    pick the model that generated the data where the data come from one of the candidates;
    the structure score then prefers the diagonal model, which splits correlated clusters
    into pieces.

    The shared precision is for many columns in one unit, where one precision per feature
    measures every column against its own spread, so that columns of noise (a few
    informative columns among many, the last of many principal components) weigh as much
    as those that separate the clusters (``benchmarks/bench_many_columns.py``). The
    structure score chose it for three groups in 10, 200 and 2,000 columns of 60 rows
    (dendrogram purity 0.79, 1.00 and 1.00, three flat clusters, against 0.55, 0.83 and
    0.81 before), for the held-out digits reduced to 30 principal components (0.70
    against 0.54) and on MNIST PCA-20 on 47 of 50 subsets (0.449 against 0.445); on the
    standardized wine, breast cancer and digits of ``benchmarks/bench_quality.py`` it won
    no subset, and their trees are unchanged. A limit: with two to four rows per column
    the full covariance's structure score outgrows the others' and it is chosen; on MNIST
    reduced to 50 or 100 components and three groups in 20 or 50 columns its trees are
    the least pure (0.36 and 0.28 against the shared precision's 0.45 and 0.45), but on
    the held-out newsgroups reduced by latent semantic analysis to 50 or 100 components
    they are the purest (0.42 and 0.38 against 0.38 and 0.35), so no such case is ruled
    out.

    Parameters
    ----------
    rule : {"structure", "evidence"}, default="structure"
        How the real-valued candidates are compared (see above).
    real : tuple of ClusterModel, default=None
        The candidates for real-valued data; ``None`` is ``(NormalGamma(),
        NormalInverseWishart(), NormalGamma(shared_precision=True))``.
    sample : int, default=2000
        The choice is made on at most this many rows, drawn at random (seeded by the
        estimator's ``random_state``); the chosen model then fits all rows.

    Notes
    -----
    The fitted estimator's ``model_`` is the chosen model and ``model_selection_`` records
    the choice: the data type, the rule, and each candidate's ``log_evidence``,
    ``log_marginal_one_cluster`` and ``score``.

    Examples
    --------
    >>> import numpy as np, rosetree as rt
    >>> X = np.random.default_rng(0).normal(size=(30, 3))
    >>> est = rt.BayesianRoseTree(model=rt.AutoModel(rule="evidence")).fit(X)
    >>> type(est.model_).__name__ in ("NormalGamma", "NormalInverseWishart")
    True
    """

    rule: str = "structure"
    real: tuple[ClusterModel, ...] | None = None
    sample: int = 2000

    #: Every candidate but the Normal-inverse-Wishart takes NaN; it is left out then.
    _accepts_missing = True
    _reads_sparse = True

    def _check(self) -> None:
        from ._validation import check_choice

        check_choice(self.rule, "rule", ("structure", "evidence"))
        if self.real is not None:
            if not isinstance(self.real, (tuple, list)) or not self.real:
                raise InvalidParameterError(
                    f"real must be a non-empty tuple of cluster models, got {self.real!r}",
                    "real",
                )
            for m in self.real:
                resolve_model(m)
        sample = self.sample
        if not is_int(sample) or sample < 2:
            raise InvalidParameterError(
                f"sample must be an integer of at least 2, got {sample!r}", "sample"
            )

    def _candidates(self) -> tuple[ClusterModel, ...]:
        if self.real is None:
            return (NormalGamma(), NormalInverseWishart(), NormalGamma(shared_precision=True))
        return tuple(self.real)


def resolve_model(model: Any) -> ClusterModel:
    """The cluster model to use (``None`` means :class:`BetaBernoulli` with defaults)."""
    if model is None:
        return BetaBernoulli()
    if not isinstance(model, ClusterModel):
        raise InvalidParameterError(
            "model must be a rosetree cluster model such as rt.BetaBernoulli(), "
            "rt.NormalInverseWishart(), rt.NormalGamma(), rt.DirichletMultinomial() or a "
            f"subclass of rt.ClusterModel that implements log_marginal(X); got {model!r}",
            "model",
        )
    return model
