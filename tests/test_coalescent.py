"""Kingman's coalescent: ln p(x, pi) against SciPy's multivariate normal and brute-force
sums, the prior against exponential densities, and the estimator's contract."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
import rosetree as rt
from scipy import stats


def random_timed_tree(n, rng):
    """Nested dicts of a random binary coalescent tree and its merge times in order."""
    alive = list(range(n))
    t = 0.0
    times = []
    while len(alive) > 1:
        i, j = sorted(rng.choice(len(alive), size=2, replace=False))
        t -= rng.exponential(1.0) + 0.05
        times.append(t)
        node = {"t": t, "children": [alive[i], alive[j]]}
        alive = [a for k, a in enumerate(alive) if k not in (i, j)] + [node]
    return alive[0], times


def leaf_paths(tree):
    """For each leaf, the list of (node id, time) from the leaf up to the root."""
    paths = {}
    stack = [(tree, [])]
    while stack:
        node, above = stack.pop()
        if isinstance(node, dict):
            here = [(id(node), node["t"]), *above]
            stack.extend((c, here) for c in node["children"])
        else:
            paths[node] = above
    return paths


def covariance(tree, n, s0):
    """(s0 + shared path length below the root) for every pair of leaves."""
    paths = leaf_paths(tree)
    root_t = tree["t"]
    c = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            ids_j = {k for k, _ in paths[j]}
            lca_t = next(t for k, t in paths[i] if k in ids_j) if i != j else 0.0
            c[i, j] = s0 + lca_t - root_t
    return c


def log_prior(times, n):
    """Kingman's prior as exponential waiting times times the uniform choice of a pair."""
    total, prev = 0.0, 0.0
    for i, t in enumerate(sorted(times, reverse=True)):
        rate = math.comb(n - i, 2)
        total += stats.expon.logpdf(prev - t, scale=1.0 / rate) - math.log(rate)
        prev = t
    return total


@pytest.mark.parametrize("d", [1, 2, 3])
def test_brownian_log_joint_matches_scipy_with_a_proper_root(d):
    rng = np.random.default_rng(d)
    for n in (2, 3, 5, 7):
        tree, times = random_timed_tree(n, rng)
        X = rng.normal(size=(n, d)) * 1.5
        a = rng.normal(size=(d, d))
        Lam = a @ a.T + 0.3 * np.eye(d)
        s0 = 0.5 + rng.random()
        cov = np.kron(covariance(tree, n, s0), Lam)
        want = stats.multivariate_normal(np.zeros(n * d), cov).logpdf(X.ravel())
        want += log_prior(times, n)
        got = rt.coalescent_log_joint(X, tree, likelihood="brownian", Lambda=Lam, root=s0)
        assert got == pytest.approx(want, rel=1e-10, abs=1e-10)
        # Isotropic and diagonal forms of the same Lambda.
        got = rt.coalescent_log_joint(X, tree, Lambda=np.full(d, 0.7), root=s0)
        cov = np.kron(covariance(tree, n, s0), 0.7 * np.eye(d))
        want = stats.multivariate_normal(np.zeros(n * d), cov).logpdf(X.ravel())
        assert got == pytest.approx(want + log_prior(times, n), rel=1e-10)
        assert rt.coalescent_log_joint(X, tree, Lambda=0.7, root=s0) == pytest.approx(
            got, rel=1e-12
        )


