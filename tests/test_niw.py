"""The Normal-inverse-Wishart model: closed forms at 50 digits, far-away rows, d >= n."""

from __future__ import annotations

import itertools
import warnings

import mpmath as mp
import numpy as np
import pytest
import rosetree as rt

mp.mp.dps = 50


def default_prior(X):
    """The documented default: mean, κ0 = 0.01, ν0 = d + 2, Ψ0 = diag(var + 1e-6 mean var)."""
    var = X.var(axis=0, ddof=1)
    return X.mean(axis=0), 0.01, X.shape[1] + 2.0, np.diag(var + 1e-6 * var.mean())


def mp_log_marginal(X, mu0, kappa0, nu0, psi0):
    r"""ln f of the rows of ``X`` from the closed form (Murphy 2007 §9), in 50-digit arithmetic.

    ln f = −(nd/2) ln π + ln Γ_d(ν_n/2) − ln Γ_d(ν0/2) + (ν0/2) ln|Ψ0| − (ν_n/2) ln|Ψ_n|
           + (d/2)(ln κ0 − ln κ_n),  Ψ_n = Ψ0 + S + (κ0 n/κ_n)(x̄ − μ0)(x̄ − μ0)ᵀ.
    """
    n, d = X.shape
    rows = [[mp.mpf(float(v)) for v in r] for r in X]
    mean = [mp.fsum(r[j] for r in rows) / n for j in range(d)]
    kappa0, nu0 = mp.mpf(kappa0), mp.mpf(nu0)
    kn, nn = kappa0 + n, nu0 + n
    w = kappa0 * n / kn
    dev = [mean[j] - mp.mpf(float(mu0[j])) for j in range(d)]
    psi0 = mp.matrix([[mp.mpf(float(v)) for v in r] for r in psi0])
    psi_n = mp.matrix(d, d)
    for i in range(d):
        for j in range(d):
            s = mp.fsum((r[i] - mean[i]) * (r[j] - mean[j]) for r in rows)
            psi_n[i, j] = psi0[i, j] + s + w * dev[i] * dev[j]

    def ln_multigamma(a):
        return d * (d - 1) / mp.mpf(4) * mp.log(mp.pi) + mp.fsum(
            mp.loggamma(a + mp.mpf(1 - j) / 2) for j in range(1, d + 1)
        )

    return (
        -mp.mpf(n * d) / 2 * mp.log(mp.pi)
        + ln_multigamma(nn / 2)
        - ln_multigamma(nu0 / 2)
        + nu0 / 2 * mp.log(mp.det(psi0))
        - nn / 2 * mp.log(mp.det(psi_n))
        + mp.mpf(d) / 2 * (mp.log(kappa0) - mp.log(kn))
    )


def spd(rng, d):
    b = rng.normal(size=(d, d))
    return b @ b.T / d + 0.5 * np.eye(d)


def leaf_sets(tree):
    out = []
    for v in range(tree.n_nodes):
        out.append(sorted(itertools.chain.from_iterable(out[c] for c in tree.children[v])) or [v])
    return out


# Trees over n rows whose internal nodes merge in different orders: a left comb, a right comb
# and a balanced binary tree.
def comb(ids):
    tree = ids[0]
    for i in ids[1:]:
        tree = [tree, i]
    return tree


def balanced(ids):
    if len(ids) == 1:
        return ids[0]
    h = len(ids) // 2
    return [balanced(ids[:h]), balanced(ids[h:])]


