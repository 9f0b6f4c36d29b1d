"""Kingman's coalescent with Brownian diffusion and missing entries.

With a diagonal covariance rate the features diffuse independently, so a missing entry is
integrated out by dropping its row from that feature's Gaussian: the leaves observing
feature j are jointly normal with covariance lambda_j (s0 + C), C the shared path lengths.
These tests check the message passing, the predictions and the flat root against that
covariance form, computed here with SciPy from the tree alone.
"""

from __future__ import annotations

import numpy as np
import pytest
import rosetree as rt
from scipy import stats

S0 = 0.8
INFERENCES = [
    "greedy-rate1",
    "greedy-maxprob",
    "greedy-minduration",
    "smc-priorprior",
    "smc-priorpost",
    "smc-postpost",
]


def shared_lengths(tree: rt.Tree) -> np.ndarray:
    """C[a, b] = t(lca(a, b)) - t(root); C[a, a] = -t(root) (leaves at 0)."""
    n, h, parent = tree.n_leaves, np.asarray(tree.heights), tree.parent

    def path(v: int) -> list[int]:
        out = [v]
        while parent[out[-1]] >= 0:
            out.append(int(parent[out[-1]]))
        return out

    paths = [path(a) for a in range(n)]
    c = np.empty((n, n))
    for a in range(n):
        for b in range(n):
            lca = next(v for v in paths[a] if v in paths[b])
            c[a, b] = h[lca] - h[tree.root]
    return c


def random_tree(n: int, seed: int) -> rt.Tree:
    """A coalescent-like random timed binary tree with distinct times."""
    rng = np.random.default_rng(seed)
    lineages: list = list(range(n))
    t = 0.0
    while len(lineages) > 1:
        t -= rng.exponential(1.0)
        a, b = sorted(rng.choice(len(lineages), 2, replace=False))
        merged = {"t": t, "children": [lineages[a], lineages[b]]}
        lineages = [v for k, v in enumerate(lineages) if k not in (a, b)] + [merged]
    return rt.coalescent.tree_from_nested(lineages[0], n)


def data(seed: int, n: int = 9, d: int = 3, p_missing: float = 0.25) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 2.0
    X[rng.random(X.shape) < p_missing] = np.nan
    X[0] = np.abs(X[0])  # row 0 complete: every column has an observed value
    return X


def covariance_log_likelihood(X: np.ndarray, c: np.ndarray, lam: np.ndarray, s0: float) -> float:
    total = 0.0
    for j in range(X.shape[1]):
        rows = ~np.isnan(X[:, j])
        cov = lam[j] * (s0 + c[np.ix_(rows, rows)])
        total += stats.multivariate_normal(np.zeros(rows.sum()), cov).logpdf(X[rows, j])
    return total


@pytest.mark.parametrize("inference", INFERENCES)
def test_every_inference_fits_and_reports_the_given_tree_value(inference):
    X = data(1)
    lam = np.array([0.7, 1.3, 2.0])
    est = rt.KingmanCoalescent(
        noise=0.0, Lambda=lam, inference=inference, n_particles=8, random_state=3
    )
    est.fit(X)
    again = rt.coalescent_log_joint(X, est.tree_, Lambda=lam)
    assert est.log_joint_ == pytest.approx(again, rel=1e-12, abs=1e-9)
    assert np.isfinite(est.log_joint_)
    assert np.isfinite(est.score_samples(np.nan_to_num(X)[:3])).all()
    if inference.startswith("smc"):
        assert np.isfinite(est.log_marginal_)
        same = rt.KingmanCoalescent(
            noise=0.0, Lambda=lam, inference=inference, n_particles=8, random_state=3, n_jobs=1
        ).fit(X)
        assert same.log_marginal_ == est.log_marginal_


def test_log_joint_with_holes_matches_the_covariance_form():
    X = data(2, n=8)
    lam = np.array([0.5, 1.0, 3.0])
    complete = np.where(np.isnan(X), 1.25, X)
    for seed in range(3):
        tree = random_tree(8, seed)
        c = shared_lengths(tree)
        got = rt.coalescent_log_joint(X, tree, Lambda=lam, root=S0) - rt.coalescent_log_joint(
            complete, tree, Lambda=lam, root=S0
        )
        want = covariance_log_likelihood(X, c, lam, S0) - covariance_log_likelihood(
            complete, c, lam, S0
        )
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9)