def test_multinomial_log_joint_matches_the_sum_over_internal_states():
    # ((0, 1) at -0.4, 2) at -1.1 with two features of 2 and 3 states; row 2 misses one.
    X = np.array([[0, 2], [1, 2], [0, np.nan], [1, 1]], dtype=float)[:3]
    tree = {"t": -1.1, "children": [{"t": -0.4, "children": [0, 1]}, 2]}
    rate = 0.8
    # The equilibrium the model uses: smoothed frequencies (count + 1) / (observed + K).
    q = [np.array([3, 2]) / 5, np.array([1, 1, 3]) / 5]
    total = 0.0
    for f, qf in enumerate(q):
        k = len(qf)

        def p(a, b, delta, qf=qf):
            e = math.exp(-rate * delta)
            return e * (a == b) + (1 - e) * qf[b]

        s = 0.0
        for y_root, y_mid in itertools.product(range(k), repeat=2):
            term = qf[y_root] * p(y_root, y_mid, 1.1 - 0.4)
            term *= p(y_mid, int(X[0, f]), 0.4) * p(y_mid, int(X[1, f]), 0.4)
            if not np.isnan(X[2, f]):
                term *= p(y_root, int(X[2, f]), 1.1)
            s += term
        total += math.log(s)
    want = total + log_prior([-0.4, -1.1], 3)
    got = rt.coalescent_log_joint(X, tree, likelihood="multinomial", Lambda=rate)
    assert got == pytest.approx(want, rel=1e-12)


def test_fit_returns_a_timed_tree_with_its_log_joint():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.3, (10, 4)), rng.normal(4, 0.3, (10, 4))])
    est = rt.KingmanCoalescent(noise=0.0, Lambda=1.0).fit(X)
    tree = est.tree_
    assert isinstance(tree, rt.Tree)
    assert np.all(tree.heights <= 0) and np.all(tree.heights[:20] == 0)
    top = tree.children[tree.root]
    assert sorted(sorted(tree.leaves(c)) for c in top) == [list(range(10)), list(range(10, 20))]
    assert est.log_marginal_ is None and est.particles_ is None and est.ess_ is None
    assert est.particle_log_weights_ is None
    assert est.log_joint_ == pytest.approx(rt.coalescent_log_joint(X, tree, Lambda=1.0), rel=1e-12)
    newick = tree.to_newick(lengths=True)
    assert newick.endswith(";") and ":" in newick
    codes = rng.integers(0, 3, size=(15, 8)).astype(float)
    codes[rng.random(codes.shape) < 0.3] = np.nan
    est = rt.KingmanCoalescent(
        noise=0.0, likelihood="multinomial", Lambda=np.linspace(0.5, 2, 8)
    ).fit(codes)
    again = rt.coalescent_log_joint(
        codes, est.tree_, likelihood="multinomial", Lambda=np.linspace(0.5, 2, 8)
    )
    assert est.log_joint_ == pytest.approx(again, rel=1e-12)


def test_greedy_rate1_matches_a_hand_computed_three_point_tree():
    # 1-D, Lambda = 1: the pair (0, 1) at distance 1 merges first at t = -v/2 with
    # v = (sqrt(1 + 4 S) - 1) / 2 (eq 12 with rate 1), before the far point 2.
    X = np.array([[0.0], [1.0], [5.0]])
    est = rt.KingmanCoalescent(noise=0.0, Lambda=1.0).fit(X)
    v = (math.sqrt(5) - 1) / 2
    assert est.tree_.children[3] == (0, 1)
    assert est.tree_.heights[3] == pytest.approx(-v / 2, rel=1e-14)


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"Lambda": -1.0}, "Lambda"),
        ({"Lambda": 0.0}, "Lambda"),
        ({"Lambda": np.ones(3)}, "Lambda"),
        ({"Lambda": np.array([[1.0, 2.0], [2.0, 1.0]])}, "Lambda"),
        ({"Lambda": np.ones((2, 3))}, "Lambda"),
        ({"likelihood": "poisson"}, "likelihood"),
        ({"inference": "nope"}, "inference"),
        ({"root": "sharp"}, "root"),
        ({"root": -1.0}, "s0"),
        ({"n_jobs": 0}, "n_jobs"),
    ],
)
def test_bad_parameters_are_named(kwargs, parameter):
    X = np.zeros((4, 2)) + np.arange(4)[:, None]
    with pytest.raises(rt.InvalidParameterError) as info:
        rt.KingmanCoalescent(noise=0.0, **kwargs).fit(X)
    assert info.value.parameter == parameter


