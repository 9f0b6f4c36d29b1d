"""The probit likelihood of the Pitman–Yor diffusion tree through ``rosetree._core``:
expectation propagation's evidence against SciPy's bivariate normal orthant probability,
and the MCMC chain on binary data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rosetree import _core
from scipy import stats

PRIORS = {"alpha": (2.0, 0.5), "beta": (1.0, 1.0), "c": (1.0, 1.0), "precision": (1.0, 1.0)}


def two_leaves(t):
    return _core.Tree(2, [[0, 1]], [1.0, 1.0, t])


def orthant(signs, t):
    """P(sign(z) = signs) for z ~ N(0, [[1, t], [t, 1]]) by SciPy's normal CDF."""
    s = np.asarray(signs, dtype=float)
    cov = np.array([[1.0, t], [t, 1.0]]) * np.outer(s, s)
    # P(s_i z_i > 0 for all i) = P(-s_i z_i < 0) = CDF at 0 of N(0, S C S).
    return stats.multivariate_normal(mean=np.zeros(2), cov=cov).cdf(np.zeros(2))


@pytest.mark.parametrize("t", [0.05, 0.3, 0.6])
def test_ep_log_marginal_is_close_to_the_orthant_probability(t):
    x = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    means, precisions, log_marginal = _core.pydt_probit_ep(x, two_leaves(t))
    assert means.shape == precisions.shape == x.shape
    assert np.all(precisions > 0)
    exact = sum(math.log(orthant([1 if v else -1 for v in x[:, j]], t)) for j in range(x.shape[1]))
    # Also Sheppard's closed form, 1/4 + asin(±t)/(2π), for the SciPy value.
    closed = sum(
        math.log(0.25 + math.asin(t if x[0, j] == x[1, j] else -t) / (2 * math.pi))
        for j in range(3)
    )
    assert exact == pytest.approx(closed, abs=1e-6)
    # EP is not exact for correlated points: off by a few thousandths of a nat per column
    # for t ≤ 0.6.
    assert log_marginal == pytest.approx(exact, abs=0.03)
    # sigma2 rescales the sites, not the evidence.
    m2, p2, lm2 = _core.pydt_probit_ep(x, two_leaves(t), sigma2=4.0)
    assert lm2 == pytest.approx(log_marginal, abs=1e-10)
    np.testing.assert_allclose(m2, 2.0 * means, rtol=1e-8)
    np.testing.assert_allclose(p2, precisions / 4.0, rtol=1e-8)


def test_ep_with_missing_entries_and_bad_input():
    x = np.array([[1.0], [np.nan]])
    means, precisions, log_marginal = _core.pydt_probit_ep(x, two_leaves(0.7))
    assert log_marginal == pytest.approx(math.log(0.5), abs=1e-12)
    assert precisions[1, 0] == 0.0 and means[1, 0] == 0.0
    with pytest.raises(ValueError, match=r"row 1.*column 0"):
        _core.pydt_probit_ep(np.array([[1.0], [2.0]]), two_leaves(0.7))
    with pytest.raises(ValueError, match="max_iter"):
        _core.pydt_probit_ep(x, two_leaves(0.7), max_iter=0)


def mcmc(x, **kwargs):
    settings = dict(
        alpha=0.5,
        beta=0.2,
        c=1.0,
        sigma2=1.0,
        n_iter=40,
        burn_in=10,
        thin=5,
        learn=["c"],
        priors=PRIORS,
        seed=3,
        verbose=False,
    )
    settings.update(kwargs)
    params = _core.PydtParams(**{k: settings.pop(k) for k in ("alpha", "beta", "c", "sigma2")})
    seed, verbose = settings.pop("seed"), settings.pop("verbose")
    chain = _core.PydtMcmcParams(**settings)
    return _core.pydt_mcmc(x, None, params, chain, seed=seed, verbose=verbose)


def test_the_probit_chain_runs_and_is_reproducible():
    rng = np.random.default_rng(0)
    x = (rng.random((8, 5)) < 0.5).astype(float)
    x[2, 3] = np.nan
    samples, trace, _, proposals, accepted = mcmc(x, likelihood="probit")
    assert len(samples) == 6
    assert proposals == 40 * 8 and 0 < accepted < proposals
    assert trace.shape == (40, 7)
    assert np.all(trace[:, 5] == 1.0)  # sigma2 stays fixed
    assert np.all(np.isfinite(trace))
    again = mcmc(x, likelihood="probit")
    np.testing.assert_array_equal(trace, again[1])
    # The default is the Gaussian likelihood, as before.
    gaussian = mcmc(x[:, :3] * 0 + rng.normal(size=(8, 3)))
    assert gaussian[1].shape == (40, 7)
    with pytest.raises(ValueError, match="sigma2"):
        mcmc(x, likelihood="probit", learn=["sigma2"])
    with pytest.raises(ValueError, match="likelihood"):
        mcmc(x, likelihood="logit")
    bad = x.copy()
    bad[0, 1] = 0.5
    with pytest.raises(ValueError, match=r"row 0.*column 1"):
        mcmc(bad, likelihood="probit")