def conditional(X_full, c, lam, s0, i, j, missing):
    """Mean and variance of x_ij given the observed entries of column j: the Schur
    complement for a proper root N(0, s0 lam_j); for the flat root (s0 None) the root value
    is a flat unknown mean, estimated by generalised least squares (universal kriging)."""
    rows = ~missing[:, j]
    c_oo, k, x_o = c[np.ix_(rows, rows)], c[i, rows], X_full[rows, j]
    if s0 is not None:
        c_oo, k, c_ii = c_oo + s0, k + s0, c[i, i] + s0
        inv_k = np.linalg.solve(c_oo, k)
        return inv_k @ x_o, lam[j] * (c_ii - k @ inv_k)
    ones = np.ones(rows.sum())
    inv_k, inv_1 = np.linalg.solve(c_oo, k), np.linalg.solve(c_oo, ones)
    mu = (inv_1 @ x_o) / (inv_1 @ ones)
    mean = mu + inv_k @ (x_o - mu * ones)
    var = c[i, i] - k @ inv_k + (1.0 - k @ inv_1) ** 2 / (inv_1 @ ones)
    return mean, lam[j] * var


@pytest.mark.parametrize("root", [S0, "flat"])
def test_predictions_of_missing_entries_are_the_gaussian_conditionals(root):
    truth = data(4, n=10, p_missing=0.0)
    X = truth.copy()
    cells = [(2, 0), (5, 1), (7, 2), (9, 0)]
    for i, j in cells:
        X[i, j] = np.nan
    lam = np.array([0.6, 1.1, 2.5])
    est = rt.KingmanCoalescent(noise=0.0, Lambda=lam, root=root).fit(X)
    c = shared_lengths(est.tree_)
    s0 = None if root == "flat" else S0
    missing = np.isnan(X)
    imputed = est.impute()
    want_lp = 0.0
    for i, j in cells:
        mean, var = conditional(truth, c, lam, s0, i, j, missing)
        assert imputed[i, j] == pytest.approx(mean, rel=1e-9, abs=1e-9)
        want_lp += stats.norm(mean, np.sqrt(var)).logpdf(truth[i, j])
    rows, cols = zip(*cells, strict=True)
    got_lp = est.log_predictive_missing(truth, rows, cols)
    assert got_lp == pytest.approx(want_lp, rel=1e-9)
    assert est.log_predictive_missing(truth) == pytest.approx(got_lp, rel=1e-12)
    assert np.array_equal(imputed[~missing], X[~missing])


def test_smc_predictions_mix_the_particles():
    truth = data(5, n=7, p_missing=0.0)
    X = truth.copy()
    X[3, 1] = np.nan
    est = rt.KingmanCoalescent(
        noise=0.0, inference="smc-postpost", n_particles=6, random_state=1
    ).fit(X)
    weights = np.exp(est.particle_log_weights_)
    densities = []
    for tree in est.particles_:
        single = rt.KingmanCoalescent(noise=0.0).fit(X)  # a fitted estimator to hold the tree
        single.tree_, single.particles_, single.particle_log_weights_ = tree, None, None
        densities.append(np.exp(single.log_predictive_missing(truth, [3], [1])))
    want = np.log(np.dot(weights, densities))
    assert est.log_predictive_missing(truth, [3], [1]) == pytest.approx(want, rel=1e-10)


def test_what_missing_entries_cannot_do():
    X = data(6)
    with pytest.raises(rt.InvalidParameterError) as info:
        rt.KingmanCoalescent(noise=0.0, Lambda=np.eye(3) + 0.1).fit(X)
    assert info.value.parameter == "Lambda"
    with pytest.raises(rt.InvalidParameterError) as info:
        rt.KingmanCoalescent(noise=0.0, learn_hyperparameters=True).fit(X)
    assert info.value.parameter == "learn_hyperparameters"
    X[:, 2] = np.nan
    with pytest.raises(rt.InvalidDataError, match="column 2"):
        rt.KingmanCoalescent(noise=0.0).fit(X)
    # A proper root gives the empty column a proper predictive: the fit goes ahead.
    assert np.isfinite(rt.KingmanCoalescent(noise=0.0, root=1.0).fit(X).log_joint_)


def test_a_point_mass_prediction_is_minus_infinity_not_nan():
    # A row with nothing observed joins Greedy-Rate1's tree at time 0 (nothing delays it),
    # so its entry's posterior is its sibling's value exactly.
    X = np.array([[0.0], [1.0], [np.nan], [3.0]])
    est = rt.KingmanCoalescent(noise=0.0).fit(X)
    truth = np.array([[0.0], [1.0], [2.0], [3.0]])
    assert est.log_predictive_missing(truth) == -np.inf
    sibling = est.impute()[2, 0]
    assert sibling in (0.0, 1.0, 3.0)
    assert est.log_predictive_missing(np.where(np.isnan(X), sibling, X)) == np.inf