def test_unknown_inference_lists_the_available_ones():
    with pytest.raises(rt.InvalidParameterError, match="greedy-minduration"):
        rt.KingmanCoalescent(noise=0.0, inference="greedy-nope").fit(np.eye(3))


_GREEDY = ("greedy-rate1", "greedy-maxprob", "greedy-minduration")


def _exact_greedy_reference(X, lam, rule):
    """Greedy-MaxProb or -MinDuration as the paper states them (Teh et al. §4.2), for
    Brownian diffusion with Lambda = lam * I: at every step each live pair's i-th term of
    eq 7, -C(m, 2) delta + ln N(mu_l - mu_r; 0, (v_l + v_r + L0 + 2 delta) lam I), is
    maximised over delta >= 0 by scipy's bounded Brent search on its closed form; MaxProb
    takes the largest term, MinDuration the smallest delta (ties at delta = 0: the largest
    term). Returns the merges (left, right, time) in order."""
    from scipy.optimize import minimize_scalar

    n, d = X.shape
    means = [row.astype(float) for row in X]
    var = [0.0] * n
    times = [0.0] * n
    live = list(range(n))
    now = 0.0
    merges = []
    while len(live) > 1:
        rate = math.comb(len(live), 2)
        scored = []
        for a, left in enumerate(live):
            for r in live[a + 1 :]:
                diff = means[left] - means[r]
                w = var[left] + var[r] + (times[left] - now) + (times[r] - now)

                def term(delta, diff=diff, w=w, rate=rate):
                    v = (w + 2 * delta) * lam
                    if v == 0.0:
                        return -math.inf
                    log_z = -0.5 * (d * math.log(2 * math.pi * v) + diff @ diff / v)
                    return -rate * delta + log_z

                hi = 10.0 * (diff @ diff / lam + w + 1.0)
                opt = minimize_scalar(
                    lambda x, term=term: -term(x),
                    bounds=(0.0, hi),
                    method="bounded",
                    options={"xatol": 1e-12},
                )
                delta = opt.x if term(opt.x) > term(0.0) else 0.0
                value = term(delta)
                key = -value if rule == "greedy-maxprob" else (delta, -value)
                scored.append((key, delta, left, r))
        scored.sort(key=lambda s: s[0])
        _, delta, left, r = scored[0]
        t = now - delta
        vl, vr = var[left] + times[left] - t, var[r] + times[r] - t
        means.append((means[left] / vl + means[r] / vr) / (1 / vl + 1 / vr))
        var.append(1 / (1 / vl + 1 / vr))
        times.append(t)
        now = t
        live = [c for c in live if c not in (left, r)] + [len(times) - 1]
        merges.append((left, r, t))
    return merges


