"""Hyperparameter learning of Kingman's coalescent (§4.4): each M-step against a numerical
maximiser of ln p(x, pi) + ln p(Lambda) evaluated by the upward pass, the objective's trace,
and recovery of a known rate."""

from __future__ import annotations

import numpy as np
import pytest
import rosetree as rt
from rosetree import _core
from scipy import optimize, stats


def lambda_map(X, tree, lam, prior=None, likelihood="brownian", root=None, noise=0.0):
    """The core's M-step: Lambda's posterior mode given the tree."""
    if prior is not None:
        prior = (float(prior[0]), np.asarray(prior[1], dtype=float))
    model = _core.CoalescentModel(
        X, likelihood=likelihood, lambda_=np.asarray(lam, dtype=float), root=root, noise=noise
    )
    return model.lambda_map(X, tree._structure, prior=prior)


def kingman_brownian(n, d, lam, rng, with_tree=False):
    """Rows from Brownian motion with Lambda = lam * I on a Kingman n-coalescent tree.

    With ``with_tree``, also the tree as nested dicts.
    """
    alive = [(0.0, np.zeros((1, d)), [i]) for i in range(n)]
    nodes = list(range(n))
    t = 0.0
    while len(alive) > 1:
        m = len(alive)
        t -= rng.exponential(2.0 / (m * (m - 1)))
        a, b = sorted(rng.choice(m, size=2, replace=False))
        parts, leaves = [], []
        for k in (a, b):
            tk, offsets, ids = alive[k]
            parts.append(offsets + rng.normal(scale=np.sqrt(lam * (tk - t)), size=(1, d)))
            leaves += ids
        alive = [c for k, c in enumerate(alive) if k not in (a, b)]
        alive.append((t, np.vstack(parts), leaves))
        node = {"t": t, "children": [nodes[a], nodes[b]]}
        nodes = [c for k, c in enumerate(nodes) if k not in (a, b)] + [node]
    X = np.empty((n, d))
    X[alive[0][2]] = alive[0][1]
    return (X, nodes[0]) if with_tree else X


def objective(X, tree, lam, log_prior, root="flat"):
    return rt.coalescent_log_joint(X, tree, Lambda=lam, root=root) + log_prior(lam)


@pytest.mark.parametrize("root", ["flat", 2.0])
def test_brownian_map_maximises_the_objective_for_each_shape(root):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2)) * [1.0, 3.0] + rng.normal(size=(12, 1))
    tree = rt.KingmanCoalescent(noise=0.0, Lambda=[1.0, 4.0], root=root).fit(X).tree_
    s0 = None if root == "flat" else root
    d = 2
    # Isotropic: InvGamma(d nu / 2, psi / 2) on lambda; the default nu = 2, psi = (2d + 2)
    # lambda_0 has its mode at lambda_0.
    lam0 = np.asarray(1.5)
    nu, psi = 2.0, (2 * d + 2) * 1.5
    got = float(lambda_map(X, tree, lam0, root=s0))
    prior = lambda v: stats.invgamma.logpdf(v, d * nu / 2, scale=float(psi) / 2)  # noqa: E731
    best = optimize.minimize_scalar(
        lambda u: -objective(X, tree, np.exp(u), prior, root),
        bounds=(-5, 5),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert got == pytest.approx(np.exp(best.x), rel=1e-6)
    # Diagonal: InvGamma(nu / 2, psi_j / 2) per feature.
    lam0 = np.array([1.0, 2.0])
    nu, psi = 3.0, np.array([2.0, 5.0])
    got = lambda_map(X, tree, lam0, (nu, psi), root=s0)
    prior = lambda v: stats.invgamma.logpdf(v, nu / 2, scale=psi / 2).sum()  # noqa: E731
    best = optimize.minimize(
        lambda u: -objective(X, tree, np.exp(u), prior, root),
        np.zeros(2),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 4000},
    )
    np.testing.assert_allclose(got, np.exp(best.x), rtol=1e-5)
    # Full: IW(nu, Psi), over the Cholesky factor.
    lam0 = np.array([[1.0, 0.3], [0.3, 2.0]])
    nu, psi = d + 1.0, (2 * d + 2) * lam0  # the default
    got = lambda_map(X, tree, lam0, root=s0)

    def full(p):
        low = np.array([[np.exp(p[0]), 0.0], [p[1], np.exp(p[2])]])
        return low @ low.T

    prior = lambda v: stats.invwishart.logpdf(v, df=nu, scale=psi)  # noqa: E731
    best = optimize.minimize(
        lambda p: -objective(X, tree, full(p), prior, root),
        np.zeros(3),
        method="Nelder-Mead",
        options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 8000},
    )
    np.testing.assert_allclose(got, full(best.x), rtol=1e-4, atol=1e-6)


