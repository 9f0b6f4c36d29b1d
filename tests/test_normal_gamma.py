"""rt.NormalGamma against independent computations: quadrature over (μ, λ), SciPy's Student t,
mpmath at 50 digits, finite differences of the evidence."""

import math

import mpmath
import numpy as np
import pytest
import rosetree as rt
from rosetree import _core
from scipy import integrate, sparse, special, stats


def rng(seed=0):
    return np.random.default_rng(seed)


def closed_form_mp(x, m0, kappa0, a0, b0):
    """ln f of one feature (Murphy 2007, eq 95) in 50-digit arithmetic."""
    mpmath.mp.dps = 50
    x = [mpmath.mpf(float(v)) for v in x]
    m0, kappa0, a0, b0 = (mpmath.mpf(float(v)) for v in (m0, kappa0, a0, b0))
    n = len(x)
    mean = sum(x) / n
    kn, an = kappa0 + n, a0 + mpmath.mpf(n) / 2
    bn = b0 + sum((v - mean) ** 2 for v in x) / 2 + kappa0 * n * (mean - m0) ** 2 / (2 * kn)
    return (
        mpmath.loggamma(an)
        - mpmath.loggamma(a0)
        + a0 * mpmath.log(b0)
        - an * mpmath.log(bn)
        + mpmath.log(kappa0 / kn) / 2
        - mpmath.mpf(n) / 2 * mpmath.log(2 * mpmath.pi)
    )


def student_t_chain(X, m0, kappa0, a0, b0):
    """Σ_t ln p(x_t | x_<t): SciPy Student-t predictives and one-row posterior updates,
    feature by feature, skipping NaN."""
    total = 0.0
    for j in range(X.shape[1]):
        mu, kappa, a, b = m0[j], kappa0, a0, b0[j]
        for v in X[:, j]:
            if np.isnan(v):
                continue
            total += stats.t.logpdf(
                v, df=2 * a, loc=mu, scale=np.sqrt(b * (kappa + 1) / (a * kappa))
            )
            b += kappa * (v - mu) ** 2 / (2 * (kappa + 1))
            mu = (kappa * mu + v) / (kappa + 1)
            kappa, a = kappa + 1, a + 0.5
    return total


@pytest.mark.parametrize(
    ("x", "m0", "kappa0", "a0", "b0"),
    [
        ([0.4, -0.3], 0.0, 1.0, 2.0, 1.5),
        ([1.2, 0.7, 2.1], 0.5, 0.3, 1.5, 0.8),
        ([-0.9, -1.4, 0.2], 1.0, 2.5, 3.0, 2.0),
    ],
)
def test_closed_form_matches_quadrature_over_mean_and_precision(x, m0, kappa0, a0, b0):
    x = np.asarray(x)
    log_2pi, log_gamma_prior = math.log(2 * math.pi), a0 * math.log(b0) - math.lgamma(a0)

    def integrand(mu, lam):
        # The three densities written out (math, not SciPy, for speed inside dblquad).
        log_lam = math.log(lam)
        log = sum(0.5 * (log_lam - log_2pi) - 0.5 * lam * (v - mu) ** 2 for v in x)
        log += 0.5 * (math.log(kappa0) + log_lam - log_2pi) - 0.5 * kappa0 * lam * (mu - m0) ** 2
        log += log_gamma_prior + (a0 - 1) * log_lam - b0 * lam
        return math.exp(log)

    # Inner: μ within 15 posterior standard deviations; outer: λ up to far in the tail.
    kn = kappa0 + len(x)
    centre = (kappa0 * m0 + x.sum()) / kn
    half = lambda lam: 15 / math.sqrt(kn * lam)  # noqa: E731
    value, _ = integrate.dblquad(
        integrand,
        0,
        60,
        lambda lam: centre - half(lam),
        lambda lam: centre + half(lam),
        epsabs=0,
        epsrel=1e-11,
    )
    model = rt.NormalGamma(m0=m0, kappa0=kappa0, a0=a0, b0=b0)
    assert model.log_marginal(x[:, None]) == pytest.approx(np.log(value), rel=1e-9, abs=1e-9)


def test_matches_chain_of_student_t_predictives_with_missing_entries():
    X = rng(1).normal(size=(8, 3)) * [1.0, 3.0, 0.5] + [0.0, 10.0, -2.0]
    X[2, 0] = X[5, 2] = X[6, 2] = np.nan
    m0, b0 = np.array([0.2, 9.0, -1.5]), np.array([0.7, 4.0, 0.3])
    model = rt.NormalGamma(m0=m0, kappa0=0.4, a0=1.3, b0=b0)
    expected = student_t_chain(X, m0, 0.4, 1.3, b0)
    assert model.log_marginal(X) == pytest.approx(expected, rel=1e-12)


