"""Prediction with a coalescent tree (§4.4): the predictive density against numerical
integration of ln p(x, y, pi') over where the new point joins, normalisation, posterior
marginals against sums over the missing value, and SMC averaging."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import rosetree as rt
from rosetree import _core
from scipy import integrate


def nested(tree, v, new_leaf=None, at=None):
    """Node ``v`` of ``tree`` as nested dicts; with ``at = (c, t)`` the leaf ``new_leaf``
    joins the branch above node ``c`` at time ``t`` (``c`` the root: above it)."""
    h = tree.heights

    def build(u):
        if u < tree.n_leaves:
            here = int(u)
        else:
            here = {"t": float(h[u]), "children": [build(c) for c in tree.children[u]]}
        if at is not None and at[0] == u:
            return {"t": at[1], "children": [here, new_leaf]}
        return here

    return build(v)


def direct_density(X, y, tree, **model):
    """p(y | X, tree) by integrating exp(ln p(X, y, tree') - ln p(X, tree)) over every
    branch and time where y's leaf can join (scipy quad; an independent upward pass)."""
    n = X.shape[0]
    Xy = np.vstack([X, y])
    base = rt.coalescent_log_joint(X, tree, **model)
    h = tree.heights
    events = sorted(set(h[n:]))
    total = 0.0
    for c in range(tree.n_nodes):
        if c == tree.root:
            lo, hi = h[c] - 60.0, h[c]
        else:
            lo, hi = h[tree.parent[c]], h[c]

        def f(t, c=c):
            joined = nested(tree, tree.root, new_leaf=n, at=(c, t))
            return np.exp(rt.coalescent_log_joint(Xy, joined, **model) - base)

        inside = [e for e in events if lo < e < hi]
        total += integrate.quad(f, lo, hi, points=inside or None, limit=400, epsabs=1e-13)[0]
    return total


@pytest.mark.parametrize("seed", [0, 1])
def test_brownian_density_equals_the_integral_over_joins(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(4, 2))
    est = rt.KingmanCoalescent(noise=0.0, Lambda=0.8).fit(X)
    for y in (rng.normal(size=2), X[1] + 0.3):
        want = direct_density(X, y, est.tree_, Lambda=0.8)
        got = np.exp(est.score_samples(y[None, :])[0])
        assert got == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("root", ["flat", 0.5, 3.0])
def test_brownian_density_integrates_to_one(root):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(7, 1))
    est = rt.KingmanCoalescent(noise=0.0, root=root, Lambda=1.3).fit(X)
    f = lambda y: np.exp(est.score_samples(np.array([[y]]))[0])  # noqa: E731
    total = integrate.quad(f, -40, 40, points=sorted(X[:, 0]), limit=400)[0]
    assert total == pytest.approx(1.0, abs=1e-7)


def test_brownian_density_integrates_to_one_in_two_dimensions():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3, 2))
    est = rt.KingmanCoalescent(noise=0.0, Lambda=0.5).fit(X)

    def inner(a):
        # Over b for one a, vectorised: Gauss-Legendre on panels around each point's b.
        edges = np.unique(np.concatenate([[-12.0, 12.0], X[:, 1] - 0.5, X[:, 1] + 0.5]))
        x, w = np.polynomial.legendre.leggauss(40)
        panels = list(itertools.pairwise(edges))
        b = np.concatenate([(lo + hi) / 2 + (hi - lo) / 2 * x for lo, hi in panels])
        wb = np.concatenate([(hi - lo) / 2 * w for lo, hi in panels])
        rows = np.column_stack([np.full_like(b, a), b])
        return float(wb @ np.exp(est.score_samples(rows)))

    total = integrate.quad(inner, -12, 12, points=sorted(X[:, 0]), limit=200, epsabs=1e-4)[0]
    assert total == pytest.approx(1.0, abs=1e-3)


def test_multinomial_probabilities_sum_to_one_and_nan_marginalises():
    rng = np.random.default_rng(6)
    X = rng.integers(0, 3, size=(9, 3)).astype(float)
    X[2, 1] = np.nan
    est = rt.KingmanCoalescent(noise=0.0, likelihood="multinomial").fit(X)
    rows = np.array(list(itertools.product(range(3), repeat=3)), dtype=float)
    p = np.exp(est.score_samples(rows))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    # A missing entry sums over its categories.
    partial = np.exp(est.score_samples(np.array([[1.0, np.nan, 0.0]]))[0])
    assert partial == pytest.approx(p[(rows[:, 0] == 1) & (rows[:, 2] == 0)].sum(), rel=1e-10)


def test_attach_proba_rows_sum_to_one_and_favour_the_nearest_leaf():
    X = np.array([[0.0], [0.1], [5.0], [5.2], [10.0]])
    est = rt.KingmanCoalescent(noise=0.0).fit(X)
    proba = est.attach_proba(np.array([[5.1], [10.05]]))
    assert proba.shape == (2, est.tree_.n_nodes)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert proba[1].argmax() == 4


