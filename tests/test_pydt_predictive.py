"""The Pitman–Yor diffusion tree's predictive mixture and estimator.

The mixture's weights are checked against the exact prior of the tree with one more leaf
(by exchangeability, ``p(T + new) / p(T)`` is the probability, or density in time, of the
new point's path), integrated over the divergence time by quadrature; each component's
Gaussian against the conditional of the covariance form ``N(0, sigma2 C)`` with the new
leaf added; the whole density against numerical integration.
"""

from __future__ import annotations

import numpy as np
import pytest
import rosetree as rt
from rosetree.pydt import predictive_components
from scipy import integrate
from scipy.special import gammaln


def _mixture_log_density(
    X: np.ndarray, log_w: np.ndarray, means: np.ndarray, variances: np.ndarray
) -> np.ndarray:
    """``ln sum_k w_k N(x; mean_k, var_k I)`` for every row of ``X``, in NumPy: the
    reference for the core's density."""
    d = X.shape[1]
    sq = ((X[:, None, :] - means[None, :, :]) ** 2).sum(axis=2)
    terms = log_w[None, :] - 0.5 * d * np.log(2 * np.pi * variances)[None, :]
    terms = terms - 0.5 * sq / variances[None, :]
    return np.logaddexp.reduce(terms, axis=1)


def _nested(tree: rt.Tree, node: int, insert: tuple[int, float] | None, new: int) -> object:
    """``tree`` below ``node`` as nested dicts, with leaf ``new`` diverging at ``insert``."""
    h = tree.heights
    if node < tree.n_leaves:
        out: object = node
    else:
        kids = [_nested(tree, k, insert, new) for k in tree.children[node]]
        if insert is not None and insert[0] == node and insert[1] == h[node]:
            kids.append(new)
        out = {"t": float(h[node]), "children": kids}
    if insert is not None and insert[0] == node and insert[1] < h[node]:
        out = {"t": insert[1], "children": [out, new]}
    return out


def _root(tree: rt.Tree) -> int:
    return tree.n_nodes - 1


def _covariance(tree: rt.Tree) -> np.ndarray:
    """``C_ij``: the height of the lowest common ancestor of leaves ``i`` and ``j``."""
    n = tree.n_leaves
    c = np.eye(n)
    for b in tree.internal_nodes:
        below = tree.leaves(b)
        for k in tree.children[b]:
            for i in tree.leaves(k):
                for j in below:
                    if j not in tree.leaves(k):
                        c[i, j] = tree.heights[b]
    return c


CASES = [
    (7, 1, 0.5, 0.2, 1.0, 0.7, 3),
    (6, 2, 0.0, 0.0, 1.5, 1.3, 11),  # the Dirichlet diffusion tree
    (8, 1, 2.0, 0.5, 0.6, 1.0, 5),
    (5, 3, -0.2, 0.3, 1.0, 0.5, 2),  # negative alpha
]


@pytest.mark.parametrize(("n", "d", "alpha", "beta", "c", "sigma2", "seed"), CASES)
def test_weights_are_the_probabilities_of_the_new_points_path(n, d, alpha, beta, c, sigma2, seed):
    X, tree = rt.sample_pydt(n, d, alpha=alpha, beta=beta, c=c, sigma2=sigma2, random_state=seed)
    log_w, _, _, where = predictive_components(X, tree, alpha, beta, c, sigma2, n_points=4)
    base = rt.pydt_log_prior(tree, alpha=alpha, beta=beta, c=c)
    h = np.asarray(tree.heights)
    parent = {k: b for b in tree.internal_nodes for k in tree.children[b]}
    total = 0.0
    for u in range(tree.n_nodes):
        mine = where[:, 0] == u
        # On the branch into u: the density of diverging at t, integrated over the branch.
        top = h[parent[u]] if u in parent else 0.0

        def density(tau: float, u: int = u) -> float:
            """The density of diverging at ``t = 1 - exp(-tau)``, per unit of ``tau``."""
            t = -np.expm1(-tau)
            grown = _nested(tree, _root(tree), (u, t), n)
            return np.exp(rt.pydt_log_prior(grown, alpha=alpha, beta=beta, c=c) - base - tau)

        tau_top = -np.log1p(-top)
        if u >= n:
            exact, _ = integrate.quad(density, tau_top, -np.log1p(-h[u]), epsabs=1e-13, limit=200)
        else:
            # Into a leaf the divergence time is exponential in tau with rate c w_1: integrate
            # to tau_top + 15 and add the exponential's tail, density / rate.
            rate = c * np.exp(gammaln(1 - beta) - gammaln(2 + alpha))
            exact, _ = integrate.quad(density, tau_top, tau_top + 15, epsabs=1e-13, limit=200)
            exact += density(tau_top + 15) / rate
        on_branch = mine & (where[:, 1] < h[u])
        assert on_branch.sum() == 4
        assert np.exp(log_w[on_branch]).sum() == pytest.approx(exact, rel=1e-6, abs=1e-12)
        total += exact
        # At the branch point u: a probability mass.
        at_node = mine & (where[:, 1] == h[u])
        if u >= n and alpha + len(tree.children[u]) * beta > 0:
            grown = _nested(tree, _root(tree), (u, float(h[u])), n)
            mass = np.exp(rt.pydt_log_prior(grown, alpha=alpha, beta=beta, c=c) - base)
            assert at_node.sum() == 1
            assert np.exp(log_w[at_node][0]) == pytest.approx(mass, rel=1e-9)
            total += mass
        else:
            assert at_node.sum() == 0
    assert total == pytest.approx(1.0, abs=1e-7)
    assert np.exp(log_w).sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize(("n", "d", "alpha", "beta", "c", "sigma2", "seed"), CASES)
