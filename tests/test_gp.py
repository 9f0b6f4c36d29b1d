"""Gaussian-process expert clusters (BRT eqs 1.20–1.21) against independent computations."""

import math

import numpy as np
import pytest
import rosetree as rt
from scipy import integrate, stats


def rng(seed=0):
    return np.random.default_rng(seed)


def curve_data(n=10, d=1, seed=0):
    """Rows (x, y) with y a noisy smooth function of x."""
    r = rng(seed)
    x = r.uniform(-2, 2, size=(n, d))
    y = np.sin(x.sum(axis=1)) + 0.1 * r.normal(size=n)
    return np.column_stack([x, y])


def gram(x, z, s2, ls):
    x, z = np.atleast_2d(x), np.atleast_2d(z)
    diff = (x[:, None, :] - z[None, :, :]) / np.asarray(ls)
    return s2 * np.exp(-0.5 * np.sum(diff**2, axis=2))


MODELS = {
    1: dict(
        signal_variance=1.7,
        lengthscale=0.8,
        noise_variance=0.05,
        mean=0.3,
        mu0=0.2,
        kappa0=0.6,
        nu0=2.5,
        psi0=1.4,
    ),
    2: dict(
        signal_variance=0.9,
        lengthscale=[0.7, 1.6],
        noise_variance=0.02,
        mean=-0.1,
        mu0=[0.1, -0.3],
        kappa0=1.3,
        nu0=4.2,
        psi0=[[1.5, 0.3], [0.3, 0.8]],
    ),
}


class TestLogMarginal:
    @pytest.mark.parametrize("d", [1, 2])
    def test_gp_part_matches_scipy_multivariate_normal(self, d):
        p = MODELS[d]
        X = curve_data(9, d, seed=d)
        x, y = X[:, :d], X[:, d]
        K = gram(x, x, p["signal_variance"], p["lengthscale"]) + p["noise_variance"] * np.eye(9)
        expected = stats.multivariate_normal(np.full(9, p["mean"]), K).logpdf(y)
        assert rt.GPExperts(**p).log_marginal_outputs(X) == pytest.approx(expected, rel=1e-11)

    @pytest.mark.parametrize("d", [1, 2])
    def test_input_part_matches_normal_inverse_wishart(self, d):
        p = MODELS[d]
        X = curve_data(7, d, seed=10 + d)
        niw = rt.NormalInverseWishart(
            mu0=np.broadcast_to(p["mu0"], d),
            kappa0=p["kappa0"],
            nu0=p["nu0"],
            psi0=np.atleast_2d(p["psi0"]) if d > 1 else [[p["psi0"]]],
        )
        expected = niw.log_marginal(X[:, :d])
        assert rt.GPExperts(**p).log_marginal_inputs(X) == pytest.approx(expected, rel=1e-11)

    @pytest.mark.parametrize("d", [1, 2])
    def test_total_is_the_sum_of_both_parts(self, d):
        model = rt.GPExperts(**MODELS[d])
        X = curve_data(6, d, seed=20 + d)
        expected = model.log_marginal_inputs(X) + model.log_marginal_outputs(X)
        assert model.log_marginal(X) == pytest.approx(expected, rel=1e-13)

    def test_one_row_is_a_normal_times_a_student_t(self):
        model = rt.GPExperts(**MODELS[1])
        x, y = 0.7, -0.4
        p = MODELS[1]
        # One input under the prior: Student t with nu0 degrees of freedom, loc mu0 and
        # scale^2 psi0 (kappa0 + 1) / (kappa0 nu0).
        scale = math.sqrt(p["psi0"] * (p["kappa0"] + 1) / (p["kappa0"] * p["nu0"]))
        expected = stats.t(df=p["nu0"], loc=p["mu0"], scale=scale).logpdf(x) + stats.norm(
            p["mean"], math.sqrt(p["signal_variance"] + p["noise_variance"])
        ).logpdf(y)
        assert model.log_marginal([[x, y]]) == pytest.approx(expected, rel=1e-11)

    def test_duplicated_inputs_are_stable(self):
        # Many identical inputs: K has eigenvalues down to the noise variance only.
        x = np.repeat([0.0, 0.5, 1.0], 40)
        y = np.sin(x) + 0.01 * rng(3).normal(size=x.size)
        X = np.column_stack([x, y])
        model = rt.GPExperts(signal_variance=1.0, lengthscale=1.0, noise_variance=1e-6)
        K = gram(x[:, None], x[:, None], 1.0, 1.0) + 1e-6 * np.eye(x.size)
        expected = stats.multivariate_normal(np.zeros(x.size), K, allow_singular=False).logpdf(y)
        assert model.log_marginal_outputs(X) == pytest.approx(expected, rel=1e-8)
        est = rt.BayesianRoseTree(model=model).fit(X[::10])
        assert np.isfinite(est.log_evidence_)

    def test_degenerate_gram_matrix_raises_numerical_error(self):
        X = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
        model = rt.GPExperts(signal_variance=1.0, noise_variance=1e-300)
        with pytest.raises(rt.NumericalError, match="noise_variance"):
            model.log_marginal(X)

    def test_from_data_matches_the_default_normal_inverse_wishart(self):
        X = curve_data(12, 2, seed=5)
        model = rt.GPExperts.from_data(X)
        assert model.nu0 == 4.0
        assert model.kappa0 == 0.01
        np.testing.assert_allclose(model.mu0, X[:, :2].mean(axis=0))
        # rt.NormalInverseWishart() sets the same prior from the data it scores.
        expected = rt.NormalInverseWishart().log_marginal(X[:, :2])
        assert model.log_marginal_inputs(X) == pytest.approx(expected, rel=1e-9)