def brute_force_leaf_posterior(column, tree, rate, q, leaf):
    """p(value of ``leaf`` | the column's other observed values) by summing over the states
    of every internal node (mutation along each branch, the root drawn from q)."""
    K = len(q)
    h = tree.heights
    internal = list(tree.internal_nodes)

    def move(a, b, t):
        e = np.exp(-rate * t)
        return e * (a == b) + (1 - e) * q[b]

    post = np.zeros(K)
    for k in range(K):
        values = column.copy()
        values[leaf] = k
        for states in itertools.product(range(K), repeat=len(internal)):
            state = dict(zip(internal, states, strict=True))
            p = q[state[tree.root]]
            for v in internal:
                for c in tree.children[v]:
                    t = h[c] - h[v]
                    if c in state:
                        p *= move(state[v], state[c], t)
                    elif not np.isnan(values[c]):
                        p *= move(state[v], int(values[c]), t)
            post[k] += p
    return post / post.sum()


def test_missing_entry_posterior_matches_a_sum_over_internal_states():
    # A seed where the missing entries' leaves do not merge at time 0 (a zero-length branch
    # would copy the sibling's value) and feature 0 shows all three categories.
    rng = np.random.default_rng(53)
    X = rng.integers(0, 3, size=(6, 2)).astype(float)
    X[3, 0] = np.nan
    X[1, 0] = np.nan
    est = rt.KingmanCoalescent(noise=0.0, likelihood="multinomial", Lambda=[0.6, 1.1]).fit(X)
    proba = est.predict_proba_missing()
    column = X[:, 0]
    observed = column[~np.isnan(column)].astype(int)
    q = (np.bincount(observed, minlength=3) + 1.0) / (observed.size + 3)
    for leaf in (3, 1):
        want = brute_force_leaf_posterior(column, est.tree_, 0.6, q, leaf)
        np.testing.assert_allclose(proba[leaf, 0], want, rtol=1e-10)
        assert proba[leaf, 0].max() < 0.9
    assert np.array_equal(est.impute()[3], [proba[3, 0].argmax(), X[3, 1]])
    assert np.all(proba[0, 0] == np.eye(3)[int(X[0, 0])])
    truth = X.copy()
    truth[3, 0], truth[1, 0] = 2.0, 0.0
    want = np.log(proba[3, 0, 2]) + np.log(proba[1, 0, 0])
    assert est.log_predictive_missing(truth) == pytest.approx(want, rel=1e-12)


def test_smc_predictions_average_the_particles():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(6, 2))
    est = rt.KingmanCoalescent(
        noise=0.0, Lambda=1.0, inference="smc-priorpost", n_particles=6, random_state=1
    ).fit(X)
    Y = rng.normal(size=(3, 2))
    per = []
    for w, tree in zip(est.particle_log_weights_, est.particles_, strict=True):
        model = _core.CoalescentModel(X, likelihood="brownian", lambda_=np.asarray(1.0))
        predictor = model.predictor(X, tree._structure)
        per.append(w + np.asarray(predictor.log_density(Y, n_jobs=1)[0]))
    per = np.array(per)
    top = per.max(axis=0)
    want = top + np.log(np.exp(per - top).sum(axis=0))
    np.testing.assert_allclose(est.score_samples(Y), want, rtol=1e-12)
    assert est.score(Y) == pytest.approx(want.mean())


def test_prediction_needs_a_fit_and_matching_columns():
    est = rt.KingmanCoalescent(noise=0.0)
    with pytest.raises(rt.NotFittedError):
        est.score_samples(np.zeros((1, 2)))
    est.fit(np.random.default_rng(9).normal(size=(5, 2)))
    expected = "X has 3 features, but KingmanCoalescent is expecting 2"
    with pytest.raises(rt.InvalidDataError, match=expected):
        est.score_samples(np.zeros((1, 3)))
    with pytest.raises(rt.InvalidParameterError, match="multinomial"):
        est.predict_proba_missing()


@pytest.mark.parametrize("rate", [1e-300, 1e-100, 1e-10])
def test_multinomial_predictive_sums_to_one_with_a_tiny_rate(rate):
    # With a tiny rate the tree's times are ~1/rate long; the time integral must still
    # resolve the join density near the present (it once gave 2 for each category).
    X = np.array([[0.0], [0.0], [1.0], [0.0], [1.0], [0.0], [0.0], [1.0], [0.0]])
    est = rt.KingmanCoalescent("multinomial", Lambda=rate).fit(X)
    total = np.exp(est.score_samples(np.array([[0.0], [1.0]]))).sum()
    assert total == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("inference", ["greedy-rate1", "smc-priorprior"])
def test_predictions_follow_the_fitted_state(inference):
    """The core's messages are built once per fit and kept; growing the tree replaces them,
    and a pickle (which keeps none) rebuilds the same ones."""
    import pickle

    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(0.0, 0.3, (15, 2)), rng.normal(3.0, 0.3, (15, 2))])
    Y = np.array([[0.1, 0.0], [1.5, 1.5], [3.0, 2.8]])
    kwargs = {"n_particles": 8} if inference.startswith("smc") else {}
    est = rt.KingmanCoalescent(inference=inference, random_state=0, **kwargs).fit(X[:20])
    first, attach = est.score_samples(Y), est.attach_proba(Y)
    assert est.score_samples(Y) is not first
    np.testing.assert_array_equal(est.score_samples(Y), first)
    fresh = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(fresh.score_samples(Y), first)
    np.testing.assert_array_equal(fresh.attach_proba(Y), attach)
    if inference == "greedy-rate1":
        est.partial_fit(X[20:])
        grown = est.score_samples(Y)
        assert not np.allclose(grown, first)
        assert est.attach_proba(Y).shape == (3, est.tree_.n_nodes)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(est)).score_samples(Y), grown)
