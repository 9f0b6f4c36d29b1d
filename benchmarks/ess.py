"""Effective sample size of a scalar Markov chain trace.

Geyer's (1992) initial monotone sequence estimator, the standard one in MCMC practice
(Stan's and ArviZ's ``ess`` build on it): the autocorrelations ``ρ_k`` from the FFT of the
centred trace, summed in pairs ``Γ_m = ρ_{2m} + ρ_{2m+1}`` up to the first pair that is not
positive, each pair capped at the one before (the sequence of a reversible chain is
positive and decreasing), ``τ = −1 + 2 Σ Γ_m`` and ``ESS = n / τ``. Checked against the
AR(1) closed form ``ESS = n (1 − φ)/(1 + φ)`` in ``tests/test_bench_ess.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def autocorrelation(x: Any) -> np.ndarray:
    """Autocorrelations ``ρ_0 = 1, ρ_1, …, ρ_{n−1}`` of a trace (biased estimator, FFT)."""
    x = np.asarray(x, dtype=float)
    n = x.size
    centred = x - x.mean()
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(centred, size)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), size)[:n] / n
    if acov[0] <= 0.0:
        return np.r_[1.0, np.zeros(n - 1)]
    return acov / acov[0]


def integrated_time(x: Any) -> float:
    """The integrated autocorrelation time ``τ`` (1 for independent draws)."""
    rho = autocorrelation(x)
    n = rho.size
    pairs = rho[: n - n % 2].reshape(-1, 2).sum(axis=1)
    total, previous = 0.0, np.inf
    for gamma in pairs:
        if gamma <= 0.0:
            break
        gamma = min(gamma, previous)
        total += gamma
        previous = gamma
    return max(-1.0 + 2.0 * total, 1.0 / np.log10(max(n, 10)))


def ess(x: Any) -> float:
    """Effective sample size ``n / τ`` of a trace of ``n`` draws (``0`` for a constant trace).

    Parameters
    ----------
    x : array-like of shape (n,)
        The trace, in chain order.

    Returns
    -------
    float
    """
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or x.size < 4:
        raise ValueError("ess needs a 1-d trace of at least 4 draws")
    if np.ptp(x) == 0.0:
        return 0.0
    return float(x.size / integrated_time(x))