class TestClusterPredictives:
    @pytest.mark.parametrize("d", [1, 2])
    def test_student_t_is_the_ratio_of_marginals(self, d):
        model = rt.GPExperts(**MODELS[d])
        D = curve_data(6, d, seed=30 + d)
        queries = curve_data(4, d, seed=40 + d)
        got = model.input_log_predictive(D, queries[:, :d])
        expected = [
            model.log_marginal_inputs(np.vstack([D, q])) - model.log_marginal_inputs(D)
            for q in queries
        ]
        np.testing.assert_allclose(got, expected, rtol=1e-9)

    @pytest.mark.parametrize("d", [1, 2])
    def test_gaussian_is_the_ratio_of_marginals(self, d):
        model = rt.GPExperts(**MODELS[d])
        D = curve_data(6, d, seed=50 + d)
        queries = curve_data(4, d, seed=60 + d)
        mean, var = model.output_predictive(D, queries[:, :d])
        got = stats.norm(mean, np.sqrt(var)).logpdf(queries[:, d])
        expected = [
            model.log_marginal_outputs(np.vstack([D, q])) - model.log_marginal_outputs(D)
            for q in queries
        ]
        np.testing.assert_allclose(got, expected, rtol=1e-9)

    def test_posterior_mean_and_variance_match_the_closed_form(self):
        p = MODELS[2]
        D = curve_data(8, 2, seed=7)
        xs = rng(8).uniform(-2, 2, size=(5, 2))
        s2, ls, noise, m = p["signal_variance"], p["lengthscale"], p["noise_variance"], p["mean"]
        K = gram(D[:, :2], D[:, :2], s2, ls) + noise * np.eye(8)
        Ks = gram(xs, D[:, :2], s2, ls)
        mean = m + Ks @ np.linalg.solve(K, D[:, 2] - m)
        var = s2 - np.einsum("ij,ji->i", Ks, np.linalg.solve(K, Ks.T))
        model = rt.GPExperts(**p)
        np.testing.assert_allclose(model.posterior_mean(D, xs), mean, rtol=1e-10)
        got_mean, got_var = model.output_predictive(D, xs, noise=False)
        np.testing.assert_allclose(got_mean, mean, rtol=1e-10)
        np.testing.assert_allclose(got_var, var, rtol=1e-8)
        np.testing.assert_allclose(model.output_predictive(D, xs)[1], var + noise, rtol=1e-8)