@pytest.mark.parametrize("inference", ["greedy-maxprob", "greedy-minduration"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_greedy_matches_the_paper_rule_with_scipy(inference, seed):
    rng = np.random.default_rng(100 + seed)
    n, d, lam = 8 + 2 * seed, 2, 0.5 + seed * 0.4
    X = rng.normal(0.0, 2.0, size=(n, d))
    est = rt.KingmanCoalescent(noise=0.0, Lambda=lam, inference=inference).fit(X)
    want = _exact_greedy_reference(X, lam, inference)
    for k, (left, right, t) in enumerate(want):
        assert est.tree_.children[n + k] == (left, right), f"merge {k}"
        assert est.tree_.heights[n + k] == pytest.approx(t, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("inference", _GREEDY)
def test_every_greedy_fit_reports_its_own_log_joint(inference):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 3))
    a = rng.normal(size=(3, 3))
    for Lambda in (0.7, a @ a.T + 0.3 * np.eye(3)):
        est = rt.KingmanCoalescent(noise=0.0, Lambda=Lambda, inference=inference).fit(X)
        again = rt.coalescent_log_joint(X, est.tree_, Lambda=Lambda)
        assert est.log_joint_ == pytest.approx(again, rel=1e-12)
    codes = rng.integers(0, 3, size=(25, 6)).astype(float)
    codes[rng.random(codes.shape) < 0.2] = np.nan
    rates = np.linspace(0.3, 2.0, 6)
    est = rt.KingmanCoalescent(
        noise=0.0, likelihood="multinomial", Lambda=rates, inference=inference
    )
    est.fit(codes)
    again = rt.coalescent_log_joint(codes, est.tree_, likelihood="multinomial", Lambda=rates)
    assert est.log_joint_ == pytest.approx(again, rel=1e-12)


@pytest.mark.parametrize("inference", _GREEDY)
def test_every_greedy_fit_recovers_clear_clusters_for_any_n_jobs(inference):
    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 0.0], [0.0, 8.0, 8.0]])
    X = centres[np.arange(90) % 3] + rng.normal(0.0, 0.2, size=(90, 3))
    fits = [rt.KingmanCoalescent(noise=0.0, inference=inference, n_jobs=k).fit(X) for k in (1, 2)]
    assert fits[0].tree_.children == fits[1].tree_.children
    assert np.array_equal(fits[0].tree_.heights, fits[1].tree_.heights)
    assert fits[0].log_joint_ == fits[1].log_joint_
    tree = fits[0].tree_
    groups = {tuple(sorted(tree.leaves(v))) for v in range(2 * 90 - 1)}
    for g in range(3):
        assert tuple(range(g, 90, 3)) in groups


def test_bad_data_names_row_and_column():
    X = np.arange(8.0).reshape(4, 2)
    X[2, 1] = np.inf
    with pytest.raises(rt.InvalidDataError) as info:
        rt.KingmanCoalescent(noise=0.0).fit(X)
    assert (info.value.row, info.value.column) == (2, 1)
    codes = np.array([[0, 1], [1, 0.5], [1, 1]])
    with pytest.raises(rt.InvalidDataError) as info:
        rt.KingmanCoalescent(noise=0.0, likelihood="multinomial").fit(codes)
    assert (info.value.row, info.value.column) == (1, 1)
    with pytest.raises(rt.InvalidDataError):
        rt.KingmanCoalescent(noise=0.0, likelihood="multinomial").fit(-np.ones((3, 2)))


def test_bad_trees_are_rejected():
    X = np.zeros((3, 1))
    with pytest.raises(rt.InvalidTreeError, match="binary"):
        rt.coalescent_log_joint(X, {"t": -1.0, "children": [0, 1, 2]})
    with pytest.raises(rt.InvalidTreeError):
        rt.coalescent_log_joint(X, {"t": 1.0, "children": [{"t": 0.5, "children": [0, 1]}, 2]})
    with pytest.raises(rt.InvalidTreeError):
        rt.coalescent_log_joint(X, {"t": -1.0, "children": [{"t": -2.0, "children": [0, 1]}, 2]})
    with pytest.raises(rt.InvalidTreeError):
        rt.coalescent_log_joint(X, {"t": -1.0, "children": [0, 1]})
    with pytest.raises(rt.InvalidTreeError):
        rt.coalescent_log_joint(X, [0, [1, 2]])
    deep = 0
    for k in range(1, 3000):
        deep = {"t": -float(k), "children": [deep, k]}
    value = rt.coalescent_log_joint(np.zeros((3000, 1)), deep)
    assert np.isfinite(value)


# ------------------------------------------------------------------------------ SMC
SMC = ["smc-priorprior", "smc-priorpost", "smc-postpost"]


