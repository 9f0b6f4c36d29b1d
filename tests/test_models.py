"""Cluster marginal likelihoods against independent computations (SciPy, quadrature)."""

import numpy as np
import pytest
import rosetree as rt
from scipy import integrate, special, stats


def rng(seed=0):
    return np.random.default_rng(seed)


class TestBetaBernoulli:
    def test_matches_betaln_closed_form(self):
        X = (rng(1).random((9, 5)) < 0.4).astype(float)
        a = np.array([0.5, 1.0, 2.0, 0.3, 4.0])
        b = np.array([1.5, 1.0, 0.7, 2.0, 0.2])
        k, n = X.sum(0), X.shape[0]
        expected = np.sum(special.betaln(a + k, b + n - k) - special.betaln(a, b))
        assert rt.BetaBernoulli(alpha=a, beta=b).log_marginal(X) == pytest.approx(
            expected, rel=1e-12
        )

    def test_missing_entries_are_marginalised(self):
        X = np.array([[1, 0, np.nan], [1, np.nan, 1], [0, 1, 1], [np.nan, 1, 1]], dtype=float)
        model = rt.BetaBernoulli(alpha=0.8, beta=1.7)
        expected = 0.0
        for j in range(3):
            col = X[:, j][~np.isnan(X[:, j])]
            expected += special.betaln(
                0.8 + col.sum(), 1.7 + len(col) - col.sum()
            ) - special.betaln(0.8, 1.7)
        assert model.log_marginal(X) == pytest.approx(expected, rel=1e-12)

    def test_matches_numerical_integration(self):
        x = np.array([1, 1, 0, 1, 0, 1, 1], dtype=float)[:, None]
        a, b = 2.0, 3.0
        k, n = x.sum(), len(x)
        value, _ = integrate.quad(
            lambda t: t**k * (1 - t) ** (n - k) * stats.beta.pdf(t, a, b), 0, 1
        )
        assert rt.BetaBernoulli(alpha=a, beta=b).log_marginal(x) == pytest.approx(
            np.log(value), rel=1e-9
        )

    @pytest.mark.parametrize("bad", [0.5, 2.0, -1.0, np.inf])
    def test_non_binary_values_name_row_and_column(self, bad):
        X = np.zeros((4, 3))
        X[2, 1] = bad
        with pytest.raises(rt.InvalidDataError, match="row 2") as err:
            rt.BayesianRoseTree(model=rt.BetaBernoulli()).fit(X)
        assert err.value.row == 2
        assert err.value.column == 1


class TestNormalInverseWishart:
    def _params(self, d, seed=0):
        r = rng(seed)
        A = r.normal(size=(d, d))
        return dict(mu0=r.normal(size=d), kappa0=0.7, nu0=d + 1.5, psi0=A @ A.T + d * np.eye(d))

    @pytest.mark.parametrize("d", [1, 2, 3])
    def test_matches_sequential_student_t_predictives(self, d):
        p = self._params(d, seed=d)
        X = rng(10 + d).normal(size=(6, d)) * 1.5 + 0.3
        mu, kappa, nu, psi = p["mu0"].copy(), p["kappa0"], p["nu0"], p["psi0"].copy()
        total = 0.0
        for x in X:
            df = nu - d + 1
            shape = psi * (kappa + 1) / (kappa * df)
            total += stats.multivariate_t(loc=mu, shape=shape, df=df).logpdf(x)
            # Posterior update by one observation.
            dev = x - mu
            psi = psi + kappa / (kappa + 1) * np.outer(dev, dev)
            mu = (kappa * mu + x) / (kappa + 1)
            kappa, nu = kappa + 1, nu + 1
        got = rt.NormalInverseWishart(**p).log_marginal(X)
        assert got == pytest.approx(total, rel=1e-10)

    def test_one_dimension_matches_normal_inverse_gamma(self):
        x = np.array([0.3, -1.2, 2.2, 0.9, 0.1])
        mu0, k0, nu0, psi0 = 0.5, 2.0, 3.0, 1.7
        n, xbar = len(x), x.mean()
        kn, nun = k0 + n, nu0 + n
        psin = psi0 + ((x - xbar) ** 2).sum() + k0 * n / kn * (xbar - mu0) ** 2
        # IW(psi, nu) in 1-D is inverse-gamma(nu/2, psi/2).
        expected = (
            special.gammaln(nun / 2)
            - special.gammaln(nu0 / 2)
            + nu0 / 2 * np.log(psi0 / 2)
            - nun / 2 * np.log(psin / 2)
            + 0.5 * np.log(k0 / kn)
            - n / 2 * np.log(2 * np.pi)
        )
        model = rt.NormalInverseWishart(mu0=[mu0], kappa0=k0, nu0=nu0, psi0=[[psi0]])
        assert model.log_marginal(x[:, None]) == pytest.approx(expected, rel=1e-12)

    def test_data_driven_defaults_fit(self):
        X = rng(3).normal(size=(30, 4))
        est = rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
        assert np.isfinite(est.log_evidence_)

    def test_missing_values_rejected(self):
        X = rng(0).normal(size=(5, 2))
        X[3, 0] = np.nan
        with pytest.raises(rt.InvalidDataError) as err:
            rt.BayesianRoseTree(model=rt.NormalInverseWishart(psi0=np.eye(2), mu0=[0, 0])).fit(X)
        assert err.value.row == 3

    def test_psi0_not_positive_definite(self):
        X = rng(0).normal(size=(5, 2))
        bad = np.array([[1.0, 2.0], [2.0, 1.0]])
        with pytest.raises(rt.InvalidParameterError, match="psi0"):
            rt.BayesianRoseTree(model=rt.NormalInverseWishart(psi0=bad)).fit(X)

    @pytest.mark.parametrize(("kw", "name"), [({"kappa0": 0.0}, "kappa0"), ({"nu0": 0.5}, "nu0")])
    def test_bad_scalars(self, kw, name):
        X = rng(0).normal(size=(5, 2))
        with pytest.raises(rt.InvalidParameterError, match=name):
            rt.BayesianRoseTree(model=rt.NormalInverseWishart(**kw)).fit(X)