def test_rate_map_beats_a_grid_of_rates_for_every_feature():
    rng = np.random.default_rng(1)
    X = rng.integers(0, 3, size=(14, 3)).astype(float)
    X[:7, 0] = 0.0  # a feature with structure
    X[2, 1] = np.nan
    tree = rt.KingmanCoalescent(noise=0.0, likelihood="multinomial").fit(X).tree_
    lam0 = np.array([1.0, 0.5, 2.0])
    a, b = 2.0, 1.0 / lam0  # the default, whose mode is lam0
    got = lambda_map(X, tree, lam0, likelihood="multinomial")

    def j(rates):
        lp = stats.gamma.logpdf(rates, a, scale=1.0 / b).sum()
        return rt.coalescent_log_joint(X, tree, likelihood="multinomial", Lambda=rates) + lp

    grid = np.exp(np.linspace(-6, 4, 301))
    for f in range(3):
        values = []
        for r in grid:
            rates = got.copy()
            rates[f] = r
            values.append(j(rates))
        assert j(got) >= max(values) - 1e-9
        # and the grid's best is next to ours
        assert abs(np.log(grid[int(np.argmax(values))]) - np.log(got[f])) <= 10 / 300 + 1e-9


def test_shared_rate_maximises_the_summed_objective():
    rng = np.random.default_rng(2)
    X = rng.integers(0, 2, size=(10, 4)).astype(float)
    tree = rt.KingmanCoalescent(noise=0.0, likelihood="multinomial").fit(X).tree_
    got = float(lambda_map(X, tree, 1.0, (3.0, 2.0), likelihood="multinomial"))
    best = optimize.minimize_scalar(
        lambda u: (
            -(
                rt.coalescent_log_joint(X, tree, likelihood="multinomial", Lambda=np.exp(u))
                + stats.gamma.logpdf(np.exp(u), 3.0, scale=0.5)
            )
        ),
        bounds=(-8, 5),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert got == pytest.approx(np.exp(best.x), rel=1e-4)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    ("likelihood", "lam", "inference"),
    [
        ("brownian", 1.0, "greedy-rate1"),
        ("brownian", np.ones(3), "greedy-rate1"),
        ("brownian", np.eye(3), "greedy-rate1"),
        ("brownian", 1.0, "smc-priorpost"),
        ("multinomial", 1.0, "greedy-rate1"),
        ("multinomial", np.ones(3), "greedy-rate1"),
    ],
)
def test_the_objective_never_decreases_and_matches_the_tree(seed, likelihood, lam, inference):
    rng = np.random.default_rng(seed)
    if likelihood == "brownian":
        X = kingman_brownian(25, 3, 3.0, rng)
    else:
        X = rng.integers(0, 3, size=(25, 3)).astype(float)
    est = rt.KingmanCoalescent(
        noise=0.0,
        likelihood=likelihood,
        Lambda=lam,
        inference=inference,
        n_particles=5,
        learn_hyperparameters=True,
        random_state=seed,
    ).fit(X)
    trace = est.hyper_trace_
    assert len(trace) >= 2 and np.all(np.diff(trace) >= 0) and trace[-1] > trace[0]
    assert np.shape(est.Lambda_) == np.shape(lam)
    joint = rt.coalescent_log_joint(X, est.tree_, likelihood=likelihood, Lambda=est.Lambda_)
    assert est.log_joint_ == pytest.approx(joint, rel=1e-12)
    if inference == "greedy-rate1":  # the last accepted point is the fitted one
        lam_ = np.asarray(est.Lambda_)
        # The default priors (d = 3), whose modes are the starting values (all ones).
        if likelihood == "multinomial":
            prior = stats.gamma.logpdf(lam_, 2.0, scale=1.0).sum()
        elif lam_.ndim == 0:
            prior = stats.invgamma.logpdf(lam_, 3 * 2.0 / 2, scale=8.0 / 2)
        elif lam_.ndim == 1:
            prior = stats.invgamma.logpdf(lam_, 2.0 / 2, scale=4.0 / 2).sum()
        else:
            prior = stats.invwishart.logpdf(lam_, df=4.0, scale=8.0 * np.eye(3))
        assert trace[-1] == pytest.approx(joint + prior, rel=1e-12)