def test_components_are_the_covariance_form_conditionals(n, d, alpha, beta, c, sigma2, seed):
    X, tree = rt.sample_pydt(n, d, alpha=alpha, beta=beta, c=c, sigma2=sigma2, random_state=seed)
    _, means, variances, where = predictive_components(X, tree, alpha, beta, c, sigma2, 2)
    h = np.asarray(tree.heights)
    cov = _covariance(tree)
    for (u, t), mean, var in zip(where, means, variances, strict=True):
        grown = rt.pydt.tree_from_nested(
            _nested(tree, _root(tree), (int(u), t), n), n + 1, leaf_time=1.0
        )
        full = _covariance(grown)
        k = full[n, :n]
        np.testing.assert_allclose(full[:n, :n], cov, atol=0)
        weights = np.linalg.solve(cov, k)
        np.testing.assert_allclose(mean, weights @ X, rtol=1e-9, atol=1e-9)
        assert var == pytest.approx(sigma2 * (1.0 - k @ weights), rel=1e-9, abs=1e-12)
        assert t <= h[int(u)]


@pytest.mark.parametrize(("alpha", "beta", "seed"), [(0.5, 0.2, 1), (0.0, 0.0, 4), (1.5, 0.6, 8)])
def test_density_integrates_to_one_in_one_dimension(alpha, beta, seed):
    X, tree = rt.sample_pydt(6, 1, alpha=alpha, beta=beta, c=1.0, sigma2=0.8, random_state=seed)
    log_w, means, variances, _ = predictive_components(X, tree, alpha, beta, 1.0, 0.8)

    def f(x: float) -> float:
        return float(np.exp(_mixture_log_density(np.array([[x]]), log_w, means, variances))[0])

    total, _ = integrate.quad(f, -30, 30, limit=400, points=sorted(means[:, 0]))
    assert total == pytest.approx(1.0, abs=1e-8)


def test_density_integrates_to_one_in_two_dimensions():
    X, tree = rt.sample_pydt(5, 2, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=2)
    log_w, means, variances, _ = predictive_components(X, tree, 0.5, 0.2, 1.0, 1.0)

    def f(y: float, x: float) -> float:
        return float(np.exp(_mixture_log_density(np.array([[x, y]]), log_w, means, variances))[0])

    total, _ = integrate.dblquad(f, -12, 12, -12, 12, epsabs=1e-9)
    assert total == pytest.approx(1.0, abs=1e-6)


def test_estimator_averages_the_trees_of_its_samples():
    X, _ = rt.sample_pydt(15, 2, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=3)
    est = rt.PitmanYorDiffusionTree(inference="mcmc", n_iter=30, thin=5, random_state=1).fit(X)
    Y = np.array([[0.0, 0.0], [1.0, -2.0], [5.0, 5.0]])
    # The model sees the rows centred and scaled; densities come back in X's units.
    center, scale = X.mean(axis=0), np.sqrt(X.var(axis=0).mean())
    Z, W = (X - center) / scale, (Y - center) / scale
    per_tree = []
    for tree, (alpha, beta, c, sigma2) in zip(
        est.samples_, est.sample_hyperparameters_, strict=True
    ):
        log_w, means, variances, _ = predictive_components(Z, tree, alpha, beta, c, sigma2)
        comp = np.exp(log_w)[None, :] * np.prod(
            np.exp(-((W[:, None, :] - means[None]) ** 2) / (2 * variances[None, :, None]))
            / np.sqrt(2 * np.pi * variances[None, :, None]),
            axis=2,
        )
        per_tree.append(comp.sum(axis=1) / scale**2)
    np.testing.assert_allclose(np.exp(est.score_samples(Y)), np.mean(per_tree, axis=0), rtol=1e-10)
    assert est.score(Y) == pytest.approx(np.mean(np.log(np.mean(per_tree, axis=0))))


