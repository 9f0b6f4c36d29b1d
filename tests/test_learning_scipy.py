"""The core's hyperparameter learner against SciPy's L-BFGS-B on the same tree.

For one tree held fixed (the learner's tree search hands it back), the learner's optimum of
ln p(D | T) must be at least SciPy's, whose objective and chain rule are written here from
the public ``evidence_gradient`` alone: an independent parametrization of every built-in
model (the same box, log or logit scales), and an independent optimiser.
"""

import numpy as np
import pytest
import rosetree as rt
from scipy.optimize import minimize
from scipy.special import expit, logit

BOUND = 12.0


def real_data(seed, n=24, d=2):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(3, d))
    return centres[np.arange(n) % 3] + rng.normal(scale=0.7, size=(n, d))


def binary_data(seed, n=24, d=5):
    rng = np.random.default_rng(seed)
    protos = rng.random((3, d)) < 0.5
    return (protos[np.arange(n) % 3] ^ (rng.random((n, d)) < 0.15)).astype(float)


def count_data(seed, n=18, d=4):
    rng = np.random.default_rng(seed)
    rates = rng.gamma(2.0, 2.0, size=(3, d))
    return rng.poisson(rates[np.arange(n) % 3]).astype(float)


class Map:
    """An unconstrained vector ``u`` (with a box) for one model family around a start."""

    def __init__(self, model, X, mixing, gamma, dp_alpha):
        self.mixing, self.gamma, self.dp_alpha = mixing, gamma, dp_alpha
        self.kind = type(model).__name__
        self.d = X.shape[1]
        r = rt.BayesianRoseTree(model, mixing=mixing, gamma=gamma, dp_alpha=dp_alpha).fit(X)
        self.start = _explicit(r)

    def theta0(self):
        return np.log(self.dp_alpha) if self.mixing == "dp" else logit(self.gamma)

    def mix(self, t):
        return (
            {"gamma": self.gamma, "dp_alpha": np.exp(t)}
            if self.mixing == "dp"
            else {
                "gamma": expit(t),
                "dp_alpha": self.dp_alpha,
            }
        )

    def mix_chain(self, t, g):
        if self.mixing == "dp":
            return g * np.exp(t)
        p = expit(t)
        return g * p * (1 - p)


def _explicit(est):
    from rosetree._streaming import explicit_model

    return explicit_model(est._fit)


class BetaBernoulliMap(Map):
    def u0(self):
        m = self.start
        return np.concatenate(
            [np.log(np.broadcast_to(m.alpha, self.d)), np.log(np.broadcast_to(m.beta, self.d))]
        )

    def bounds(self):
        return [(-BOUND, BOUND)] * (2 * self.d)

    def model(self, u):
        return rt.BetaBernoulli(alpha=np.exp(u[: self.d]), beta=np.exp(u[self.d :]))

    def chain(self, u, g):
        return np.concatenate([g.model["alpha"], g.model["beta"]]) * np.exp(u)


class DirichletMap(Map):
    def u0(self):
        return np.log(np.broadcast_to(self.start.alpha, self.d)).astype(float)

    def bounds(self):
        return [(-BOUND, BOUND)] * self.d

    def model(self, u):
        return rt.DirichletMultinomial(alpha=np.exp(u))

    def chain(self, u, g):
        return g.model["alpha"] * np.exp(u)


class WishartMap(Map):
    def u0(self):
        m = self.start
        return np.array([np.log(m.kappa0), np.log(m.nu0 - self.d + 1), 0.0])

    def bounds(self):
        return [(-BOUND, BOUND)] * 3

    def model(self, u):
        m = self.start
        return rt.NormalInverseWishart(
            mu0=m.mu0,
            kappa0=np.exp(u[0]),
            nu0=np.exp(u[1]) + self.d - 1,
            psi0=np.asarray(m.psi0) * np.exp(u[2]),
        )

    def chain(self, u, g):
        # psi0_scale is d ln p / d ln c of psi0 -> c psi0, at the model's own psi0.
        return np.array(
            [
                g.model["kappa0"][0] * np.exp(u[0]),
                g.model["nu0"][0] * np.exp(u[1]),
                g.model["psi0_scale"][0],
            ]
        )