def test_invariant_to_row_order():
    X = rng(2).normal(size=(12, 4))
    X[3, 1] = np.nan
    model = rt.NormalGamma(m0=0.1, kappa0=0.2, a0=2.0, b0=[1.0, 0.5, 2.0, 1.5])
    base = model.log_marginal(X)
    for seed in range(3):
        perm = rng(seed).permutation(12)
        assert model.log_marginal(X[perm]) == pytest.approx(base, rel=1e-13)


@pytest.mark.parametrize("a0", [0.7, 40.0, 1e5, 1e8])
def test_matches_fifty_digit_closed_form_also_for_large_a0(a0):
    X = rng(3).normal(size=(5, 2)) + 0.4
    m0, kappa0, b0 = [0.0, 1.0], 0.3, [a0 * 1.2, a0 * 0.8]
    expected = sum(closed_form_mp(X[:, j], m0[j], kappa0, a0, b0[j]) for j in range(2))
    got = rt.NormalGamma(m0=m0, kappa0=kappa0, a0=a0, b0=b0).log_marginal(X)
    assert got == pytest.approx(float(expected), rel=1e-13)


def test_far_from_the_origin_the_statistics_keep_their_digits():
    # Unit variance at an offset of 10⁸: Σx² − n x̄² would lose every digit (its terms are
    # 10¹⁶, with an ulp of 2). The shifted data are exactly the offset data minus 10⁸
    # (Sterbenz), so ln f agrees up to what a mean near 10⁸ can hold (an ulp of 1.5e-8).
    shifted = rng(4).normal(size=(30, 2))
    offset = shifted + 1e8
    shifted = offset - 1e8
    near = rt.NormalGamma(m0=0.0, kappa0=0.5, a0=2.0, b0=1.0).log_marginal(shifted)
    far = rt.NormalGamma(m0=1e8, kappa0=0.5, a0=2.0, b0=1.0).log_marginal(offset)
    assert far == pytest.approx(near, rel=1e-8)
    trees = [
        rt.BayesianRoseTree(rt.NormalGamma(m0=m, kappa0=0.5, a0=2.0, b0=1.0)).fit(data)
        for m, data in ((0.0, shifted), (1e8, offset))
    ]
    assert trees[0].tree_.to_nested() == trees[1].tree_.to_nested()
    assert trees[1].log_evidence_ == pytest.approx(trees[0].log_evidence_, rel=1e-8)


def test_missing_entries_are_marginalised():
    X = np.array([[1.0, np.nan], [np.nan, 0.5], [2.0, -0.5], [1.5, 0.0]])
    m0, b0 = [0.5, 0.0], [1.0, 2.0]
    model = rt.NormalGamma(m0=m0, kappa0=0.7, a0=1.5, b0=b0)
    expected = sum(
        rt.NormalGamma(m0=m0[j], kappa0=0.7, a0=1.5, b0=b0[j]).log_marginal(
            X[~np.isnan(X[:, j]), j][:, None]
        )
        for j in range(2)
    )
    assert model.log_marginal(X) == pytest.approx(expected, rel=1e-13)


def test_default_hyperparameters_follow_the_documented_rule():
    X = rng(5).normal(size=(20, 3)) * [1.0, 5.0, 0.1] + [3.0, -2.0, 0.0]
    X[4, 2] = np.nan
    r = _core.resolved_model(X, rt.NormalGamma()._spec())
    var = np.nanvar(X, axis=0, ddof=1)
    np.testing.assert_allclose(r["m0"], np.nanmean(X, axis=0), rtol=1e-14)
    assert (r["kappa0"], r["a0"]) == (1.0, 5.0)
    np.testing.assert_allclose(r["b0"], 0.2 * 5.0 * (var + 1e-6 * var.mean()), rtol=1e-13)
    # b0 follows a given a0.
    r = _core.resolved_model(X, rt.NormalGamma(a0=2.0, kappa0=0.1)._spec())
    np.testing.assert_allclose(r["b0"], 0.2 * 2.0 * (var + 1e-6 * var.mean()), rtol=1e-13)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (rt.NormalGamma(kappa0=0.0), "kappa0"),
        (rt.NormalGamma(kappa0=-1.0), "kappa0"),
        (rt.NormalGamma(a0=0.0), "a0"),
        (rt.NormalGamma(a0=np.inf), "a0"),
        (rt.NormalGamma(b0=-1.0), "b0"),
        (rt.NormalGamma(b0=[1.0, 2.0]), "b0"),
        (rt.NormalGamma(b0=[[1.0]]), "b0"),
        (rt.NormalGamma(m0=np.nan), "m0"),
        (rt.NormalGamma(m0=[0.0, 1.0]), "m0"),
        (rt.NormalGamma(kappa0="x"), "kappa0"),
        (rt.NormalGamma(b0=[1.0, 1.0, 1.0], shared_precision=True), "b0"),
        (rt.NormalGamma(shared_precision="yes"), "shared_precision"),
    ],
)
def test_invalid_hyperparameters_name_the_parameter(model, name):
    X = rng(0).normal(size=(5, 3))
    with pytest.raises(rt.InvalidParameterError, match=name) as err:
        rt.BayesianRoseTree(model=model).fit(X)
    assert err.value.parameter == name


