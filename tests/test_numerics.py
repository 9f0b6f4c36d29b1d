"""Log marginals and predictives of the discrete models at extreme scales, against mpmath.

The references are computed here with mpmath at 60 digits more than the span of the inputs
(so that sums like ``10³⁰⁰ + 10⁻³⁰⁰`` are exact; ``mpf(x)`` of a double is exact), raised until
two evaluations agree to 30 digits.

Log marginals are compared with ``|got − want| ≤ tol · max(1, |want|)``: relative for
``|ln f| ≥ 1`` and absolute below, which bounds the relative error of ``f`` itself.
"""

import itertools

import numpy as np
import pytest
import rosetree as rt

mp = pytest.importorskip("mpmath")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TOL = 1e-13


def converged(f, *inputs):
    """``f()`` at increasing precision until two evaluations agree to 30 digits, starting
    at 60 digits more than the decimal span of the nonzero ``inputs``."""
    sizes = [abs(float(v)) for v in np.ravel(inputs) if v != 0]
    digits = 60 + int(np.log10(max(sizes)) - np.log10(min(sizes))) if sizes else 60
    while True:
        with mp.workdps(digits):
            a = f()
        with mp.workdps(2 * digits):
            b = f()
        if (b == 0 and digits >= 1200) or (b != 0 and abs(a - b) <= abs(b) * mp.mpf(10) ** -30):
            return float(b)
        digits *= 2


def ln_beta_ratio(a, b, k, m):
    """``ln B(a + k, b + m) − ln B(a, b)`` in mpmath."""
    a, b = mp.mpf(a), mp.mpf(b)
    return (
        mp.loggamma(a + k)
        + mp.loggamma(b + m)
        - mp.loggamma(a + b + k + m)
        - mp.loggamma(a)
        - mp.loggamma(b)
        + mp.loggamma(a + b)
    )


def bernoulli_reference(X, alpha, beta):
    """Beta–Bernoulli ``ln f`` of the rows of ``X`` (BRT eq 1.19), with NaN as missing."""
    observed = ~np.isnan(X)
    ones = np.nansum(X, axis=0)
    zeros = observed.sum(axis=0) - ones
    return converged(
        lambda: mp.fsum(
            ln_beta_ratio(a, b, int(k), int(m))
            for a, b, k, m in zip(alpha, beta, ones, zeros, strict=True)
        ),
        alpha,
        beta,
        ones,
        zeros,
    )


def dirichlet_reference(counts, alpha):
    """Dirichlet–multinomial ``ln f`` (Pólya urn, no multinomial coefficient) of totals."""

    def f():
        al = [mp.mpf(a) for a in alpha]
        c = [mp.mpf(int(v)) for v in counts]
        total_alpha, total = mp.fsum(al), mp.fsum(c)
        return (
            mp.loggamma(total_alpha)
            - mp.loggamma(total_alpha + total)
            + mp.fsum(mp.loggamma(a + v) - mp.loggamma(a) for a, v in zip(al, c, strict=True))
        )

    return converged(f, alpha, counts)


def assert_log_close(got, want, tol=TOL):
    assert abs(got - want) <= tol * max(1.0, abs(want)), (got, want)


SCALES = [1e-300, 1e-8, 0.5, 1.0, 7.5, 1e4, 1e15, 1e300]


def test_reported_case_huge_beta_bernoulli_prior():
    # 3 rows of 2 binary features under a prior pinned at 1/2: every entry has probability
    # 1/2, so ln f = 6 ln(1/2) up to O(1e-15).
    X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    got = rt.BetaBernoulli(alpha=1e15, beta=1e15).log_marginal(X)
    assert got == pytest.approx(6 * np.log(0.5), rel=1e-14)
    assert got == pytest.approx(bernoulli_reference(X, [1e15] * 2, [1e15] * 2), rel=TOL)
    # Also what a fit reports for the root of a one-cluster-dominated tree.
    tree = rt.BayesianRoseTree(model=rt.BetaBernoulli(alpha=1e15, beta=1e15)).fit(X).tree_
    assert tree.log_f[tree.root] == pytest.approx(6 * np.log(0.5), rel=1e-13)


@pytest.mark.parametrize(("alpha", "beta"), list(itertools.product(SCALES, SCALES)))
def test_beta_bernoulli_log_marginal_at_every_scale(alpha, beta):
    r = np.random.default_rng(7)
    X = (r.random((40, 5)) < [0.0, 0.1, 0.5, 0.9, 1.0]).astype(float)
    X[3, 2] = X[17, 4] = np.nan
    got = rt.BetaBernoulli(alpha=alpha, beta=beta).log_marginal(X)
    assert_log_close(got, bernoulli_reference(X, [alpha] * 5, [beta] * 5))


