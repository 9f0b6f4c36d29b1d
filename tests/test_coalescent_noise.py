"""Brownian coalescent with observation noise: the leaves' density against SciPy's
multivariate normal with covariance (tree covariance + noise I) ⊗ Lambda, Greedy-Rate1's merge
time against a numerical maximisation, the predictive density against quadrature, and equal
rows as ordinary data for every inference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import rosetree as rt
from rosetree import _core
from rosetree._validation import unit_variances
from scipy import integrate, optimize, stats
from sklearn.datasets import load_digits, load_iris
from test_coalescent import covariance, log_prior, random_timed_tree

INFERENCES = (
    "greedy-rate1",
    "greedy-maxprob",
    "greedy-minduration",
    "smc-priorprior",
    "smc-priorpost",
    "smc-postpost",
)


@pytest.mark.parametrize("d", [1, 3])
def test_log_joint_with_noise_matches_a_dense_gaussian(d):
    rng = np.random.default_rng(10 + d)
    for n in (2, 3, 6):
        tree, times = random_timed_tree(n, rng)
        X = rng.normal(size=(n, d))
        a = rng.normal(size=(d, d))
        lam = a @ a.T + 0.3 * np.eye(d)
        s0, eta = 0.8, 0.35
        cov = np.kron(covariance(tree, n, s0) + eta * np.eye(n), lam)
        want = stats.multivariate_normal(np.zeros(n * d), cov).logpdf(X.ravel())
        want += log_prior(times, n)
        got = rt.coalescent_log_joint(X, tree, Lambda=lam, root=s0, noise=eta)
        assert got == pytest.approx(want, rel=1e-10, abs=1e-10)
        # A flat root is the limit of a wide Gaussian root, rescaled by its normaliser.
        s0 = 1e6
        cov = np.kron(covariance(tree, n, s0) + eta * np.eye(n), lam)
        wide = stats.multivariate_normal(np.zeros(n * d), cov).logpdf(X.ravel())
        wide += 0.5 * (d * math.log(2 * math.pi * s0) + np.linalg.slogdet(lam)[1])
        flat = rt.coalescent_log_joint(X, tree, Lambda=lam, noise=eta) - log_prior(times, n)
        assert flat == pytest.approx(wide, abs=1e-4)


def test_log_joint_with_noise_and_missing_entries_marginalises_them():
    rng = np.random.default_rng(3)
    n, d = 5, 3
    tree, times = random_timed_tree(n, rng)
    X = rng.normal(size=(n, d))
    X[1, 0] = X[3, 2] = X[4, 0] = np.nan
    lam = np.array([0.5, 1.5, 2.0])
    s0, eta = 1.2, 0.2
    want = log_prior(times, n)
    base = covariance(tree, n, s0) + eta * np.eye(n)
    for j in range(d):
        seen = ~np.isnan(X[:, j])
        sub = base[np.ix_(seen, seen)] * lam[j]
        want += stats.multivariate_normal(np.zeros(seen.sum()), sub).logpdf(X[seen, j])
    got = rt.coalescent_log_joint(X, tree, Lambda=lam, root=s0, noise=eta)
    assert got == pytest.approx(want, rel=1e-10)


def test_zero_noise_is_the_noiseless_model():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(8, 2))
    a = rt.KingmanCoalescent(Lambda=0.7, noise=0.0).fit(X)
    tree, times = random_timed_tree(8, rng)
    cov = np.kron(covariance(tree, 8, 0.5), 0.7 * np.eye(2))
    want = stats.multivariate_normal(np.zeros(16), cov).logpdf(X.ravel()) + log_prior(times, 8)
    assert rt.coalescent_log_joint(X, tree, Lambda=0.7, root=0.5) == pytest.approx(want)
    assert a.noise_ == 0.0
    assert a.log_joint_ == pytest.approx(rt.coalescent_log_joint(X, a.tree_, Lambda=0.7))


@pytest.mark.parametrize("eta", [0.05, 0.6])
def test_greedy_rate1_merges_two_rows_at_the_maximising_time(eta):
    # Two rows in d = 2 under Lambda = 0.5: the merge time maximises
    # -delta + ln N(x0 - x1; 0, (2 eta + 2 delta) Lambda) over delta >= 0.
    X = np.array([[0.0, 0.3], [1.1, -0.4]])
    lam = 0.5
    est = rt.KingmanCoalescent(Lambda=lam, noise=eta).fit(X)
    diff = X[0] - X[1]

    def neg(delta):
        v = (2 * eta + 2 * delta) * lam
        return delta - stats.multivariate_normal(np.zeros(2), v * np.eye(2)).logpdf(diff)

    best = optimize.minimize_scalar(neg, bounds=(0, 20), method="bounded", options={"xatol": 1e-10})
    assert -est.tree_.heights[2] == pytest.approx(max(best.x, 0.0), abs=1e-6)


def test_predictive_density_with_noise_integrates_to_one():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(7, 1))
    X[3] = X[1]  # an equal pair: ordinary data with noise
    est = rt.KingmanCoalescent(Lambda=1.3, noise=0.2, root=2.0).fit(X)
    f = lambda y: np.exp(est.score_samples(np.array([[y]]))[0])  # noqa: E731
    total = integrate.quad(f, -40, 40, points=sorted(X[:, 0]), limit=400)[0]
    assert total == pytest.approx(1.0, abs=1e-7)


@pytest.mark.parametrize("inference", INFERENCES)
def test_equal_rows_are_ordinary_data_with_noise(inference):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(12, 3))
    X[5] = X[2]
    X[9] = X[2]
    est = rt.KingmanCoalescent(inference=inference, n_particles=4, random_state=0).fit(X)
    assert np.isfinite(est.log_joint_)
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X, est.tree_, Lambda=est.Lambda_, noise=est.noise_), rel=1e-10
    )
    scores = est.score_samples(X)
    assert np.all(np.isfinite(scores))
    proba = est.attach_proba(X[:3])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_iris_fits_by_default_with_finite_scores():
    X = load_iris().data  # has equal rows
    est = rt.KingmanCoalescent().fit(X)
    assert np.isfinite(est.log_joint_) and np.all(np.isfinite(est.score_samples(X[:10])))
    with pytest.raises(rt.InvalidDataError, match="noise"):
        rt.KingmanCoalescent(noise=0.0).fit(X)


def test_smc_without_noise_names_the_equal_rows():
    X = np.arange(12.0).reshape(6, 2)
    X[4] = X[1]
    with pytest.raises(rt.InvalidDataError, match="rows 1 and 4") as info:
        rt.KingmanCoalescent(noise=0.0, inference="smc-postpost").fit(X)
    assert info.value.row == 4


def test_lambda_auto_makes_the_tree_independent_of_the_scale():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(20, 3)) * [1.0, 2.0, 0.5]
    scaled = X * 250.0 + 7.0
    a = rt.KingmanCoalescent().fit(X)
    b = rt.KingmanCoalescent().fit(scaled)
    assert a.tree_.to_nested() == b.tree_.to_nested()
    np.testing.assert_allclose(a.tree_.heights, b.tree_.heights, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    # One rate for all columns, the mean of their variances.
    assert a.Lambda_ == pytest.approx(np.mean(np.var(X, axis=0)), rel=1e-12)
    # Densities change by the Jacobian of the rescaling only.
    jac = 3 * np.log(250.0)
    np.testing.assert_allclose(b.score_samples(scaled[:4]), a.score_samples(X[:4]) - jac)


def test_columns_in_different_units_get_a_rate_each():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(20, 3)) * [1.0, 1.0, 1e3]  # ranges 10^3 apart: other units
    a = rt.KingmanCoalescent().fit(X)
    np.testing.assert_allclose(a.Lambda_, np.var(X, axis=0), rtol=1e-12)
    # Any change of units, column by column, gives the same tree and clusters.
    factors = np.array([7.0, 0.01, 300.0])
    b = rt.KingmanCoalescent().fit(X * factors - 3.0)
    assert b.tree_.to_nested() == a.tree_.to_nested()
    np.testing.assert_allclose(b.tree_.heights, a.tree_.heights, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(b.labels_, a.labels_)
    jac = np.log(factors).sum()
    np.testing.assert_allclose(
        b.score_samples(X[:4] * factors - 3.0), a.score_samples(X[:4]) - jac, rtol=1e-9
    )
    # Ranges within a factor of 100: the columns share one rate, the mean variance, even
    # where a column that is rarely non-zero has a tiny variance (as pixels do).
    near = rng.normal(size=(20, 3)) * [1.0, 1.0, 20.0]
    c = rt.KingmanCoalescent().fit(near)
    assert np.ndim(c.Lambda_) == 0
    assert c.Lambda_ == pytest.approx(np.var(near, axis=0).mean(), rel=1e-12)
    pixels = rng.integers(0, 17, size=(1000, 2)).astype(float)
    pixels[:, 1] = np.arange(1000) == 7  # one pixel lit once: variance 10^-3, range 1
    variances = np.var(pixels, axis=0)
    assert variances.max() > 1e4 * variances.min()
    one, by_column = unit_variances(pixels)
    assert not by_column
    np.testing.assert_allclose(one, variances.mean(), rtol=1e-12)
    rt.KingmanCoalescent(Lambda=1.0).fit(X)  # a given Lambda is used as given


def test_lambda_learning_with_noise_reaches_the_conditional_optimum():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(15, 2)) * [1.0, 3.0]
    X[4] = X[0]
    est = rt.KingmanCoalescent(
        Lambda=np.ones(2), noise=0.1, learn_hyperparameters=True, Lambda_prior=(2.0, [0.5, 0.5])
    ).fit(X)
    assert np.all(np.diff(est.hyper_trace_) >= -1e-9)
    # The M-step's closed form (independent contrasts with each leaf's branch longer by
    # the noise) for the fitted tree ...
    model = _core.CoalescentModel(X, likelihood="brownian", lambda_=np.ones(2), noise=0.1)
    closed = model.lambda_map(X, est.tree_._structure, prior=(2.0, np.array([0.5, 0.5])))

    # ... maximises ln p(x, tree | Lambda) + ln p(Lambda) for the final tree
    # (inverse-gamma(nu/2, psi/2) per feature), found here by numerical search.
    def neg(log_lam):
        lam = np.exp(log_lam)
        prior = stats.invgamma(1.0, scale=0.25).logpdf(lam).sum()
        return -(rt.coalescent_log_joint(X, est.tree_, Lambda=lam, noise=0.1) + prior)

    best = optimize.minimize(neg, np.zeros(2), method="Nelder-Mead", options={"xatol": 1e-9})
    np.testing.assert_allclose(closed, np.exp(best.x), rtol=1e-4)


def test_noise_is_checked():
    X = np.zeros((3, 1))
    for bad in (-1.0, np.nan, np.inf, "a", True):
        with pytest.raises(rt.InvalidParameterError, match="noise"):
            rt.KingmanCoalescent(noise=bad).fit(X)
    with pytest.raises(rt.InvalidParameterError, match="noise"):
        rt.KingmanCoalescent("multinomial", noise=0.1).fit(X)


def test_default_flat_clusters_find_separated_groups_and_predict_them():
    rng = np.random.default_rng(11)
    centres = np.array([[0.0, 0.0, 0.0], [6.0, 0.0, 0.0], [0.0, 6.0, 6.0]])
    y = np.repeat([0, 1, 2], 15)
    X = centres[y] + rng.normal(size=(45, 3))
    est = rt.KingmanCoalescent().fit(X)
    assert est.n_clusters_ == 3
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, est.labels_) == 1.0
    new = centres + 0.1
    proba = est.predict_proba(new)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    want = [est.labels_[np.flatnonzero(y == k)[0]] for k in range(3)]
    np.testing.assert_array_equal(est.predict(new), want)
    # The model comparison's nodes are the clusters' own.
    for k, v in enumerate(est.cluster_nodes_):
        assert sorted(est.cluster_tree_.leaves(v)) == np.flatnonzero(est.labels_ == k).tolist()
    # A missing entry is marginalised.
    partial = new.copy()
    partial[0, 2] = np.nan
    assert est.predict(partial)[0] == want[0]
    # The paper's rule is kept under a name, and cluster_labels still applies it.
    old = rt.KingmanCoalescent(flat_clusters="llr").fit(X)
    np.testing.assert_array_equal(old.labels_, old.cluster_labels())


def test_default_flat_clusters_on_iris_are_not_singletons():
    X, y = load_iris(return_X_y=True)
    est = rt.KingmanCoalescent().fit(X)
    from sklearn.metrics import adjusted_rand_score

    # Measured 0.653 (4 clusters); the old log-likelihood-ratio rule gives 60 clusters.
    assert est.n_clusters_ <= 6
    assert adjusted_rand_score(y, est.labels_) > 0.6


def test_flat_clusters_leave_out_constant_columns():
    # Pixels that are 0 in every image: under the cluster models' priors, scaled from the
    # columns' variances, each would add a bonus for merging that grows with the cluster
    # (11 such columns cut these rows into 12 clusters instead of 17).
    X, _ = load_digits(return_X_y=True)
    X = X[:150].astype(float)
    varying = X.max(axis=0) > X.min(axis=0)
    assert (~varying).sum() == 11
    est = rt.KingmanCoalescent().fit(X)
    model = type(est.cluster_model_)()
    # The data-driven priors make the cut independent of each column's centre and unit.
    kept = rt.evaluate_tree(X[:, varying], est.tree_, model=model, mixing="dp").cut(0.5)
    np.testing.assert_array_equal(est.labels_, kept)
    with pytest.warns(rt.DegenerateModelWarning, match=r"11 constant column\(s\) \[0, 8, "):
        every = rt.evaluate_tree(X, est.tree_, model=model, mixing="dp").cut(0.5)
    assert every.max() + 1 < est.n_clusters_ == 17
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_flat_clusters_with_the_multinomial_likelihood():
    rng = np.random.default_rng(12)
    y = np.repeat([0, 1], 20)
    X = np.where(rng.random((40, 6)) < 0.9, y[:, None] * 2, rng.integers(0, 3, (40, 6)))
    X = X.astype(float)
    X[3, 1] = np.nan
    est = rt.KingmanCoalescent("multinomial").fit(X)
    from sklearn.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, est.labels_) > 0.8  # measured 0.858: two stray rows
    np.testing.assert_array_equal(est.predict(X[[0, 39]]), est.labels_[[0, 39]])
    with pytest.raises(rt.InvalidDataError, match="category"):
        est.predict_proba(np.full((1, 6), 0.5))


def test_flat_cluster_parameters_are_checked():
    X = np.random.default_rng(0).normal(size=(6, 2))
    for kwargs in (
        {"flat_clusters": "cut"},
        {"dp_alpha": 0.0},
        {"dp_alpha": np.inf},
        {"cut_threshold": 1.5},
    ):
        with pytest.raises(rt.InvalidParameterError, match=next(iter(kwargs))):
            rt.KingmanCoalescent(**kwargs).fit(X)


def test_two_tiny_distinct_rows_give_a_finite_log_joint_or_a_numerical_error():
    X = np.array([[-5.3e-300], [-4.1e-300]])
    est = rt.KingmanCoalescent().fit(X)  # with noise: an ordinary pair
    assert np.isfinite(est.log_joint_)
    with pytest.raises(rt.NumericalError, match="-inf"):
        rt.KingmanCoalescent(noise=0.0).fit(X)


def tree_covariance(tree, s0):
    """(s0 + shared path length below the root) for every pair of leaves of an rt.Tree."""
    n, h = tree.n_leaves, np.asarray(tree.heights)
    c = np.full((n, n), float(s0))
    for v in tree.internal_nodes:
        rows = list(tree.leaves(v))
        block = c[np.ix_(rows, rows)]
        c[np.ix_(rows, rows)] = np.maximum(block, s0 + h[v] - h[tree.root])
    np.fill_diagonal(c, s0 - h[tree.root])
    return c


def test_predictive_of_a_missing_entry_with_noise_is_the_gaussian_conditional():
    rng = np.random.default_rng(13)
    X = rng.normal(size=(7, 2))
    truth = X.copy()
    X[2, 1] = np.nan
    lam, eta, s0 = np.array([0.6, 1.4]), 0.25, 1.5
    est = rt.KingmanCoalescent(Lambda=lam, noise=eta, root=s0).fit(X)
    cov = (tree_covariance(est.tree_, s0) + eta * np.eye(7)) * lam[1]
    seen = [i for i in range(7) if i != 2]
    gain = cov[2, seen] @ np.linalg.inv(cov[np.ix_(seen, seen)])
    mean = gain @ X[seen, 1]
    var = cov[2, 2] - gain @ cov[seen, 2]
    want = stats.norm(mean, math.sqrt(var)).logpdf(truth[2, 1])
    assert est.log_predictive_missing(truth) == pytest.approx(want, rel=1e-9)
    assert est.impute()[2, 1] == pytest.approx(mean, rel=1e-9)


def _clusters(tree, rows):
    """The tree's clusters as sets of row ids (leaf k is row ``rows[k]``)."""
    out = set()
    for v in range(tree.n_leaves, tree.n_nodes):
        out.add(frozenset(int(rows[k]) for k in tree.leaves(v)))
    return out


@pytest.mark.parametrize("missing", [False, True])
def test_the_tree_does_not_depend_on_the_order_of_the_rows(missing):
    # Rows on a coarse grid, as measurements rounded to a unit: with the default noise most
    # pairs merge at once (at t = 0), where Greedy-Rate1's rule ties. The tie goes to the
    # closest pair, not to the lowest row ids, so the same rows in another order give the
    # same tree (the rows are distinct, so no two pairs tie exactly).
    rng = np.random.default_rng(8)
    X = np.unique(np.round(rng.normal(size=(200, 4)) * 3.0) / 3.0, axis=0)[:90]
    X = X + rng.normal(scale=1e-3, size=X.shape)
    if missing:
        X[rng.random(X.shape) < 0.1] = np.nan
    base = rt.KingmanCoalescent().fit(X)
    assert np.sum(base.tree_.heights == 0.0) > X.shape[0] + 20  # many merges at once
    want = _clusters(base.tree_, np.arange(len(X)))
    for seed in range(3):
        order = np.random.default_rng(seed).permutation(len(X))
        est = rt.KingmanCoalescent().fit(X[order])
        assert _clusters(est.tree_, order) == want
        assert est.log_joint_ == pytest.approx(base.log_joint_, rel=1e-12)