def test_infinite_values_name_row_and_column():
    X = rng(0).normal(size=(5, 3))
    X[3, 2] = np.inf
    with pytest.raises(rt.InvalidDataError) as err:
        rt.NormalGamma(m0=0.0, b0=1.0).log_marginal(X)
    assert (err.value.row, err.value.column) == (3, 2)


# ------------------------------------------------------------------------------ prediction
def ng_predictive(cluster, x, m0, kappa0, a0, b0):
    """Student-t posterior predictive of one Normal-Gamma feature (Murphy 2007, eq 100)."""
    cluster = cluster[~np.isnan(cluster)]
    n = len(cluster)
    mean = cluster.mean() if n else 0.0
    kn, an = kappa0 + n, a0 + n / 2
    mun = (kappa0 * m0 + n * mean) / kn
    bn = b0 + np.sum((cluster - mean) ** 2) / 2 + kappa0 * n * (mean - m0) ** 2 / (2 * kn)
    return stats.t.logpdf(x, df=2 * an, loc=mun, scale=np.sqrt(bn * (kn + 1) / (an * kn)))


def test_density_integrates_to_one_and_matches_student_t_mixture_in_one_dimension():
    X = np.array([[-2.1], [-1.8], [-2.4], [1.1], [1.3], [0.7], [4.0]])
    prior = dict(m0=0.0, kappa0=0.5, a0=1.5, b0=1.0)
    est = rt.BayesianRoseTree(rt.NormalGamma(**prior)).fit(X)
    total, _ = integrate.quad(lambda x: np.exp(est.score_samples([[x]])[0]), -np.inf, np.inf)
    assert total == pytest.approx(1.0, abs=1e-7)
    xs = np.array([-3.0, -2.0, 0.0, 1.0, 5.0])
    log_w = est.tree_.log_cluster_weights()
    terms = [
        [
            log_w[s] + ng_predictive(X[est.tree_.leaves(s), 0], x, **prior)
            for s in range(est.tree_.n_nodes)
        ]
        for x in xs
    ]
    np.testing.assert_allclose(
        est.score_samples(xs[:, None]), special.logsumexp(terms, axis=1), rtol=1e-12
    )
    np.testing.assert_allclose(est.predict_proba(xs[:, None]).sum(axis=1), 1.0, rtol=1e-12)


def test_density_integrates_to_one_in_two_dimensions_and_nan_marginalises():
    X = np.array([[0.0, 1.0], [0.3, 1.4], [2.5, -1.0], [2.8, -0.6], [np.nan, 0.2]])
    prior = dict(m0=[1.0, 0.0], kappa0=0.8, a0=2.0, b0=[0.6, 0.9])
    est = rt.BayesianRoseTree(rt.NormalGamma(**prior)).fit(X)
    total, _ = integrate.dblquad(
        lambda y, x: np.exp(est.score_samples([[x, y]])[0]), -np.inf, np.inf, -np.inf, np.inf
    )
    assert total == pytest.approx(1.0, abs=1e-6)
    # The product of per-feature Student t's, mixed over the tree's clusters.
    log_w = est.tree_.log_cluster_weights()
    x = np.array([0.5, 0.4])
    terms = [
        log_w[s]
        + sum(
            ng_predictive(X[est.tree_.leaves(s), j], x[j], prior["m0"][j], 0.8, 2.0, prior["b0"][j])
            for j in range(2)
        )
        for s in range(est.tree_.n_nodes)
    ]
    assert est.score_samples([x])[0] == pytest.approx(special.logsumexp(terms), rel=1e-12)
    # A missing entry integrates the density over that feature.
    marginal, _ = integrate.quad(lambda y: np.exp(est.score_samples([[0.5, y]])[0]), -30, 30)
    assert est.score_samples([[0.5, np.nan]])[0] == pytest.approx(np.log(marginal), rel=1e-7)


