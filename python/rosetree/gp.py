r"""Gaussian-process expert clusters (BRT section 1.3.2, eqs 1.20–1.21) and their predictions.

A cluster of input–output pairs :math:`D = \{(x_i, y_i)\}` has

.. math:: f(D) = f(\{x_i\})\, \mathcal{N}(\{y_i\} \mid m\mathbf{1}, \mathbf{K})

with a Normal–inverse-Wishart marginal over the inputs and a Gaussian process over the
outputs given the inputs. A rose tree over such clusters is a hierarchical mixture of
Gaussian-process experts; :meth:`GPExperts.predictive_density` gives its conditional density
of an output at a new input (eq 1.25).

This module needs SciPy (imported on first use).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import ArrayLike

from ._validation import (
    check_array,
    check_finite,
    check_positive,
    finite_array,
    real_array,
)
from .config import ClusterModel
from .exceptions import (
    InvalidDataError,
    InvalidParameterError,
    NumericalError,
)

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["GPExperts"]

_LN_PI = math.log(math.pi)
_LN_2PI = math.log(2.0 * math.pi)
#: Relative ridge on the data covariance in :meth:`GPExperts.from_data` (as in
#: :class:`~rosetree.NormalInverseWishart`'s data-driven default).
_RIDGE = 1e-6


_LAPACK: tuple[Any, Any] | None = None


def _lapack() -> tuple[Any, Any]:
    """SciPy's ``dpotrf`` and ``dtrtrs``: a Cholesky factor and a triangular solve."""
    global _LAPACK
    if _LAPACK is None:
        try:
            from scipy.linalg.lapack import dpotrf, dtrtrs
        except ImportError:  # pragma: no cover - SciPy is installed wherever the tests run
            raise ImportError("rosetree.GPExperts needs SciPy: pip install scipy") from None
        _LAPACK = (dpotrf, dtrtrs)
    return _LAPACK


def _ln_multigamma(a: float, d: int) -> float:
    r""":math:`\ln \Gamma_d(a)`."""
    return d * (d - 1) / 4.0 * _LN_PI + sum(math.lgamma(a - j / 2.0) for j in range(d))


def _checked(log_density: bool) -> Callable[[F], F]:
    """Turn what rounding does to extreme inputs into NumericalError, never a silent NaN.

    Floats beyond the range of double precision (huge data or hyperparameters) overflow in
    the sums of squares: Python's floats raise OverflowError, NumPy's warn and give inf or
    NaN. The wrapped method runs with NumPy's warnings off and raises NumericalError if its
    result holds a NaN, or for a log density, any non-finite value (the density of finite
    data under these models is positive and finite; ±inf is a rounding).
    """

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                with np.errstate(all="ignore"):
                    out = method(*args, **kwargs)
            except (OverflowError, ZeroDivisionError, ValueError) as exc:
                # math's "math domain error" only; other ValueErrors are rosetree's own.
                if isinstance(exc, ValueError) and not str(exc).startswith("math "):
                    raise
                raise NumericalError(
                    f"{method.__name__}: the inputs or hyperparameters are beyond the range "
                    f"of double precision ({exc}); rescale the data"
                ) from None
            values = np.concatenate(
                [
                    np.ravel(np.asarray(v, dtype=np.float64))
                    for v in (out if isinstance(out, tuple) else (out,))
                ]
            )
            bad = np.isnan(values).any() or (log_density and not np.isfinite(values).all())
            if bad:
                raise NumericalError(
                    f"{method.__name__}: the result is not finite in double precision (inputs "
                    "or hyperparameters too extreme); rescale the data or the hyperparameters"
                )
            return out

        return checked  # type: ignore[return-value]

    return wrap


@dataclass(frozen=True)
class _Prior:
    """The hyperparameters resolved for ``d`` input columns, with derived constants."""

    d: int
    mu0: np.ndarray
    psi0: np.ndarray
    nu0: float
    inv_lengthscale: np.ndarray  # shape (d,)
    const: float  # −ln Γ_d(ν0/2) + (ν0/2) ln|Ψ0| + (d/2) ln κ0