def two_curves(n_per=4):
    x = np.linspace(0.0, 3.0, n_per)
    return np.column_stack([np.r_[x, x], np.r_[np.sin(x) + 1.5, np.sin(x) - 1.5]])


@pytest.fixture(scope="module")
def fitted():
    X = two_curves()
    model = rt.GPExperts.from_data(X, noise_variance=0.01, lengthscale=1.5)
    return model, X, rt.BayesianRoseTree(model=model).fit(X).tree_


class TestTreePredictive:
    def test_integrates_to_one_over_the_output(self):
        X = two_curves(3)
        model = rt.GPExperts.from_data(X, noise_variance=0.05, lengthscale=1.5)
        tree = rt.BayesianRoseTree(model=model).fit(X).tree_
        total, _ = integrate.quad(
            lambda t: math.exp(model.predictive_density(tree, X, [0.4], [t])[0]),
            -np.inf,
            np.inf,
        )
        assert total == pytest.approx(1.0, abs=1e-7)

    def test_matches_the_mixture_written_with_log_marginals(self, fitted):
        model, X, tree = fitted
        queries = np.array([[0.3, 1.6], [1.1, -1.0], [2.9, 0.2], [0.3, -1.2]])
        log_w = tree.log_cluster_weights()
        expected = []
        for q in queries:
            num = den = 0.0
            for node in range(tree.n_nodes):
                D = X[tree.leaves(node)]
                lx = model.log_marginal_inputs(np.vstack([D, q])) - model.log_marginal_inputs(D)
                ly = model.log_marginal_outputs(np.vstack([D, q])) - model.log_marginal_outputs(D)
                num += math.exp(log_w[node] + lx + ly)
                den += math.exp(log_w[node] + lx)
            expected.append(math.log(num / den))
        got = model.predictive_density(tree, X, queries[:, 0], queries[:, 1])
        np.testing.assert_allclose(got, expected, rtol=1e-9)

    def test_is_bimodal_between_two_curves(self, fitted):
        model, X, tree = fitted
        x0 = 1.0
        ys = np.array([np.sin(x0) + 1.5, 0.0, np.sin(x0) - 1.5])
        dens = model.predictive_density(tree, X, np.full(3, x0), ys)
        assert dens[0] > dens[1] + 3
        assert dens[2] > dens[1] + 3

    def test_rejects_mismatched_arguments(self, fitted):
        model, X, tree = fitted
        with pytest.raises(rt.InvalidParameterError, match="X_train") as err:
            model.predictive_density(tree, X[:-1], [0.0], [0.0])
        assert err.value.parameter == "X_train"
        with pytest.raises(rt.InvalidParameterError) as err:
            model.predictive_density(tree, X, [0.0, 1.0], [0.0])
        assert err.value.parameter == "y"
        with pytest.raises(rt.InvalidDataError, match="shape"):
            model.predictive_density(tree, X, np.zeros((2, 2)), [0.0, 1.0])
        with pytest.raises(rt.InvalidDataError, match="row 1"):
            model.predictive_density(tree, X, [0.0, np.nan], [0.0, 1.0])