def test_the_m_step_recovers_a_known_rate_from_the_true_tree():
    # 199 contrasts in 5 dimensions: the estimate's relative sd is about (2 / 995)^(1/2).
    X, nested = kingman_brownian(200, 5, 4.0, np.random.default_rng(3), with_tree=True)
    tree = rt.coalescent.tree_from_nested(nested, 200)
    for lam0 in (np.asarray(1.0), np.ones(5), np.eye(5)):
        got = lambda_map(X, tree, lam0)
        diagonal = np.diag(got) if got.ndim == 2 else np.atleast_1d(got)
        assert np.all(np.abs(diagonal / 4.0 - 1) < 0.2), diagonal
    X = kingman_brownian(60, 2, 4.0, np.random.default_rng(3))
    assert rt.KingmanCoalescent(noise=0.0, Lambda=1.0).fit(X).Lambda_ == 1.0
    assert rt.KingmanCoalescent(noise=0.0, Lambda=1.0).fit(X).hyper_trace_ is None


@pytest.mark.parametrize(
    ("likelihood", "lam", "prior", "match"),
    [
        ("brownian", np.eye(3), (1.0, np.eye(3)), "nu must be > d - 1"),
        ("brownian", np.eye(3), (5.0, -np.eye(3)), "positive definite"),
        ("brownian", np.eye(3), (5.0, np.ones(3)), "shape of Lambda"),
        ("brownian", 1.0, (0.0, 1.0), "nu must be > 0"),
        ("brownian", 1.0, "weak", "must be a pair"),
        ("multinomial", 1.0, (0.0, 1.0), "shape > 0"),
        ("multinomial", 1.0, (2.0, [1.0, 2.0]), "rate must be a number"),
    ],
)
def test_bad_priors_are_rejected(likelihood, lam, prior, match):
    X = np.random.default_rng(4).integers(0, 2, size=(6, 3)).astype(float)
    est = rt.KingmanCoalescent(
        noise=0.0, likelihood=likelihood, Lambda=lam, learn_hyperparameters=True, Lambda_prior=prior
    )
    with pytest.raises(rt.InvalidParameterError, match=match) as info:
        est.fit(X)
    assert info.value.parameter == "Lambda_prior"


@pytest.mark.parametrize(("name", "value"), [("hyper_iter", 0), ("learn_hyperparameters", "yes")])
def test_bad_learning_options_are_rejected(name, value):
    X = np.random.default_rng(5).normal(size=(5, 2))
    with pytest.raises(rt.InvalidParameterError, match=name):
        rt.KingmanCoalescent(noise=0.0, **{name: value}).fit(X)