# ------------------------------------------------------------------------------ sparse input
def test_sparse_input_matches_dense_with_data_driven_defaults():
    dense = rng(6).normal(size=(25, 6)) * (rng(7).random((25, 6)) < 0.4)
    dense[3, 1] = np.nan
    X = sparse.csr_array(dense)
    est_sparse = rt.BayesianRoseTree(rt.NormalGamma()).fit(X)
    est_dense = rt.BayesianRoseTree(rt.NormalGamma()).fit(dense)
    assert isinstance(est_sparse._fit.training(), tuple)  # kept as CSR: no dense copy was made
    assert est_sparse.tree_.to_nested() == est_dense.tree_.to_nested()
    assert est_sparse.log_evidence_ == pytest.approx(est_dense.log_evidence_, rel=1e-12)
    new = rng(8).normal(size=(4, 6))
    np.testing.assert_allclose(
        est_sparse.score_samples(new), est_dense.score_samples(new), rtol=1e-12
    )


# ------------------------------------------------------------------------------ learning
def with_value(model, name, index, value):
    fields = {k: np.array(getattr(model, k), dtype=float) for k in ("m0", "kappa0", "a0", "b0")}
    if fields[name].ndim == 0:
        fields[name] = value
    else:
        fields[name][index] = value
    return rt.NormalGamma(**fields)


@pytest.mark.parametrize("mixing", ["brt", "gamma", "dp"])
def test_gradient_matches_finite_differences_of_the_evidence(mixing):
    X = rng(9).normal(size=(8, 2)) * [1.0, 2.0]
    X[2, 1] = np.nan
    tree = [[0, 1, 2], [[3, 4], 5], [6, 7]]
    model = rt.NormalGamma(m0=[0.2, -0.1], kappa0=0.3, a0=1.7, b0=[0.9, 2.5])
    kw = dict(mixing=mixing, gamma=0.4, dp_alpha=1.3)
    g = rt.evidence_gradient(X, tree, model=model, **kw)
    assert set(g.model) == {"m0", "kappa0", "a0", "b0"}
    for name, grad in g.model.items():
        for i, analytic in enumerate(grad):
            base = float(np.atleast_1d(getattr(model, name))[i])
            h = 1e-6 * max(abs(base), 0.1)
            up, down = (
                rt.log_evidence(X, tree, model=with_value(model, name, i, base + s), **kw)
                for s in (h, -h)
            )
            assert analytic == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-6), (name, i)


@pytest.mark.parametrize("tie", [False, True])
def test_learning_raises_the_evidence(tie):
    r = rng(10)
    X = np.concatenate([r.normal(loc=c, size=(10, 3)) for c in (-3.0, 0.0, 3.0)])
    start = rt.BayesianRoseTree(rt.NormalGamma()).fit(X)
    est = rt.BayesianRoseTree(
        rt.NormalGamma(), learn_hyperparameters=True, tie_hyperparameters=tie
    ).fit(X)
    assert isinstance(est.model_, rt.NormalGamma)
    assert est.log_evidence_ > start.log_evidence_
    assert np.all(np.diff(est.evidence_trace_) >= -1e-9)
    # The learned model reproduces the reported evidence.
    again = rt.log_evidence(X, est.tree_, model=est.model_, gamma=est.gamma_)
    assert again == pytest.approx(est.log_evidence_, rel=1e-10)


def test_cli_fits_with_normal_gamma(tmp_path, capsys):
    from rosetree.cli import main

    data = tmp_path / "d.csv"
    rows = ["a,b", "0.1,1.0", "0.2,1.1", "3.0,-1.0", "3.1,", "2.9,-1.2"]
    data.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(data), "--model", "normal-gamma"]) == 0
    assert "log evidence" in capsys.readouterr().out
    assert main(["fit", str(data), "--model", "spherical"]) == 0
    X = np.array([[0.1, 1.0], [0.2, 1.1], [3.0, -1.0], [3.1, np.nan], [2.9, -1.2]])
    est = rt.BayesianRoseTree(rt.NormalGamma(shared_precision=True)).fit(X)
    assert f"ln p(D|T) = {est.log_evidence_:.4f}" in capsys.readouterr().out