@pytest.mark.parametrize("alpha", SCALES)
def test_dirichlet_multinomial_log_marginal_at_every_scale(alpha):
    for X in (
        np.array([[3.0, 0.0, 2.0, 1.0], [1.0, 1.0, 0.0, 0.0]]),
        np.array([[4e14, 0.0, 3.0, 1e15], [6e14, 1.0, 0.0, 2e14 + 1.0]]),
    ):
        got = rt.DirichletMultinomial(alpha=alpha).log_marginal(X)
        assert_log_close(got, dirichlet_reference(X.sum(axis=0), [alpha] * 4))


def test_dirichlet_multinomial_mixed_concentrations():
    alpha = [1e300, 1e-300, 2.5, 1e15]
    X = np.array([[5.0, 1.0, 4e14, 0.0], [0.0, 2.0, 6e14, 9.0]])
    got = rt.DirichletMultinomial(alpha=alpha).log_marginal(X)
    assert_log_close(got, dirichlet_reference(X.sum(axis=0), alpha))


@settings(max_examples=40, deadline=None)
@given(
    log_alpha=st.floats(-300, 300),
    log_beta=st.floats(-300, 300),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 30),
)
def test_beta_bernoulli_property(log_alpha, log_beta, seed, n):
    alpha, beta = 10.0**log_alpha, 10.0**log_beta
    X = (np.random.default_rng(seed).random((n, 3)) < 0.5).astype(float)
    got = rt.BetaBernoulli(alpha=alpha, beta=beta).log_marginal(X)
    assert_log_close(got, bernoulli_reference(X, [alpha] * 3, [beta] * 3))


@settings(max_examples=40, deadline=None)
@given(
    log_alpha=st.lists(st.floats(-300, 300), min_size=3, max_size=3),
    log_counts=st.lists(st.floats(0, 15), min_size=3, max_size=3),
)
def test_dirichlet_multinomial_property(log_alpha, log_counts):
    alpha = [10.0**e for e in log_alpha]
    counts = np.floor([10.0**e for e in log_counts])
    got = rt.DirichletMultinomial(alpha=alpha).log_marginal(counts[None, :])
    assert_log_close(got, dirichlet_reference(counts, alpha))


def test_dirichlet_multinomial_predictive_sums_to_one_with_huge_counts():
    X = np.array([[3, 0, 1], [2, 1, 0], [0, 4, 1], [0, 3, 2], [1, 1, 1]], dtype=float)
    X = X * 2.5e14 + X  # column totals above 1e14
    model = rt.DirichletMultinomial(alpha=[0.7, 1.0, 1.6], multinomial_coefficient=True)
    est = rt.BayesianRoseTree(model=model, mixing="dp").fit(X)
    rows = np.array([c for c in itertools.product(range(5), repeat=3) if sum(c) == 4], dtype=float)
    log_p = est.score_samples(rows)
    assert np.logaddexp.reduce(log_p) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("alpha", "beta"), [(1e15, 1e15), (1e15, 3.0), (1e-300, 1e300)])
def test_beta_bernoulli_predictive_sums_to_one_with_huge_priors(alpha, beta):
    X = (np.random.default_rng(3).random((12, 4)) < 0.5).astype(float)
    est = rt.BayesianRoseTree(model=rt.BetaBernoulli(alpha=alpha, beta=beta)).fit(X)
    rows = np.array(list(itertools.product([0.0, 1.0], repeat=4)))
    assert np.logaddexp.reduce(est.score_samples(rows)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (rt.BetaBernoulli(alpha=1.7e308, beta=1.7e308), "alpha"),
        (rt.DirichletMultinomial(alpha=1e308), "alpha"),
    ],
)
def test_overflowing_hyperparameters_are_rejected_by_name(model, name):
    X = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    with pytest.raises(rt.InvalidParameterError, match=f"`{name}`.*overflows"):
        model.log_marginal(X)
    with pytest.raises(rt.InvalidParameterError, match="overflows"):
        rt.BayesianRoseTree(model=model).fit(X)


def test_largest_finite_hyperparameters_give_correct_values():
    X = np.array([[1.0], [1.0], [0.0]])
    got = rt.BetaBernoulli(alpha=1.7e308, beta=1.0).log_marginal(X)
    assert np.isfinite(got)
    assert_log_close(got, bernoulli_reference(X, [1.7e308], [1.0]))
    got = rt.DirichletMultinomial(alpha=[1.7e308, 1.0]).log_marginal(np.array([[0.0, 3.0]]))
    assert_log_close(got, dirichlet_reference([0, 3], [1.7e308, 1.0]))


@pytest.mark.parametrize(("alpha", "beta"), [(1e300, 1e-300), (1e-300, 1e-300), (1e-300, 1e300)])
def test_greedy_search_keeps_pseudo_counts_far_below_the_counts(alpha, beta):
    # Greedy merge scores once lost a beta of 1e-300 next to the counts (NaN, an error).
    X = np.array([[0, 1], [1, 0], [1, 1.0]])
    model = rt.BetaBernoulli(alpha=alpha, beta=beta)
    fitted = rt.BayesianRoseTree(model=model).fit(X)
    assert fitted.log_evidence_ == pytest.approx(rt.optimal_tree(X, model=model).log_evidence)