def _standardized_binary() -> np.ndarray:
    B = (np.random.default_rng(0).random((60, 5)) < 0.5).astype(float)
    return (B - B.mean(axis=0)) / B.std(axis=0)


def test_divergence_times_that_round_to_one_keep_a_positive_variance():
    """Equal rows diverge just before t = 1; with a small divergence rate the new point's
    divergence time on their branches rounds to 1, and the component keeps the variance
    sigma2 (1 - t) computed from tau = -ln(1 - t), never 0: the density stays finite."""
    X = _standardized_binary()
    est = rt.PitmanYorDiffusionTree(random_state=0).fit(X)
    alpha, beta, c, sigma2 = est.sample_hyperparameters_[0]
    log_w, means, variances, where = predictive_components(
        X, est.samples_[0], alpha, beta, c, sigma2
    )
    assert np.any(where[:, 1] == 1.0)  # the case: times that round to 1
    assert np.all(variances > 0)
    np.testing.assert_allclose(np.exp(np.logaddexp.reduce(log_w)), 1.0, rtol=1e-12)
    assert np.all(np.isfinite(_mixture_log_density(X, log_w, means, variances)))


def test_standardized_binary_data_score_finitely():
    """Standardized 0/1 columns have many equal rows; the default fit scores them finitely."""
    X = _standardized_binary()
    est = rt.PitmanYorDiffusionTree(random_state=0).fit(X)
    assert np.all(np.isfinite(est.score_samples(X)))
    equal = np.array([[0.0, 1.0], [0.0, 1.0]])
    assert np.all(
        np.isfinite(rt.PitmanYorDiffusionTree(random_state=0).fit(equal).score_samples(equal))
    )


@pytest.mark.parametrize(("n", "d", "alpha", "beta", "c", "sigma2", "seed"), CASES)
def test_core_density_is_the_mixture_of_its_components(n, d, alpha, beta, c, sigma2, seed):
    """The core's density of new rows against the mixture's density computed in NumPy from
    the components, near the data and far from it."""
    X, tree = rt.sample_pydt(n, d, alpha=alpha, beta=beta, c=c, sigma2=sigma2, random_state=seed)
    predictor = rt.pydt._predictor(X, tree, alpha, beta, c, sigma2, 3)
    log_w, means, variances, _ = predictor.components()
    Y = np.random.default_rng(seed).normal(size=(25, d)) * np.array([[0.5], [3.0], [40.0]]).repeat(
        [10, 10, 5], axis=0
    )
    np.testing.assert_allclose(
        predictor.log_density(Y), _mixture_log_density(Y, log_w, means, variances), rtol=1e-12
    )


def test_estimator_scores_survive_pickling():
    import pickle

    X, _ = rt.sample_pydt(12, 2, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=5)
    est = rt.PitmanYorDiffusionTree(n_iter=10, random_state=0).fit(X)
    Y = X[:3] + 0.25
    before = est.score_samples(Y)  # builds the predictive mixtures
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.score_samples(Y), before)
    # A new fit replaces them.
    est.fit(X[::-1] * 2.0)
    assert not np.allclose(est.score_samples(Y), before)


def test_bad_new_rows_and_settings_are_named():
    X, tree = rt.sample_pydt(6, 2, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=1)
    with pytest.raises(rt.InvalidParameterError, match="n_points"):
        predictive_components(X, tree, 0.5, 0.2, 1.0, 1.0, n_points=0)
    with pytest.raises(rt.InvalidParameterError, match="sigma2"):
        predictive_components(X, tree, 0.5, 0.2, 1.0, -1.0)
    predictor = rt.pydt._predictor(X, tree, 0.5, 0.2, 1.0, 1.0, 3)
    with pytest.raises(rt.InvalidDataError, match="row 1, column 0"):
        predictor.log_density(np.array([[0.0, 0.0], [np.nan, 0.0]]))
    with pytest.raises(ValueError, match="2 columns"):
        predictor.log_density(np.zeros((1, 3)))