@functools.cache
def _exact_p3(x, lam, s0):
    """p(x) of three 1-D points under the coalescent with Brownian diffusion and the root
    N(0, s0·lam): the three first pairs, each with probability 1/3, integrated over the
    waiting times δ1 ~ Exp(3) and δ2 ~ Exp(1) with the leaves' covariance form."""
    from scipy import integrate
    from scipy.stats import multivariate_normal

    total = 0.0
    for a, b, c in [(0, 1, 2), (0, 2, 1), (1, 2, 0)]:

        def density(d2, d1, a=a, b=b, c=c):
            cov = np.full((3, 3), s0)
            cov += (d1 + d2) * np.eye(3)
            cov[a, b] = cov[b, a] = s0 + d2
            return np.exp(-3 * d1 - d2) * multivariate_normal(np.zeros(3), lam * cov).pdf(x)

        value, _ = integrate.dblquad(density, 0, np.inf, 0, np.inf, epsabs=1e-10)
        total += value  # (1/3 for the pair) × (3 for δ1's rate)
    return total


@pytest.mark.parametrize("inference", SMC)
def test_smc_estimates_p_of_x_without_bias(inference):
    x = np.array([-0.4, 0.3, 1.1])
    exact = _exact_p3(tuple(x), 1.0, 2.0)
    estimates = [
        np.exp(
            rt.KingmanCoalescent(
                noise=0.0,
                Lambda=1.0,  # the reference's Λ; "auto" would take the column's variance
                inference=inference,
                n_particles=3,
                root=2.0,
                random_state=s,
            )
            .fit(x[:, None])
            .log_marginal_
        )
        for s in range(300)
    ]
    mean, se = np.mean(estimates), np.std(estimates, ddof=1) / np.sqrt(len(estimates))
    assert abs(mean - exact) < 4 * se + 1e-3 * exact, (mean, se, exact)


@pytest.mark.parametrize("inference", SMC)
def test_smc_fits_are_reproducible_and_report_their_heaviest_particle(inference):
    X = np.random.default_rng(5).normal(size=(15, 2))
    a, b, c = (
        rt.KingmanCoalescent(
            noise=0.0,
            Lambda=1.0,
            inference=inference,
            n_particles=8,
            random_state=seed,
            n_jobs=jobs,
        )
        for seed, jobs in [(4, 2), (4, 1), (5, 2)]
    )
    a.fit(X), b.fit(X), c.fit(X)
    assert a.log_marginal_ == b.log_marginal_ and np.isfinite(a.log_marginal_)
    np.testing.assert_array_equal(a.particle_log_weights_, b.particle_log_weights_)
    np.testing.assert_array_equal(a.ess_, b.ess_)
    newick = [t.to_newick(lengths=True) for t in a.particles_]
    assert newick == [t.to_newick(lengths=True) for t in b.particles_]
    assert c.log_marginal_ != a.log_marginal_  # the seed is used
    assert len(a.particles_) == 8 and a.ess_.shape == (14,) and np.all(a.ess_ <= 8 + 1e-9)
    best = int(np.argmax(a.particle_log_weights_))
    assert a.tree_ is a.particles_[best]
    assert a.log_joint_ == pytest.approx(rt.coalescent_log_joint(X, a.tree_), rel=1e-12)
    np.testing.assert_allclose(np.exp(a.particle_log_weights_).sum(), 1.0)


def test_smc_parameters_are_checked():
    X = np.random.default_rng(6).normal(size=(5, 2))
    for bad in (0, -3, 2.0, True, "8", 2**70):
        with pytest.raises(rt.InvalidParameterError, match="n_particles"):
            rt.KingmanCoalescent(noise=0.0, inference="smc-priorpost", n_particles=bad).fit(X)
    with pytest.raises(rt.InvalidParameterError, match="random_state"):
        rt.KingmanCoalescent(noise=0.0, inference="smc-priorpost", random_state=-1).fit(X)
    counts = np.random.default_rng(7).integers(0, 3, size=(6, 4)).astype(float)
    with pytest.raises(rt.InvalidParameterError, match="inference"):
        rt.KingmanCoalescent("multinomial", noise=0.0, inference="smc-postpost").fit(counts)
    est = rt.KingmanCoalescent("multinomial", noise=0.0, inference="smc-priorpost", n_particles=4)
    assert np.isfinite(est.fit(counts).log_marginal_)