class NormalGammaMap(Map):
    """Raw ``m0`` within 12 prior standard deviations of its start, the rest on log scales."""

    def u0(self):
        m = self.start
        return np.concatenate(
            [
                np.asarray(m.m0, float),
                [np.log(m.kappa0), np.log(m.a0)],
                np.log(np.asarray(m.b0, float)),
            ]
        )

    def bounds(self):
        m = self.start
        unit = np.sqrt(np.asarray(m.b0) / m.a0)
        b0 = np.log(np.asarray(m.b0, float))
        return (
            [(c - BOUND * s, c + BOUND * s) for c, s in zip(m.m0, unit, strict=True)]
            + [(-BOUND, BOUND)] * 2
            + [(b - BOUND, b + BOUND) for b in b0]
        )

    def model(self, u):
        d = self.d
        return rt.NormalGamma(
            m0=u[:d], kappa0=np.exp(u[d]), a0=np.exp(u[d + 1]), b0=np.exp(u[d + 2 :])
        )

    def chain(self, u, g):
        d = self.d
        return np.concatenate(
            [
                g.model["m0"],
                [g.model["kappa0"][0] * np.exp(u[d]), g.model["a0"][0] * np.exp(u[d + 1])],
                g.model["b0"] * np.exp(u[d + 2 :]),
            ]
        )


CASES = [
    ("bernoulli", rt.BetaBernoulli(), BetaBernoulliMap, "brt", binary_data),
    (
        "dirichlet",
        rt.DirichletMultinomial(alpha=[0.7, 1.0, 1.5, 2.0]),
        DirichletMap,
        "gamma",
        count_data,
    ),
    ("wishart", rt.NormalInverseWishart(), WishartMap, "dp", real_data),
    ("normal_gamma", rt.NormalGamma(), NormalGammaMap, "brt", real_data),
]


@pytest.mark.parametrize(
    ("name", "model", "mapping", "mixing", "data"), CASES, ids=[c[0] for c in CASES]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_the_learner_reaches_scipys_optimum_on_a_fixed_tree(
    name, model, mapping, mixing, data, seed
):
    X = data(seed)
    gamma, dp_alpha = 0.4, 1.5
    c = mapping(model, X, mixing, gamma, dp_alpha)
    start = c.start
    tree = rt.BayesianRoseTree(start, mixing=mixing, gamma=gamma, dp_alpha=dp_alpha).fit(X).tree_

    def same_tree(X_, m, g, a):
        return rt.evaluate_tree(X_, tree, model=m, mixing=mixing, gamma=g, dp_alpha=a)

    ours = rt.learn_hyperparameters(
        X, model=start, mixing=mixing, gamma=gamma, dp_alpha=dp_alpha, fit_tree=same_tree
    )
    assert ours.tree.to_nested() == tree.to_nested()

    def negative(v):
        u, t = v[:-1], v[-1]
        g = rt.evidence_gradient(X, tree, model=c.model(u), mixing=mixing, **c.mix(t))
        return -g.log_evidence, -np.append(c.chain(u, g), c.mix_chain(t, g.mixing))

    v0 = np.append(c.u0(), c.theta0())
    res = minimize(negative, v0, jac=True, method="L-BFGS-B", bounds=[*c.bounds(), (-BOUND, BOUND)])
    scipy_best = -res.fun
    assert scipy_best > tree.log_evidence  # SciPy moved, so the comparison means something
    assert ours.log_evidence >= scipy_best - 1e-6 * max(1.0, abs(scipy_best)), (
        ours.log_evidence,
        scipy_best,
    )
    # The reported evidence is the tree's under the learnt hyperparameters.
    again = rt.log_evidence(
        X, ours.tree, model=ours.model, mixing=mixing, gamma=ours.gamma, dp_alpha=ours.dp_alpha
    )
    assert again == pytest.approx(ours.log_evidence, rel=1e-12)


def test_learning_is_the_same_for_any_thread_count():
    X = binary_data(3, n=40, d=6)
    fits = [
        rt.BayesianRoseTree(
            learn_hyperparameters=True, n_restarts=2, random_state=4, n_jobs=n_jobs
        ).fit(X)
        for n_jobs in (1, 2, None)
    ]
    for est in fits[1:]:
        assert est.evidence_trace_ == fits[0].evidence_trace_
        assert est.restart_log_evidences_ == fits[0].restart_log_evidences_
        assert est.tree_.to_nested() == fits[0].tree_.to_nested()
        np.testing.assert_array_equal(est.model_.alpha, fits[0].model_.alpha)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1.0}, "tol"),
        ({"tol": float("inf")}, "tol"),
        ({"n_restarts": -2}, "n_restarts"),
        ({"fit_tree": lambda X, m, g, a: "not a tree"}, "fit_tree"),
    ],
)
def test_bad_learning_parameters_are_named(kw, name):
    X = binary_data(0, n=8, d=3)
    with pytest.raises(rt.InvalidParameterError) as err:
        rt.learn_hyperparameters(X, **kw)
    assert err.value.parameter == name


def test_a_user_search_error_passes_through_unchanged():
    X = binary_data(0, n=8, d=3)

    class Boom(Exception):
        pass

    def fit_tree(X, m, g, a):
        raise Boom("from the user's search")

    with pytest.raises(Boom, match="user's search"):
        rt.learn_hyperparameters(X, fit_tree=fit_tree)
