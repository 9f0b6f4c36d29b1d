r"""Hyperparameters of Kingman's coalescent given a tree (Teh, Daumé & Roy 2007, §4.4).

**Brownian diffusion.** Given a timed tree the data enter :math:`\Lambda`'s posterior only
through the independent contrasts (``_core.coalescent_contrasts``): ``m`` contrasts
:math:`u_i` with weights :math:`w_i` and their scatter :math:`S = \sum_i u_i u_i^T / w_i`,
with :math:`\ln p(x \mid \pi, \Lambda) = c - \frac{m}{2}\ln|\Lambda|
- \frac12 \mathrm{tr}(\Lambda^{-1}S)`.
The conjugate prior for each shape of :math:`\Lambda`, with ``nu`` counting pseudo-contrasts:

- full :math:`\Lambda`: inverse-Wishart :math:`IW(\nu, \Psi)`, density
  :math:`\propto |\Lambda|^{-(\nu+d+1)/2} e^{-\mathrm{tr}(\Psi\Lambda^{-1})/2}`; the posterior
  is :math:`IW(\nu + m, \Psi + S)` with mode :math:`(\Psi + S)/(\nu + m + d + 1)`;
- diagonal :math:`\Lambda`: independent one-dimensional inverse-Wisharts,
  :math:`\lambda_j \sim IW_1(\nu, \psi_j) = \mathrm{InvGamma}(\nu/2, \psi_j/2)`; mode
  :math:`(\psi_j + S_{jj})/(\nu + m + 2)`;
- :math:`\Lambda = \lambda I`: the ``d`` coordinates pool, :math:`\lambda \sim
  \mathrm{InvGamma}(d\nu/2, \psi/2)`; mode :math:`(\psi + \mathrm{tr}\,S)/(d(\nu + m) + 2)`.

The default prior is proper, weak, and has its mode at the ``Lambda`` the user gave,
:math:`\Lambda_0`: ``nu = d + 1`` and :math:`\Psi = (2d + 2)\Lambda_0` for a full matrix,
``nu = 2`` and :math:`\psi = 4\lambda_{0j}` per feature for a diagonal, ``nu = 2`` and
:math:`\psi = (2d + 2)\lambda_0` for a scalar. The MAP is then a weighted mean of the
contrasts' scatter and :math:`\Lambda_0`, e.g. :math:`(S + (2d+2)\Lambda_0)/(m + 2d + 2)` for
a full matrix.

**Multinomial mutation.** Given the tree the features are independent; each rate
:math:`\lambda_j` (or one rate shared by all features, if ``Lambda`` is a number) has a
:math:`\mathrm{Gamma}(a, b)` prior (shape ``a``, rate ``b``; default ``a = 2``,
``b = 1/\lambda_0``, so the mode is the given rate) and is set to the maximiser of
:math:`\ln p(x_j \mid \pi, \lambda_j) + \ln p(\lambda_j)` by golden-section search on
:math:`\ln\lambda_j` in the core (``rosetree::coalescent::hyper::rate_map``: features in
parallel, one upward pass per feature and trial); a feature keeps its current rate where the
search finds nothing better, so the objective never decreases.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from scipy import stats

from . import _core
from ._validation import is_real
from .exceptions import InvalidParameterError


def _bad(reason: str) -> InvalidParameterError:
    return InvalidParameterError(f"Lambda_prior {reason}", "Lambda_prior")


def brownian_prior(prior: Any, lam: np.ndarray, d: int) -> tuple[float, np.ndarray]:
    """``(nu, Psi)`` for ``Lambda`` shaped like ``lam`` in ``d`` dimensions, checked.

    ``lam`` is 0-, 1- or 2-D; ``prior=None`` gives the default (module docs).
    """
    if prior is None:
        if lam.ndim == 2:
            return d + 1.0, (2.0 * d + 2.0) * lam
        return 2.0, (4.0 * lam if lam.ndim == 1 else (2.0 * d + 2.0) * lam)
    nu, psi = _pair(prior, "(nu, Psi)")
    psi = np.asarray(psi, dtype=np.float64)
    if psi.shape != lam.shape:
        raise _bad(f"Psi must have the shape of Lambda {lam.shape}, got {psi.shape}")
    if not np.all(np.isfinite(psi)):
        raise _bad("Psi must be finite")
    if lam.ndim == 2:
        if not nu > d - 1:
            raise _bad(f"nu must be > d - 1 = {d - 1} for a full Lambda, got {nu}")
        if not np.allclose(psi, psi.T, rtol=1e-10, atol=0.0):
            raise _bad("Psi must be symmetric")
        if np.linalg.eigvalsh(psi).min() <= 0:
            raise _bad("Psi must be positive definite")
    else:
        if not nu > 0:
            raise _bad(f"nu must be > 0, got {nu}")
        if np.any(psi <= 0):
            raise _bad("Psi must be > 0")
    return nu, psi


def _pair(prior: Any, what: str) -> tuple[float, Any]:
    try:
        a, b = prior
    except (TypeError, ValueError):
        raise _bad(f"must be a pair {what}, got {prior!r}") from None
    if not is_real(a):
        raise _bad(f"must be a pair {what} with a number first, got {a!r}")
    if not np.isfinite(a):
        raise _bad(f"must be a pair {what} with a finite number first, got {a!r}")
    return float(a), b


def brownian_map(
    scatter: np.ndarray, m: int, lam: np.ndarray, nu: float, psi: np.ndarray
) -> np.ndarray:
    """The posterior mode of ``Lambda`` (the shape of ``lam``) given the contrasts."""
    d = scatter.shape[0]
    if lam.ndim == 2:
        out = (psi + scatter) / (nu + m + d + 1)
        return cast("np.ndarray", (out + out.T) / 2)
    if lam.ndim == 1:
        return (psi + np.diag(scatter)) / (nu + m + 2)
    return np.asarray((float(psi) + np.trace(scatter)) / (d * (nu + m) + 2))


def brownian_log_prior(lam: np.ndarray, nu: float, psi: np.ndarray, d: int) -> float:
    """The log density of ``Lambda`` under its prior (module docs)."""
    if lam.ndim == 2:
        return float(stats.invwishart.logpdf(lam, df=nu, scale=psi))
    if lam.ndim == 1:
        return float(stats.invgamma.logpdf(lam, nu / 2, scale=psi / 2).sum())
    return float(stats.invgamma.logpdf(float(lam), d * nu / 2, scale=float(psi) / 2))


def rate_prior(prior: Any, lam: np.ndarray) -> tuple[float, np.ndarray]:
    """``(a, b)`` of the Gamma prior on the mutation rates, checked (``b`` broadcast)."""
    if prior is None:
        return 2.0, 1.0 / lam
    a, b = _pair(prior, "(shape, rate)")
    b = np.asarray(b, dtype=np.float64)
    if b.ndim > lam.ndim or (b.ndim == 1 and b.shape != lam.shape):
        raise _bad(f"rate must be a number or have the shape of Lambda {lam.shape}")
    if not a > 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise _bad(f"needs shape > 0 and finite rates > 0, got {prior!r}")
    return a, np.broadcast_to(b, lam.shape).copy()


def rate_log_prior(lam: np.ndarray, a: float, b: np.ndarray) -> float:
    """The log density of the rates under their Gamma priors."""
    return float(stats.gamma.logpdf(lam, a, scale=1.0 / b).sum())


def rate_map(
    X: np.ndarray, structure: Any, lam: np.ndarray, a: float, b: np.ndarray, n_jobs: int | None
) -> np.ndarray:
    """The rates' posterior mode given the tree (``rosetree::coalescent::hyper::rate_map``).

    Per feature, or for one shared rate (``lam`` a number) the summed log likelihood, plus
    the log prior; a golden-section search on the log rate in the core.
    """
    d = X.shape[1]
    shared = lam.ndim == 0
    out = np.asarray(
        _core.coalescent_rate_map(
            X,
            structure,
            rates=np.broadcast_to(lam, (d,)).astype(np.float64),
            shared=shared,
            prior_shape=float(a),
            prior_rates=np.broadcast_to(b, (d,)).astype(np.float64).tolist(),
            n_jobs=n_jobs,
        )
    )
    return np.asarray(out[0]) if shared else out