# ------------------------------------------------------------------------------ shared precision
def shared_by_quadrature(X, m0, kappa0, a0, b0):
    """ln f of the shared-precision model: the Gamma(a0, b0) prior on the one precision λ
    times each feature's observed entries, N(m0_j, (I + 11'/κ0)/λ) given λ (the mean
    integrated out), integrated over ln λ by adaptive quadrature."""

    def log_integrand(t):
        lam = np.exp(t)
        total = stats.gamma.logpdf(lam, a0, scale=1.0 / b0) + t
        for j in range(X.shape[1]):
            x = X[~np.isnan(X[:, j]), j]
            n = x.size
            cov = (np.eye(n) + np.ones((n, n)) / kappa0) / lam
            total += stats.multivariate_normal.logpdf(x, np.full(n, m0[j]), cov)
        return total

    peak = max(log_integrand(t) for t in np.linspace(-15, 15, 301))
    value, _ = integrate.quad(
        lambda t: np.exp(log_integrand(t) - peak), -15, 15, epsabs=0, epsrel=1e-12, limit=500
    )
    return peak + np.log(value)


@pytest.mark.parametrize(("kappa0", "a0", "b0"), [(0.7, 2.5, 1.3), (0.05, 0.6, 4.0)])
def test_shared_precision_matches_quadrature_over_the_precision(kappa0, a0, b0):
    X = rng(21).normal(size=(6, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, 2.0]
    X[2, 1] = np.nan
    m0 = [0.1, 0.5, 1.5]
    model = rt.NormalGamma(m0=m0, kappa0=kappa0, a0=a0, b0=b0, shared_precision=True)
    want = shared_by_quadrature(X, m0, kappa0, a0, b0)
    assert model.log_marginal(X) == pytest.approx(want, rel=1e-10)
    # One feature: the shared precision is the feature's own.
    one = rt.NormalGamma(m0=0.3, kappa0=kappa0, a0=a0, b0=b0)
    shared = rt.NormalGamma(m0=0.3, kappa0=kappa0, a0=a0, b0=b0, shared_precision=True)
    assert shared.log_marginal(X[:, :1]) == pytest.approx(one.log_marginal(X[:, :1]), rel=1e-13)


def test_shared_precision_defaults_follow_the_documented_rule():
    X = rng(22).normal(size=(9, 3)) * [1.0, 3.0, 0.2]
    m0 = X.mean(axis=0)
    b0 = 0.2 * 5.0 * X.var(axis=0, ddof=1).mean()
    want = shared_by_quadrature(X, m0, 1.0, 5.0, b0)
    got = rt.NormalGamma(shared_precision=True).log_marginal(X)
    assert got == pytest.approx(want, rel=1e-10)


def test_shared_precision_weighs_features_by_their_spread():
    # Two groups apart in one wide feature, twenty narrow features of noise beside it (the
    # last principal components, say): the shared precision follows the wide feature,
    # where one precision per feature measures each noise feature against its own spread.
    r = rng(0)
    y = np.repeat([0, 1], 15)
    X = np.column_stack([8.0 * y + r.normal(size=30), 0.05 * r.normal(size=(30, 20))])
    shared = rt.BayesianRoseTree(rt.NormalGamma(shared_precision=True)).fit(X)
    assert rt.dendrogram_purity(shared.tree_, y) == 1.0
    per_feature = rt.BayesianRoseTree(rt.NormalGamma()).fit(X)
    assert rt.dendrogram_purity(per_feature.tree_, y) < 0.6


def test_shared_precision_is_not_learnt_and_says_so():
    X = rng(24).normal(size=(12, 2))
    est = rt.BayesianRoseTree(rt.NormalGamma(shared_precision=True), learn_hyperparameters=True)
    with pytest.raises(rt.InvalidParameterError, match="shared_precision") as err:
        est.fit(X)
    assert err.value.parameter == "model"
    assert not rt.NormalGamma(shared_precision=True)._learnable
    assert rt.NormalGamma()._learnable


def test_shared_precision_sparse_partial_fit_and_pickle_keep_the_model():
    import pickle

    dense = rng(25).normal(size=(30, 5)) * (rng(26).random((30, 5)) < 0.5)
    model = rt.NormalGamma(shared_precision=True)
    est_sparse = rt.BayesianRoseTree(model).fit(sparse.csr_array(dense))
    est = rt.BayesianRoseTree(model).fit(dense)
    assert est_sparse.tree_.to_nested() == est.tree_.to_nested()
    assert est_sparse.log_evidence_ == pytest.approx(est.log_evidence_, rel=1e-12)
    grown = rt.BayesianRoseTree(model).partial_fit(dense[:20]).partial_fit(dense[20:])
    assert grown.model_.shared_precision
    assert np.ndim(grown.model_.b0) == 0
    assert grown.model_.b0 == pytest.approx(0.2 * 5.0 * dense[:20].var(axis=0, ddof=1).mean())
    again = pickle.loads(pickle.dumps(grown))
    np.testing.assert_allclose(again.score_samples(dense[:3]), grown.score_samples(dense[:3]))