class TestClosedForm:
    # d = 30 keeps at most 30 // 4 = 7 factor rows (clusters of up to 8 rows), d = 16 four;
    # the sizes straddle that switch, and d = 3 keeps none.
    @pytest.mark.parametrize(("n", "d"), [(12, 30), (9, 30), (8, 3), (7, 16)])
    @pytest.mark.parametrize("scale", ["default", "diagonal", "full"])
    def test_every_node_matches_mpmath(self, n, d, scale):
        rng = np.random.default_rng(n * 100 + d)
        X = rng.normal(3.0, 2.0, size=(n, d)) + 10.0 * (np.arange(n) % 2)[:, None]
        mu0, kappa0, nu0, psi0 = default_prior(X)
        if scale == "default":
            model = rt.NormalInverseWishart()
        else:
            mu0, kappa0, nu0 = rng.normal(size=d), 0.3, d + 1.5
            psi0 = np.diag(rng.uniform(0.5, 2.0, size=d)) if scale == "diagonal" else spd(rng, d)
            model = rt.NormalInverseWishart(mu0=mu0, kappa0=kappa0, nu0=nu0, psi0=psi0)
        ids = list(range(n))
        memo = {}
        for shape in (comb(ids), comb(ids[::-1]), balanced(ids), [ids[: n - 3], ids[n - 3 :]]):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", rt.DegenerateModelWarning)  # d >= n here
                tree = rt.evaluate_tree(X, shape, model=model)
            for v, rows in enumerate(leaf_sets(tree)):
                key = tuple(rows)
                if key not in memo:
                    memo[key] = float(mp_log_marginal(X[rows], mu0, kappa0, nu0, psi0))
                assert tree.log_f[v] == pytest.approx(memo[key], rel=1e-10, abs=1e-9), rows

    def test_one_dimensional_diagonal_equals_the_matrix(self):
        rng = np.random.default_rng(3)
        X = rng.normal(size=(7, 5))
        diag = rng.uniform(0.5, 2.0, size=5)
        a = rt.NormalInverseWishart(psi0=diag, kappa0=0.5).log_marginal(X)
        b = rt.NormalInverseWishart(psi0=np.diag(diag), kappa0=0.5).log_marginal(X)
        assert a == b
        assert a == pytest.approx(float(mp_log_marginal(X, X.mean(0), 0.5, 7.0, np.diag(diag))))
        with pytest.raises(rt.InvalidParameterError, match="psi0"):
            rt.NormalInverseWishart(psi0=np.ones((2, 3))).log_marginal(X)
        with pytest.raises(rt.InvalidParameterError, match="psi0"):
            rt.NormalInverseWishart(psi0=-diag).log_marginal(X)

    def test_many_dimensions_match_slogdet(self):
        # d = 1000, a few rows: only the factor form is fast; the reference is a float64
        # slogdet of the full 1000 x 1000 Ψ_n.
        rng = np.random.default_rng(8)
        n, d = 9, 1000
        X = rng.normal(size=(n, d)) + 3.0 * (np.arange(n) % 3)[:, None]
        mu0, kappa0, nu0, psi0 = default_prior(X)
        with pytest.warns(rt.DegenerateModelWarning):
            tree = rt.evaluate_tree(X, balanced(list(range(n))), model=rt.NormalInverseWishart())
        from scipy.special import multigammaln

        for v, rows in enumerate(leaf_sets(tree)):
            Y = X[rows]
            k = len(rows)
            xbar = Y.mean(axis=0)
            C = Y - xbar
            dev = xbar - mu0
            psi_n = psi0 + C.T @ C + kappa0 * k / (kappa0 + k) * np.outer(dev, dev)
            want = (
                -k * d / 2 * np.log(np.pi)
                + multigammaln((nu0 + k) / 2, d)
                - multigammaln(nu0 / 2, d)
                + nu0 / 2 * np.linalg.slogdet(psi0)[1]
                - (nu0 + k) / 2 * np.linalg.slogdet(psi_n)[1]
                + d / 2 * (np.log(kappa0) - np.log(kappa0 + k))
            )
            assert tree.log_f[v] == pytest.approx(want, rel=1e-10), rows