@dataclass(frozen=True)
class GPExperts(ClusterModel):
    r"""Gaussian-process expert clusters of input–output pairs (BRT eqs 1.20–1.21).

    A data row is one pair :math:`(x_i, y_i)`: **all columns but the last are the input**
    :math:`x_i \in \mathbb{R}^d` **and the last column is the output** :math:`y_i`, e.g.
    ``np.column_stack([x, y])``. A cluster of *n* rows has

    .. math::
        \ln f(D) = \ln f(\{x_i\}) + \ln \mathcal{N}(y \mid m \mathbf{1}, \mathbf{K}),
        \qquad K_{ij} = s^2 \exp\!\Big(-\sum_k \frac{(x_{ik} - x_{jk})^2}{2 \ell_k^2}\Big)
                        + \sigma^2 \delta_{ij},

    where :math:`f(\{x_i\})` is the Normal–inverse-Wishart marginal likelihood of the inputs
    (:math:`\Sigma \sim \mathcal{IW}(\Psi_0, \nu_0)`, :math:`\mu \mid \Sigma \sim
    \mathcal{N}(\mu_0, \Sigma / \kappa_0)`, :math:`x \sim \mathcal{N}(\mu, \Sigma)`, the same
    as :class:`~rosetree.NormalInverseWishart`) and the second factor is the marginal
    likelihood of a Gaussian process with a squared-exponential covariance, signal variance
    :math:`s^2`, lengthscale :math:`\ell` and noise variance :math:`\sigma^2`.

    Parameters
    ----------
    signal_variance : float, default=1.0
        :math:`s^2 > 0`, the prior variance of the latent function.
    lengthscale : float or array_like of shape (n_inputs,), default=1.0
        :math:`\ell > 0`, one for all inputs or one per input column.
    noise_variance : float, default=0.01
        :math:`\sigma^2 > 0`, the variance of the observation noise. It also bounds the
        smallest eigenvalue of :math:`\mathbf{K}` from below, so duplicated inputs are fine;
        no jitter is added.
    mean : float, default=0.0
        :math:`m`, the constant prior mean of the outputs.
    mu0 : float or array_like of shape (n_inputs,), default=0.0
        Prior mean of the input mean (a scalar applies to every input column).
    kappa0 : float, default=0.01
        Prior pseudo-count of the input mean (the BRT paper's *r*); small is vague.
    nu0 : float, optional
        Degrees of freedom of the inverse-Wishart prior on the input covariance,
        ``nu0 > n_inputs - 1``. Default: ``n_inputs + 2``.
    psi0 : float or array_like, default=1.0
        Inverse-Wishart scale :math:`\Psi_0` (the paper's *S* is its inverse): a scalar
        (times the identity), a vector (the diagonal) or a symmetric positive definite
        matrix. With the default ``nu0`` the prior mean of the input covariance is
        :math:`\Psi_0`.

    Raises
    ------
    InvalidParameterError
        For a hyperparameter outside its domain, naming it. Dimensions are checked against
        the data when the model is used.

    See Also
    --------
    GPExperts.from_data : the input prior set from the data.

    Notes
    -----
    The Gaussian-process factor uses a Cholesky factorisation of :math:`\mathbf{K}` (LAPACK
    ``dpotrf`` through SciPy), :math:`O(n^3)` per cluster. The greedy search calls
    :meth:`log_marginal` once for every candidate cluster, so the cost of a fit grows
    quickly with the number of rows (a few hundred rows take seconds to minutes).

    Examples
    --------
    >>> import numpy as np, rosetree as rt
    >>> x = np.linspace(0, 6, 8)
    >>> X = np.column_stack([np.r_[x, x], np.r_[np.sin(x), -np.sin(x)]])
    >>> model = rt.GPExperts.from_data(X, noise_variance=0.01)
    >>> tree = rt.BayesianRoseTree(model=model).fit(X).tree_
    >>> grid = np.linspace(0, 6, 5)
    >>> density = model.predictive_density(tree, X, grid, np.sin(grid))  # log p(y | x, D, T)
    """

    signal_variance: float = 1.0
    lengthscale: float | ArrayLike = 1.0
    noise_variance: float = 0.01
    mean: float = 0.0
    mu0: float | ArrayLike = 0.0
    kappa0: float = 0.01
    nu0: float | None = None
    psi0: float | ArrayLike = 1.0
    _priors: dict[int, _Prior] = field(default_factory=dict, init=False, repr=False, compare=False)
    _accepts_missing = False

    def __post_init__(self) -> None:
        check_positive(self.signal_variance, "signal_variance")
        check_positive(self.noise_variance, "noise_variance")
        check_finite(self.mean, "mean")
        check_positive(self.kappa0, "kappa0")
        if self.nu0 is not None:
            check_finite(self.nu0, "nu0")
        ls = finite_array(self.lengthscale, "lengthscale", max_ndim=1, positive=True)
        finite_array(self.mu0, "mu0", max_ndim=1)
        psi0 = finite_array(self.psi0, "psi0", max_ndim=2)
        if psi0.ndim < 2 and (psi0 <= 0).any():
            raise InvalidParameterError(
                f"psi0 as a scalar or diagonal must be > 0, got {self.psi0!r}", "psi0"
            )
        # Hyperparameters that fix the number of inputs are checked against each other now.
        dims = {
            name: arr.shape[0]
            for name, arr in (
                ("lengthscale", ls),
                ("mu0", np.asarray(self.mu0, dtype=float)),
                ("psi0", psi0),
            )
            if arr.ndim >= 1
        }
        if dims:
            d = max(dims.values())
            self._prior(d)  # raises naming the parameter whose size differs

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_data(
        cls,
        X: ArrayLike,
        *,
        kappa0: float = 0.01,
        nu0: float | None = None,
        **kwargs: Any,
    ) -> GPExperts:
        r"""A model whose input prior is set from the data, as :class:`NormalInverseWishart` does.

        :math:`\mu_0` is the mean of the inputs, :math:`\nu_0 = d + 2` unless given, and
        :math:`\Psi_0 = (\nu_0 - d - 1)\, V` (so that the prior mean of the input
        covariance is *V*), where *V* is the diagonal matrix of the inputs' sample variances
        (divisor ``n - 1``) plus :math:`10^{-6}` times their mean (the identity if every
        input is constant). If :math:`\nu_0 \le d + 1`, :math:`\Psi_0 = V`.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_inputs + 1)
            Data rows; the last column (the output) is not used.
        kappa0 : float, default=0.01
            Prior pseudo-count of the input mean.
        nu0 : float, optional
            Degrees of freedom; default ``n_inputs + 2``.
        **kwargs
            The Gaussian-process hyperparameters (``signal_variance``, ``lengthscale``,
            ``noise_variance``, ``mean``), passed on unchanged.

        Returns
        -------
        GPExperts
        """
        X = _check_rows(X, "X", min_rows=2)
        x = X[:, :-1]
        d = x.shape[1]
        var = np.var(x, axis=0, ddof=1)
        mean_var = float(var.mean())
        cov = np.diag(var + _RIDGE * mean_var) if mean_var > 0 else np.eye(d)
        nu = d + 2.0 if nu0 is None else check_finite(nu0, "nu0")
        scale = nu - d - 1.0 if nu > d + 1.0 else 1.0
        for name in ("mu0", "psi0"):
            if name in kwargs:
                raise InvalidParameterError(f"from_data sets {name}; do not pass it", name)
        return cls(mu0=x.mean(axis=0), psi0=scale * cov, nu0=nu, kappa0=kappa0, **kwargs)

    def _prior(self, d: int) -> _Prior:
        """Hyperparameters resolved for ``d`` input columns (cached per ``d``)."""
        prior = self._priors.get(d)
        if prior is not None:
            return prior
        mu0 = np.asarray(self.mu0, dtype=np.float64)
        if mu0.ndim == 0:
            mu0 = np.full(d, float(mu0))
        elif mu0.shape != (d,):
            raise InvalidParameterError(
                f"mu0 has {mu0.shape[0]} entries, but the data have {d} input columns", "mu0"
            )
        psi0 = np.asarray(self.psi0, dtype=np.float64)
        if psi0.ndim == 0:
            psi0 = float(psi0) * np.eye(d)
        elif psi0.ndim == 1:
            if psi0.shape != (d,):
                raise InvalidParameterError(
                    f"psi0 has {psi0.shape[0]} diagonal entries, but the data have {d} input "
                    "columns",
                    "psi0",
                )
            psi0 = np.diag(psi0)
        else:
            if psi0.shape != (d, d):
                raise InvalidParameterError(
                    f"psi0 must be a {d} x {d} matrix for {d} input columns, got shape "
                    f"{psi0.shape}",
                    "psi0",
                )
            if not np.allclose(psi0, psi0.T, rtol=1e-10, atol=0.0):
                raise InvalidParameterError("psi0 must be symmetric", "psi0")
        ln_det0 = _ln_det_spd(psi0)
        if ln_det0 is None:
            raise InvalidParameterError("psi0 must be positive definite", "psi0")
        nu0 = d + 2.0 if self.nu0 is None else float(self.nu0)
        if not nu0 > d - 1:
            raise InvalidParameterError(f"nu0 must be > n_inputs - 1 = {d - 1}, got {nu0}", "nu0")
        ls = np.asarray(self.lengthscale, dtype=np.float64)
        if ls.ndim == 0:
            ls = np.full(d, float(ls))
        elif ls.shape != (d,):
            raise InvalidParameterError(
                f"lengthscale has {ls.shape[0]} entries, but the data have {d} input columns",
                "lengthscale",
            )
        try:
            const = (
                -_ln_multigamma(nu0 / 2.0, d)
                + nu0 / 2.0 * ln_det0
                + d / 2.0 * math.log(self.kappa0)
            )
        except (OverflowError, ValueError):  # ln Γ at a pole: nu0 / 2 underflowed to 0
            const = math.nan
        if not math.isfinite(const):
            raise NumericalError(
                "the prior's normaliser is beyond double precision (nu0, psi0 or kappa0 too "
                "extreme)"
            )
        prior = _Prior(d, mu0, psi0, nu0, 1.0 / ls, const)
        self._priors[d] = prior
        return prior

    # ------------------------------------------------------------------ marginal likelihood
    @_checked(log_density=True)
    def log_marginal(self, X: Any) -> float:
        r""":math:`\ln f(D)` (BRT eqs 1.20–1.21) of all rows of ``X`` taken as one cluster.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_inputs + 1)
            Input columns followed by the output column.

        Returns
        -------
        float
            :math:`\ln f(\{x_i\}) + \ln \mathcal{N}(y \mid m\mathbf{1}, \mathbf{K})`.

        Raises
        ------
        InvalidDataError
            If ``X`` is not 2-D with at least two columns and one row, or has a non-finite
            value (the error names its row and column).
        NumericalError
            If :math:`\mathbf{K}` is not numerically positive definite (a noise variance far
            below the signal variance).
        """
        X = _check_rows(X, "X")
        d = X.shape[1] - 1
        prior = self._prior(d)
        x = X[:, :d]
        return self._log_f_inputs(x, prior) + self._log_f_outputs(x, X[:, d], prior)

    @_checked(log_density=True)
    def log_marginal_inputs(self, X: Any) -> float:
        r""":math:`\ln f(\{x_i\})`, the Normal–inverse-Wishart part of :meth:`log_marginal`."""
        X = _check_rows(X, "X")
        d = X.shape[1] - 1
        return self._log_f_inputs(X[:, :d], self._prior(d))

    @_checked(log_density=True)
    def log_marginal_outputs(self, X: Any) -> float:
        r""":math:`\ln \mathcal{N}(y \mid m\mathbf{1}, \mathbf{K})`, the Gaussian-process part."""
        X = _check_rows(X, "X")
        d = X.shape[1] - 1
        return self._log_f_outputs(X[:, :d], X[:, d], self._prior(d))

    def _log_f_inputs(self, x: np.ndarray, prior: _Prior) -> float:
        n, d = x.shape
        kn = self.kappa0 + n
        nun = prior.nu0 + n
        xbar = x.sum(axis=0) / n  # ndarray.mean costs more than this on tiny arrays
        dev = x - xbar
        diff = xbar - prior.mu0
        w = self.kappa0 * n / kn
        if d == 1:
            psin = prior.psi0[0, 0] + float(dev[:, 0] @ dev[:, 0]) + w * float(diff[0]) ** 2
            ln_det = math.log(psin)
        else:
            psin = prior.psi0 + dev.T @ dev + w * np.outer(diff, diff)
            ln_det_or_none = _ln_det_spd(psin)
            if ln_det_or_none is None:  # pragma: no cover - Ψn ⪰ Ψ0 is positive definite
                raise NumericalError("the posterior input scale matrix is not positive definite")
            ln_det = ln_det_or_none
        value: float = (
            -n * d / 2.0 * _LN_PI
            + _ln_multigamma(nun / 2.0, d)
            + prior.const
            - nun / 2.0 * ln_det
            - d / 2.0 * math.log(kn)
        )
        return value

    def _log_f_outputs(self, x: np.ndarray, y: np.ndarray, prior: _Prior) -> float:
        n = x.shape[0]
        K = self._gram(x, x, prior)
        K.ravel()[:: n + 1] += self.noise_variance
        L = _cholesky(K, overwrite=True)
        alpha = _solve_lower(L, y - self.mean)
        return float(-0.5 * (alpha @ alpha) - np.log(np.diagonal(L)).sum() - n / 2.0 * _LN_2PI)

    def _gram(self, a: np.ndarray, b: np.ndarray, prior: _Prior) -> np.ndarray:
        r""":math:`s^2 \exp(-|a_i - b_j|^2 / 2\ell^2)`, without the noise term."""
        if prior.d == 1:
            g = a[:, 0] * prior.inv_lengthscale[0]
            h = b[:, 0] * prior.inv_lengthscale[0]
            sq = np.subtract.outer(g, h)
            np.square(sq, out=sq)
        else:
            g = a * prior.inv_lengthscale
            h = b * prior.inv_lengthscale
            sq = np.square(g[:, None, :] - h[None, :, :]).sum(axis=2)
        sq *= -0.5
        np.exp(sq, out=sq)
        sq *= self.signal_variance
        return cast("np.ndarray", sq)

    # ------------------------------------------------------------------ one cluster's predictions
    @_checked(log_density=True)
    def input_log_predictive(self, cluster: ArrayLike, x: ArrayLike) -> np.ndarray:
        r""":math:`\ln p(x \mid D)`: the Normal–inverse-Wishart predictive of new inputs.

        A multivariate Student-t with :math:`\nu_n - d + 1` degrees of freedom, location
        :math:`\mu_n` and shape :math:`\Psi_n (\kappa_n + 1) / (\kappa_n (\nu_n - d + 1))`;
        it equals :math:`f(\{x_i\} \cup \{x\}) / f(\{x_i\})`.

        Parameters
        ----------
        cluster : array_like of shape (n_rows, n_inputs + 1)
            The cluster's (input, output) rows, e.g. ``X[tree.leaves(node)]``.
        x : array_like of shape (n_queries, n_inputs), or (n_queries,) for one input
            New inputs.

        Returns
        -------
        ndarray of shape (n_queries,)
        """
        D = _check_rows(cluster, "cluster")
        d = D.shape[1] - 1
        return self._input_log_predictive(D[:, :d], _check_queries(x, d), self._prior(d))

    def _input_log_predictive(self, xd: np.ndarray, xq: np.ndarray, prior: _Prior) -> np.ndarray:
        n, d = xd.shape
        kn = self.kappa0 + n
        xbar = xd.sum(axis=0) / n
        dev = xd - xbar
        diff = xbar - prior.mu0
        psin = prior.psi0 + dev.T @ dev + self.kappa0 * n / kn * np.outer(diff, diff)
        df = prior.nu0 + n - d + 1
        loc = (self.kappa0 * prior.mu0 + n * xbar) / kn
        # Multivariate Student t with shape Ψn (κn + 1) / (κn df), written out because
        # scipy.stats.multivariate_t costs a millisecond per construction.
        L = _cholesky(psin * ((kn + 1) / (kn * df)), overwrite=True)
        z = _solve_lower(L, (xq - loc).T)
        maha = np.einsum("ij,ij->j", z, z)
        out: np.ndarray = (
            math.lgamma((df + d) / 2.0)
            - math.lgamma(df / 2.0)
            - d / 2.0 * math.log(df * math.pi)
            - np.log(np.diagonal(L)).sum()
            - (df + d) / 2.0 * np.log1p(maha / df)
        )
        return out

    @_checked(log_density=False)
    def output_predictive(
        self, cluster: ArrayLike, x: ArrayLike, *, noise: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        r"""Mean and variance of the Gaussian-process predictive of outputs at new inputs.

        .. math::
            \mathbb{E}[y_*] = m + \mathbf{k}_*^\top \mathbf{K}^{-1}(y - m\mathbf{1}),\qquad
            \mathrm{Var}[y_*] = s^2 - \mathbf{k}_*^\top \mathbf{K}^{-1} \mathbf{k}_*
                                + \sigma^2,

        the density :math:`p(y_* \mid x_*, D)`, which equals :math:`\mathcal{N}(y \cup
        \{y_*\}) / \mathcal{N}(y)` of the cluster with and without the new pair.

        Parameters
        ----------
        cluster : array_like of shape (n_rows, n_inputs + 1)
            The cluster's (input, output) rows.
        x : array_like of shape (n_queries, n_inputs), or (n_queries,) for one input
        noise : bool, default=True
            Include the noise variance :math:`\sigma^2` (the predictive of an observation);
            ``False`` gives the variance of the latent function.

        Returns
        -------
        mean, var : ndarray of shape (n_queries,)
        """
        D = _check_rows(cluster, "cluster")
        d = D.shape[1] - 1
        mean, var = self._gp_predict(D[:, :d], D[:, d], _check_queries(x, d), self._prior(d))
        return mean, var + self.noise_variance if noise else var

    def posterior_mean(self, cluster: ArrayLike, x: ArrayLike) -> np.ndarray:
        r"""Posterior mean function of the cluster's Gaussian process at the inputs ``x``.

        The solid curves of BRT Figure 1.9: pass ``X[tree.leaves(node)]`` as ``cluster``
        for the expert of a tree node.

        Parameters
        ----------
        cluster : array_like of shape (n_rows, n_inputs + 1)
            The cluster's (input, output) rows.
        x : array_like of shape (n_queries, n_inputs), or (n_queries,) for one input

        Returns
        -------
        ndarray of shape (n_queries,)
        """
        return self.output_predictive(cluster, x)[0]

    def _gp_predict(
        self, xd: np.ndarray, y: np.ndarray, xq: np.ndarray, prior: _Prior
    ) -> tuple[np.ndarray, np.ndarray]:
        """Latent mean and variance (without noise) at ``xq`` given the cluster."""
        n = xd.shape[0]
        K = self._gram(xd, xd, prior)
        K.ravel()[:: n + 1] += self.noise_variance
        L = _cholesky(K, overwrite=True)
        alpha = _solve_lower(L, _solve_lower(L, y - self.mean), transpose=True)
        Ks = self._gram(xq, xd, prior)
        mean = self.mean + Ks @ alpha
        V = _solve_lower(L, Ks.T)
        var = np.maximum(self.signal_variance - np.einsum("ij,ij->j", V, V), 0.0)
        return mean, var

    # ------------------------------------------------------------------ tree predictions
    @_checked(log_density=True)
    def predictive_density(
        self, tree: Any, X_train: ArrayLike, x: ArrayLike, y: ArrayLike
    ) -> np.ndarray:
        r"""Log conditional predictive density :math:`\ln p(y \mid x, \mathcal{D}, T)`.

        The rose tree's predictive mixture (BRT eq 1.25) over every node *S*, conditioned
        on the input:

        .. math::
            p(y \mid x, \mathcal{D}, T) =
            \frac{\sum_S w_S\, p(x \mid D_S)\, p(y \mid x, D_S)}{\sum_S w_S\, p(x \mid D_S)}

        with :math:`w_S` = ``exp(tree.log_cluster_weights())``, :math:`p(x \mid D_S)` the
        Student-t of :meth:`input_log_predictive` and :math:`p(y \mid x, D_S)` the Gaussian
        of :meth:`output_predictive` (noise included). Computed in log space.

        Parameters
        ----------
        tree : RoseTree
            A tree fitted with this model to ``X_train`` (e.g. ``est.tree_``).
        X_train : array_like of shape (n_samples, n_inputs + 1)
            The rows the tree was fitted to, in the same order.
        x : array_like of shape (n_queries, n_inputs), or (n_queries,) for one input
            Query inputs. Repeated inputs are computed once, so a grid can be passed as
            the flattened ``meshgrid``.
        y : array_like of shape (n_queries,)
            Query outputs, paired with ``x``.

        Returns
        -------
        ndarray of shape (n_queries,)
            :math:`\ln p(y_q \mid x_q, \mathcal{D}, T)` for every query pair.

        Raises
        ------
        InvalidParameterError
            If ``X_train`` does not have one row per leaf of ``tree``, or ``x`` and ``y``
            differ in length.
        InvalidDataError
            For non-finite or wrongly shaped inputs.
        """
        X = _check_rows(X_train, "X_train", min_rows=1)
        if getattr(tree, "n_leaves", None) != X.shape[0]:
            raise InvalidParameterError(
                f"X_train has {X.shape[0]} rows, but the tree has "
                f"{getattr(tree, 'n_leaves', '?')} leaves; pass the rows it was fitted to",
                "X_train",
            )
        d = X.shape[1] - 1
        xq = _check_queries(x, d)
        yq = _check_queries(np.reshape(np.asarray(y, dtype=object), (-1, 1)), 1, "y")[:, 0]
        if yq.shape[0] != xq.shape[0]:
            raise InvalidParameterError(
                f"x has {xq.shape[0]} query points but y has {yq.shape[0]}", "y"
            )
        if not np.isfinite(yq).all():
            raise InvalidDataError("y must be finite", row=int(np.argmin(np.isfinite(yq))))
        prior = self._prior(d)
        ux, inverse = np.unique(xq, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        log_w = np.asarray(tree.log_cluster_weights())
        num = np.full(yq.shape[0], -np.inf)
        den = np.full(ux.shape[0], -np.inf)
        for node in np.flatnonzero(np.isfinite(log_w)):
            rows = X[tree.leaves(int(node))]
            a = log_w[node] + self._input_log_predictive(rows[:, :d], ux, prior)
            mean, var = self._gp_predict(rows[:, :d], rows[:, d], ux, prior)
            var_q = var[inverse] + self.noise_variance
            log_py = -0.5 * (_LN_2PI + np.log(var_q) + (yq - mean[inverse]) ** 2 / var_q)
            den = np.logaddexp(den, a)
            num = np.logaddexp(num, a[inverse] + log_py)
        return cast("np.ndarray", num - den[inverse])

    # ------------------------------------------------------------------ kernel fitting
    def fit_kernel(self, X: ArrayLike, *, bounds: tuple[float, float] = (1e-6, 1e6)) -> GPExperts:
        r"""A copy whose kernel maximises the Gaussian-process marginal likelihood of ``X``.

        Maximises :math:`\ln \mathcal{N}(y \mid m\mathbf{1}, \mathbf{K})` of all rows taken
        as one cluster (type-II maximum likelihood) over :math:`\ln s^2`, :math:`\ln \ell`
        (one per input if ``lengthscale`` is a vector) and :math:`\ln \sigma^2`, by L-BFGS-B
        with analytic gradients, starting from the current values. It finds a local optimum,
        which can lie on a bound: data that no smooth function explains (several curves, say)
        are best described as white noise, with the lengthscale at its lower bound. The input
        prior and ``mean`` are kept.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_inputs + 1)
        bounds : (float, float), default=(1e-6, 1e6)
            Bounds applied to every hyperparameter.

        Returns
        -------
        GPExperts
        """
        from scipy import optimize
        from scipy.linalg import cho_solve, cholesky

        X = _check_rows(X, "X", min_rows=2)
        d = X.shape[1] - 1
        prior = self._prior(d)
        try:
            lo, hi = (check_positive(float(b), "bounds") for b in bounds)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, InvalidParameterError):
                raise
            raise InvalidParameterError(
                f"bounds must be two positive numbers (low, high), got {bounds!r}", "bounds"
            ) from None
        if not lo < hi:
            raise InvalidParameterError(f"bounds must be increasing, got {bounds!r}", "bounds")
        x, r = X[:, :d], X[:, d] - self.mean
        n = x.shape[0]
        ard = np.ndim(self.lengthscale) == 1
        diff2 = np.square(x[:, None, :] - x[None, :, :])  # (n, n, d)

        def unpack(theta: np.ndarray) -> tuple[float, np.ndarray, float]:
            ls = np.exp(theta[1:-1]) if ard else np.full(d, math.exp(theta[1]))
            return math.exp(theta[0]), ls, math.exp(theta[-1])

        def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
            s2, ls, noise = unpack(theta)
            scaled = diff2 / ls**2  # (n, n, d)
            Kf = s2 * np.exp(-0.5 * scaled.sum(axis=2))
            K = Kf + noise * np.eye(n)
            try:
                L = cholesky(K, lower=True, check_finite=False)
            except np.linalg.LinAlgError:
                return math.inf, np.zeros_like(theta)
            alpha = cho_solve((L, True), r, check_finite=False)
            value = -0.5 * r @ alpha - np.log(np.diagonal(L)).sum() - n / 2.0 * _LN_2PI
            # d ln N / dθ = ½ tr((ααᵀ − K⁻¹) dK/dθ)
            W = np.outer(alpha, alpha) - cho_solve((L, True), np.eye(n), check_finite=False)
            grads = [0.5 * np.sum(W * Kf)]
            if ard:
                grads += [0.5 * np.sum(W * Kf * scaled[:, :, k]) for k in range(d)]
            else:
                grads.append(0.5 * np.sum(W * Kf * scaled.sum(axis=2)))
            grads.append(0.5 * noise * np.trace(W))
            return -float(value), -np.asarray(grads)

        ls0 = 1.0 / prior.inv_lengthscale
        theta0 = np.log([self.signal_variance, *(ls0 if ard else ls0[:1]), self.noise_variance])
        theta0 = np.clip(theta0, math.log(lo), math.log(hi))
        res = optimize.minimize(
            objective,
            theta0,
            jac=True,
            method="L-BFGS-B",
            bounds=[(math.log(lo), math.log(hi))] * theta0.size,
        )
        if not np.isfinite(res.fun):
            raise NumericalError(f"kernel optimisation failed: {res.message}")
        s2, ls, noise = unpack(res.x)
        return replace(
            self,
            signal_variance=s2,
            lengthscale=ls if ard else float(ls[0]),
            noise_variance=noise,
        )


def _cholesky(a: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """Lower Cholesky factor of a symmetric positive definite matrix (LAPACK ``dpotrf``).

    Only the lower triangle of the result is meaningful. With ``overwrite`` the C-ordered
    ``a`` is factorised in place: it is symmetric, so its transpose is the same matrix in
    the Fortran order LAPACK wants.

    Raises
    ------
    NumericalError
        If ``a`` is not numerically positive definite.
    """
    dpotrf, _ = _lapack()
    L, info = dpotrf(a.T, lower=1, clean=0, overwrite_a=int(overwrite))
    if info != 0:
        raise NumericalError(
            f"a {a.shape[0]} x {a.shape[0]} covariance matrix is not numerically positive "
            f"definite (LAPACK dpotrf info={info}); for the Gram matrix of a cluster, "
            "increase noise_variance"
        )
    return cast("np.ndarray", L)


def _solve_lower(L: np.ndarray, b: np.ndarray, *, transpose: bool = False) -> np.ndarray:
    """``L⁻¹ b`` (or ``L⁻ᵀ b``) for the lower factor of :func:`_cholesky` (LAPACK ``dtrtrs``)."""
    _, dtrtrs = _lapack()
    out, info = dtrtrs(L, b, lower=1, trans=int(transpose))
    if info != 0:  # pragma: no cover - the factor of a positive definite matrix
        raise NumericalError(f"triangular solve failed (LAPACK dtrtrs info={info})")
    return cast("np.ndarray", out)


def _ln_det_spd(a: np.ndarray) -> float | None:
    """``ln |a|`` of a symmetric positive definite matrix, or None if it is not one."""
    try:
        L = _cholesky(a)
    except NumericalError:
        return None
    return float(2.0 * np.log(np.diagonal(L)).sum())


def _check_rows(X: Any, name: str, min_rows: int = 1) -> np.ndarray:
    """``X`` as a finite 2-D float64 array of (input, output) rows."""
    if not (
        type(X) is np.ndarray and X.dtype == np.float64 and X.ndim == 2 and np.isfinite(X).all()
    ):
        X = check_array(X, allow_nan=False, min_rows=min_rows, name=name)
    if X.shape[0] < min_rows:
        raise InvalidDataError(f"{name} needs at least {min_rows} rows, got {X.shape[0]}")
    if X.shape[1] < 2:
        raise InvalidDataError(
            f"{name} needs at least two columns (inputs, then the output in the last "
            f"column), got {X.shape[1]}; stack them with np.column_stack([x, y])"
        )
    return cast("np.ndarray", X)


def _check_queries(x: Any, d: int, name: str = "x") -> np.ndarray:
    """Query inputs as a finite (n_queries, d) array; 1-D is accepted when ``d == 1``."""
    arr = real_array(x, name, data=True)
    if arr.ndim <= 1 and d == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[1] != d:
        raise InvalidDataError(
            f"{name} must have shape (n_queries, {d}) for {d} input columns, got shape {arr.shape}"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise InvalidDataError(
            f"{name} has a non-finite value in row {row}, column {col}", row, col
        )
    return np.ascontiguousarray(arr)