class TestFit:
    def test_end_to_end_separates_two_curves(self):
        X = two_curves(5)
        model = rt.GPExperts.from_data(X, noise_variance=0.01, lengthscale=1.5)
        est = rt.BayesianRoseTree(model=model).fit(X)
        np.testing.assert_array_equal(est.labels_, [0] * 5 + [1] * 5)
        # The evidence is eq 1.5 evaluated with this model's log_marginal.
        tree = est.tree_

        def log_p(node):
            rows = tree.leaves(node)
            if node < tree.n_leaves:
                return model.log_marginal(X[rows])
            kids = tree.children[node]
            log_pi = math.log1p(-(0.5 ** (len(kids) - 1)))
            split = math.log(0.5 ** (len(kids) - 1)) + sum(log_p(c) for c in kids)
            return np.logaddexp(log_pi + model.log_marginal(X[rows]), split)

        assert est.log_evidence_ == pytest.approx(log_p(tree.root), rel=1e-10)

    def test_binary_gamma_fit_has_n_minus_one_internal_nodes(self):
        X = two_curves(4)
        model = rt.GPExperts.from_data(X, noise_variance=0.01)
        tree = rt.BayesianRoseTree(model=model, binary=True, mixing="gamma").fit(X).tree_
        assert tree.n_nodes - tree.n_leaves == 7

    def test_fit_kernel_finds_a_local_maximum(self):
        X = curve_data(25, 1, seed=9)
        start = rt.GPExperts(signal_variance=0.3, lengthscale=3.0, noise_variance=0.5)
        best = start.fit_kernel(X)
        value = best.log_marginal_outputs(X)
        assert value > start.log_marginal_outputs(X) + 1.0
        for name in ("signal_variance", "lengthscale", "noise_variance"):
            for factor in (0.97, 1.03):
                other = rt.GPExperts(
                    **{
                        "signal_variance": best.signal_variance,
                        "lengthscale": best.lengthscale,
                        "noise_variance": best.noise_variance,
                        name: getattr(best, name) * factor,
                    }
                )
                assert other.log_marginal_outputs(X) <= value + 1e-9
        assert best.mu0 == start.mu0


class TestValidation:
    @pytest.mark.parametrize(
        ("name", "value"),
        [
            ("signal_variance", 0.0),
            ("signal_variance", -1.0),
            ("noise_variance", 0.0),
            ("noise_variance", np.inf),
            ("lengthscale", 0.0),
            ("lengthscale", [1.0, -1.0]),
            ("lengthscale", [[1.0]]),
            ("mean", np.nan),
            ("mean", "zero"),
            ("kappa0", 0.0),
            ("nu0", np.nan),
            ("mu0", [np.nan]),
            ("psi0", -1.0),
            ("psi0", [[1.0, 2.0], [2.0, 1.0]]),
            ("psi0", [[1.0, 0.5], [0.2, 1.0]]),
            ("signal_variance", True),
        ],
    )
    def test_bad_hyperparameters_name_the_parameter(self, name, value):
        with pytest.raises(rt.InvalidParameterError) as err:
            rt.GPExperts(**{name: value})
        assert err.value.parameter == name

    def test_sizes_that_disagree_name_the_parameter(self):
        with pytest.raises(rt.InvalidParameterError) as err:
            rt.GPExperts(mu0=[0.0, 0.0], lengthscale=[1.0, 1.0, 1.0])
        assert err.value.parameter == "mu0"
        model = rt.GPExperts(mu0=[0.0, 0.0])
        with pytest.raises(rt.InvalidParameterError) as err:
            model.log_marginal(curve_data(4, 1))
        assert err.value.parameter == "mu0"
        with pytest.raises(rt.InvalidParameterError) as err:
            rt.GPExperts(nu0=0.5).log_marginal(curve_data(4, 2))
        assert err.value.parameter == "nu0"

    def test_bad_data(self):
        model = rt.GPExperts()
        with pytest.raises(rt.InvalidDataError, match="two columns"):
            model.log_marginal(np.zeros((3, 1)))
        with pytest.raises(rt.InvalidDataError, match="2-D"):
            model.log_marginal(np.zeros(3))
        X = curve_data(4)
        X[2, 1] = np.nan
        with pytest.raises(rt.InvalidDataError) as err:
            model.log_marginal(X)
        assert (err.value.row, err.value.column) == (2, 1)
        X[2, 1] = np.inf
        with pytest.raises(rt.InvalidDataError, match="row 2"):
            rt.BayesianRoseTree(model=model).fit(X)
        with pytest.raises(rt.InvalidDataError, match="at least 2 rows"):
            rt.GPExperts.from_data(np.zeros((1, 2)))