class TestDirichletMultinomial:
    def test_single_row_with_coefficient_is_the_scipy_pmf(self):
        x = np.array([3.0, 0.0, 2.0, 5.0])
        alpha = np.array([0.5, 1.0, 2.0, 0.7])
        expected = stats.dirichlet_multinomial(alpha, x.sum()).logpmf(x)
        model = rt.DirichletMultinomial(alpha=alpha, multinomial_coefficient=True)
        assert model.log_marginal(x[None, :]) == pytest.approx(expected, rel=1e-12)

    def test_rows_chain_through_posterior_predictives(self):
        X = rng(4).integers(0, 5, size=(5, 3)).astype(float)
        alpha = np.array([0.4, 1.3, 2.0])
        total, post = 0.0, alpha.copy()
        for x in X:
            total += stats.dirichlet_multinomial(post, x.sum()).logpmf(x)
            post = post + x
        model = rt.DirichletMultinomial(alpha=alpha, multinomial_coefficient=True)
        assert model.log_marginal(X) == pytest.approx(total, rel=1e-12)

    def test_coefficient_is_a_per_row_constant(self):
        X = rng(5).integers(0, 4, size=(6, 3)).astype(float)
        with_c = rt.DirichletMultinomial(multinomial_coefficient=True).log_marginal(X)
        without = rt.DirichletMultinomial().log_marginal(X)
        coef = sum(special.gammaln(x.sum() + 1) - special.gammaln(x + 1).sum() for x in X)
        assert with_c - without == pytest.approx(coef, rel=1e-12)

    @pytest.mark.parametrize(("bad", "what"), [(-1.0, "negative"), (1.5, "integer")])
    def test_bad_counts(self, bad, what):
        X = np.ones((4, 3))
        X[1, 2] = bad
        with pytest.raises(rt.InvalidDataError, match=what) as err:
            rt.BayesianRoseTree(model=rt.DirichletMultinomial()).fit(X)
        assert (err.value.row, err.value.column) == (1, 2)


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (rt.BetaBernoulli(alpha=0.0), "alpha"),
        (rt.BetaBernoulli(beta=-1.0), "beta"),
        (rt.BetaBernoulli(alpha=[1.0, 2.0]), "alpha"),
        (rt.BetaBernoulli(alpha=np.nan), "alpha"),
        (rt.DirichletMultinomial(alpha=-2.0), "alpha"),
    ],
)
def test_invalid_hyperparameters_name_the_parameter(model, name):
    X = np.eye(3)
    with pytest.raises(rt.InvalidParameterError, match=name) as err:
        rt.BayesianRoseTree(model=model).fit(X)
    assert err.value.parameter == name


@pytest.mark.parametrize("mixing", ["brt", "gamma", "dp"])
@pytest.mark.parametrize("binary", [False, True])
def test_optimal_tree_of_data_the_model_finds_impossible(mixing, binary):
    # ln f = -inf for every cluster: every tree has ln p(D|T) = -inf. The exhaustive search
    # used to find no best split and recursed until the stack overflowed (a segfault).
    class Impossible(rt.ClusterModel):
        def log_marginal(self, X):
            return -np.inf

    tree = rt.optimal_tree(np.zeros((4, 1)), model=Impossible(), mixing=mixing, binary=binary)
    assert tree.n_leaves == 4
    assert tree.log_evidence == -np.inf