class TestFarRows:
    @pytest.mark.parametrize("d", [3, 20])
    def test_score_samples_matches_mpmath(self, d):
        rng = np.random.default_rng(d)
        n = 10
        X = rng.normal(size=(n, d)) + 4.0 * (np.arange(n) % 2)[:, None]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rt.DegenerateModelWarning)  # d >= n for d = 20
            est = rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
        mu0, kappa0, nu0, psi0 = default_prior(X)
        tree = est.tree_
        log_w = tree.log_cluster_weights()
        sets = leaf_sets(tree)
        new = np.array(
            [
                np.full(d, 1e10),
                np.full(d, -1e150),
                np.r_[1e150, np.zeros(d - 1)],
                np.r_[3.0, -1e300, np.ones(d - 2)],
                X[0] + 0.1,
            ]
        )
        got = est.score_samples(new)
        assert np.all(np.isfinite(got))
        for x, g in zip(new, got, strict=True):
            # Ψ_n has entries up to 1e600 beside ones of order 1: enough digits for the
            # determinant's eliminations to cancel them exactly.
            with mp.workdps(700):
                terms = [
                    mp.mpf(float(log_w[v]))
                    + mp_log_marginal(np.vstack([X[rows], x]), mu0, kappa0, nu0, psi0)
                    - mp_log_marginal(X[rows], mu0, kappa0, nu0, psi0)
                    for v, rows in enumerate(sets)
                    if np.isfinite(log_w[v])
                ]
                want = float(mp.log(mp.fsum(mp.exp(t) for t in terms)))
            assert g == pytest.approx(want, rel=1e-9), x[:3]

    def test_responsibilities_of_far_rows_are_finite(self):
        rng = np.random.default_rng(1)
        X = rng.normal(size=(12, 4))
        est = rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
        proba = est.predict_proba(np.full((2, 4), 1e200))
        assert np.all(np.isfinite(proba))
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)


class TestManyFeatures:
    def test_fit_warns_and_names_d_and_n(self):
        X = np.random.default_rng(0).normal(size=(4, 5))
        with pytest.warns(rt.DegenerateModelWarning, match="n_features=5 >= n_samples=4") as w:
            rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
        assert issubclass(w[0].category, UserWarning)
        assert "rt.NormalGamma" in str(w[0].message)
        assert w[0].filename == __file__  # points at the caller

    def test_log_marginal_and_log_evidence_warn(self):
        X = np.random.default_rng(0).normal(size=(3, 3))
        model = rt.NormalInverseWishart(psi0=np.eye(3), mu0=np.zeros(3))
        with pytest.warns(rt.DegenerateModelWarning, match="n_features=3 >= n_samples=3"):
            model.log_marginal(X)
        with pytest.warns(rt.DegenerateModelWarning):
            rt.log_evidence(X, [[0, 1], 2], model=model)
        with pytest.warns(rt.DegenerateModelWarning):
            rt.optimal_tree(X, model=model)

    def test_no_warning_with_more_rows_or_another_model(self):
        rng = np.random.default_rng(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            rt.NormalInverseWishart().log_marginal(rng.normal(size=(4, 3)))
            rt.BayesianRoseTree(model=rt.BetaBernoulli()).fit(rng.integers(0, 2, size=(3, 8)))

    def test_standard_normal_evidence_is_not_degenerate(self):
        # With the full data covariance as Ψ0 this was +142,764: the prior put almost no
        # variance off the span of the 50 rows.
        X = np.random.default_rng(0).normal(size=(50, 500))
        with pytest.warns(rt.DegenerateModelWarning):
            est = rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
        # Each entry of an N(0, 1) sample has log density about -1.42 on average.
        assert -1.6 * X.size < est.log_evidence_ < -1.2 * X.size

    def test_fifty_rows_in_five_thousand_dimensions_fit(self):
        # Its time is measured in benchmarks/niw_speed.py, not here.
        rng = np.random.default_rng(2)
        X = rng.normal(size=(50, 5000)) + 5.0 * (np.arange(50) % 2)[:, None]
        with pytest.warns(rt.DegenerateModelWarning):
            est = rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
        assert np.isfinite(est.log_evidence_)
        assert est.tree_.sizes[est.tree_.root] == 50


def test_data_too_large_for_the_default_prior_name_the_column():
    X = np.array([[1.0, 0.0], [-2.0, 1.0], [3.0, -1e160]])
    with pytest.raises(rt.InvalidDataError, match="rescale the data") as info:
        rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
    assert (info.value.row, info.value.column) == (2, 1)
