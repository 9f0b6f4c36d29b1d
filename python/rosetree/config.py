"""Cluster-model configuration: frozen values that describe a conjugate prior.

They hold hyperparameters only; the Rust core validates them when a model is fitted, and the
error names the hyperparameter at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .exceptions import InvalidParameterError

__all__ = [
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

    def _spec(self) -> dict[str, Any]:
        if type(self).log_marginal is ClusterModel.log_marginal:
            raise TypeError(
                f"{type(self).__name__} must implement log_marginal(X) to be used as a "
                "cluster model"
            )
        return {"family": "callback", "object": self}

    def log_marginal(self, X: Any) -> float:
        r""":math:`\ln f(D)` (BRT eq 1.1) of all rows of ``X`` taken as one cluster.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)

        Returns
        -------
        float
        """
        from . import _core
        from ._validation import check_array

        return float(_core.log_marginal(check_array(X, min_rows=1), self._spec()))


@dataclass(frozen=True)
class BetaBernoulli(ClusterModel):
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

    def _spec(self) -> dict[str, Any]:
        return {
            "family": "bernoulli",
            "alpha": None if self.alpha is None else _vector("alpha", self.alpha),
            "beta": None if self.beta is None else _vector("beta", self.beta),
        }


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
        Degrees of freedom, ``nu0 > n_features - 1``. Default: ``n_features + 2``.
    psi0 : array_like of shape (n_features, n_features), optional
        Scale matrix, symmetric positive definite (the paper's Wishart scale *S* is
        ``inv(psi0)``). Default: ``(nu0 - n_features - 1)`` times the data covariance (with a
        small ridge), so that the prior mean of :math:`\Sigma` is the data covariance.

    Notes
    -----
    Missing values are not supported.
    """

    mu0: ArrayLike | None = None
    kappa0: float | None = None
    nu0: float | None = None
    psi0: ArrayLike | None = None

    def _spec(self) -> dict[str, Any]:
        psi0 = None
        if self.psi0 is not None:
            arr = np.asarray(self.psi0, dtype=np.float64)
            if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
                raise InvalidParameterError(
                    f"psi0 must be a square matrix, got shape {arr.shape}", "psi0"
                )
            psi0 = [float(v) for v in arr.ravel()]
        return {
            "family": "normal_inverse_wishart",
            "mu0": None if self.mu0 is None else _vector("mu0", self.mu0),
            "kappa0": _optional_scalar("kappa0", self.kappa0),
            "nu0": _optional_scalar("nu0", self.nu0),
            "psi0": psi0,
        }


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
        data; a column with fewer than two observed values takes the mean variance.

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

    def _spec(self) -> dict[str, Any]:
        return {
            "family": "normal_gamma",
            "m0": None if self.m0 is None else _vector("m0", self.m0),
            "kappa0": _optional_scalar("kappa0", self.kappa0),
            "a0": _optional_scalar("a0", self.a0),
            "b0": None if self.b0 is None else _vector("b0", self.b0),
        }


@dataclass(frozen=True)
class DirichletMultinomial(ClusterModel):
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

    def _spec(self) -> dict[str, Any]:
        return {
            "family": "dirichlet_multinomial",
            "alpha": _vector("alpha", self.alpha),
            "multinomial_coefficient": bool(self.multinomial_coefficient),
        }
