"""The Pitman–Yor diffusion tree: the density against the sequential process for every order
of the points, Neal's Dirichlet diffusion tree formula and numerical integration; the
likelihood against SciPy's multivariate normal; the sampler against integrated
probabilities and moments."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import rosetree as rt
from scipy import integrate, stats

SETTINGS = [(0.5, 0.2, 1.0), (1.5, 0.0, 0.7), (-0.3, 0.4, 2.0), (2.0, 0.9, 0.3)]

# Trees on 3 and 4 points (leaves at t = 1): binary, three-way at the root or below, a star.
SMALL_TREES = [
    {"t": 0.3, "children": [{"t": 0.7, "children": [0, 1]}, 2]},
    {"t": 0.4, "children": [0, 1, 2]},
    {"t": 0.2, "children": [{"t": 0.6, "children": [0, 1]}, {"t": 0.8, "children": [2, 3]}]},
    {"t": 0.35, "children": [{"t": 0.75, "children": [1, 3]}, 0, 2]},
    {"t": 0.45, "children": [{"t": 0.6, "children": [0, 1, 3]}, 2]},
    {"t": 0.3, "children": [0, 1, 2, 3]},
]


def rate(m, a, b):
    """Gamma(m - beta) / Gamma(m + 1 + alpha): the divergence rate factor (eq 1)."""
    return math.gamma(m - b) / math.gamma(m + 1 + a)


def parents_and_leaves(tree):
    """Parent dict (by id of the node dict, leaves by their int) and the root-to-leaf paths."""
    paths = {}
    stack = [(tree, [])]
    while stack:
        node, above = stack.pop()
        if isinstance(node, dict):
            stack.extend((c, [*above, node]) for c in node["children"])
        else:
            paths[node] = above
    return paths


def below(node, earlier):
    """The number of points of ``earlier`` at or below ``node``."""
    if not isinstance(node, dict):
        return int(node in earlier)
    return sum(below(c, earlier) for c in node["children"])


def sequential_log_density(tree, order, a, b, c):
    """The density of ``tree`` built by the process of §1 with the points in ``order``.

    Each point walks from the origin down the earlier points' tree: it pays for not
    diverging along each branch (eq 4), for each branch it takes at a branch point (eq 2),
    and for diverging, on a branch at a new time (eq 1) or at a branch point as a new
    branch (eq 3).
    """

    def cum(t):
        return -c * math.log(1.0 - t)

    paths = parents_and_leaves(tree)
    log_p = 0.0
    for k in range(1, len(order)):
        earlier = set(order[:k])
        path = [*paths[order[k]], order[k]]
        s, m = 0.0, k
        for v, nxt in itertools.pairwise(path):
            taken = sum(1 for ch in v["children"] if below(ch, earlier) > 0)
            stay = -(cum(v["t"]) - cum(s)) * rate(m, a, b)
            here, onward = below(v, earlier), below(nxt, earlier)
            if onward == 0:
                if taken >= 2:
                    factor = (a + taken * b) / (here + a)
                    log_p += stay + (math.log(factor) if factor > 0 else -math.inf)
                else:
                    log_p += stay + math.log(c / (1.0 - v["t"]) * rate(m, a, b))
                break
            if taken >= 2:
                log_p += stay + math.log((onward - b) / (here + a))
                s, m = v["t"], onward
    return log_p


@pytest.mark.parametrize(("a", "b", "c"), SETTINGS)
@pytest.mark.parametrize("tree", SMALL_TREES)
def test_density_is_the_sequential_process_for_every_order(tree, a, b, c):
    got = rt.pydt_log_prior(tree, alpha=a, beta=b, c=c)
    n = len(parents_and_leaves(tree))
    for order in itertools.permutations(range(n)):
        want = sequential_log_density(tree, list(order), a, b, c)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), order


def test_multifurcations_need_alpha_plus_two_beta_positive():
    star = {"t": 0.4, "children": [0, 1, 2]}
    assert rt.pydt_log_prior(star, alpha=0.0, beta=0.0, c=1.0) == -math.inf
    assert rt.pydt_log_prior(star, alpha=-0.5, beta=0.25, c=1.0) == -math.inf
    assert math.isfinite(rt.pydt_log_prior(star, alpha=-0.45, beta=0.25, c=1.0))


def nested(tree, v=None):
    """A rt.Tree as nested dicts."""
    v = tree.root if v is None else v
    if v < tree.n_leaves:
        return v
    return {"t": float(tree.heights[v]), "children": [nested(tree, c) for c in tree.children[v]]}


def neal_log_density(tree, c):
    """Neal's (2001) DDT density with a(t) = c/(1 - t): per branch point below a node at t_a,
    a(t_b) (l - 1)! (r - 1)! / (m - 1)! exp(-[A(t_b) - A(t_a)] H_{m-1})."""
    total = 0.0
    stack = [(tree, 0.0)]
    while stack:
        node, t_a = stack.pop()
        if not isinstance(node, dict):
            continue
        left, right = node["children"]
        sizes = [len(parents_and_leaves(ch)) if isinstance(ch, dict) else 1 for ch in (left, right)]
        m = sum(sizes)
        harmonic = sum(1.0 / i for i in range(1, m))
        t = node["t"]
        total += (
            math.log(c / (1 - t))
            + math.log(math.factorial(sizes[0] - 1) * math.factorial(sizes[1] - 1))
            - math.log(math.factorial(m - 1))
            + c * (math.log(1 - t) - math.log(1 - t_a)) * harmonic
        )
        stack.extend((ch, t) for ch in (left, right))
    return total


@pytest.mark.parametrize("c", [0.5, 1.0, 2.0])
def test_alpha_beta_zero_is_neals_dirichlet_diffusion_tree(c):
    for seed, n in enumerate(range(2, 14)):
        _, tree = rt.sample_pydt(n=n, d=1, alpha=0.0, beta=0.0, c=c, random_state=seed)
        assert all(len(ch) in (0, 2) for ch in tree.children)
        got = rt.pydt_log_prior(tree, alpha=0.0, beta=0.0, c=c)
        assert got == pytest.approx(neal_log_density(nested(tree), c), rel=1e-11)
        # The Tree and its nested dicts are the same tree.
        assert rt.pydt_log_prior(nested(tree), alpha=0.0, beta=0.0, c=c) == got


@pytest.mark.parametrize(
    ("a", "b", "c"),
    [(0.5, 0.2, 2.0), (0.0, 0.0, 1.0), (1.5, 0.0, 3.0), (-0.5, 0.6, 1.0), (0.2, 0.9, 2.0)],
)
def test_two_points_integrate_to_one(a, b, c):
    def density(t):
        return math.exp(rt.pydt_log_prior({"t": t, "children": [0, 1]}, alpha=a, beta=b, c=c))

    total, _ = integrate.quad(density, 0.0, 1.0, epsabs=1e-12, epsrel=1e-10, limit=200)
    assert total == pytest.approx(1.0, abs=1e-8)

    # Eq 7 as printed: Gamma(1 - beta)^2 / Gamma(2 + alpha) for the one branch point, times
    # eq 12's c (1 - t)^(c J - 1) with J = H_1 = w_1. It lacks Gamma(1 - beta)^(K - 1), here
    # Gamma(1 - beta), and integrates to Gamma(1 - beta), which is not 1 when beta != 0.
    def printed(t):
        w1 = rate(1, a, b)
        return math.gamma(1 - b) ** 2 / math.gamma(2 + a) * c * (1 - t) ** (c * w1 - 1)

    assert printed(0.3) == pytest.approx(density(0.3) * math.gamma(1 - b), rel=1e-12)
    printed_total, _ = integrate.quad(printed, 0.0, 1.0, epsabs=1e-12, epsrel=1e-10, limit=200)
    assert printed_total == pytest.approx(math.gamma(1 - b), rel=1e-8)
    if b > 0:
        assert abs(printed_total - 1.0) > 1e-2


def covariance(tree):
    """C_ij: divergence time of the lowest common ancestor of i != j; C_ii = 1."""
    paths = parents_and_leaves(tree)
    n = len(paths)
    cov = np.eye(n)
    for i in range(n):
        for j in range(n):
            if i != j:
                ids = {id(v) for v in paths[j]}
                cov[i, j] = [v for v in paths[i] if id(v) in ids][-1]["t"]
    return cov


@pytest.mark.parametrize("sigma2", [1.0, 0.3, 2.5])
def test_likelihood_is_the_covariance_form(sigma2):
    rng = np.random.default_rng(0)
    trees = list(SMALL_TREES)
    for seed, n in enumerate([2, 5, 9, 15]):
        _, tree = rt.sample_pydt(n=n, alpha=1.0, beta=0.3, random_state=seed)
        trees.append(nested(tree))
    for tree in trees:
        cov = covariance(tree)
        X = rng.normal(size=(len(cov), 3))
        want = sum(
            stats.multivariate_normal(np.zeros(len(cov)), sigma2 * cov).logpdf(col) for col in X.T
        )
        assert rt.pydt_log_likelihood(X, tree, sigma2=sigma2) == pytest.approx(want, rel=1e-10)
    # One point: N(0, sigma2 I) at t = 1.
    x = np.array([[0.3, -1.2]])
    want = stats.multivariate_normal(np.zeros(2), sigma2 * np.eye(2)).logpdf(x[0])
    assert rt.pydt_log_likelihood(x, 0, sigma2=sigma2) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize(("a", "b", "c"), [(0.5, 0.2, 2.0), (1.5, 0.0, 1.5), (-0.2, 0.3, 2.5)])
def test_sampler_matches_the_density_on_three_points(a, b, c):
    # P(one three-way branch point) by integrating the star's density over its time (it has
    # one labelled tree); the rest is the three binary trees.
    def star(t):
        tree = {"t": t, "children": [0, 1, 2]}
        return math.exp(rt.pydt_log_prior(tree, alpha=a, beta=b, c=c))

    p_star, _ = integrate.quad(star, 0.0, 1.0, epsabs=1e-12, epsrel=1e-10, limit=200)
    draws = 20_000
    stars, t_root = 0, []
    for seed in range(draws):
        _, tree = rt.sample_pydt(n=3, d=1, alpha=a, beta=b, c=c, random_state=seed)
        stars += len(tree.children[tree.root]) == 3
        t_root.append(tree.heights[tree.root])
    se = math.sqrt(p_star * (1 - p_star) / draws)
    assert abs(stars / draws - p_star) < 5 * se
    # All three points share one path until the first divergence, at rates w_1 and w_2:
    # P(t_root > t) = (1 - t)^(c H_2), a Beta(1, c H_2) law.
    k = c * (rate(1, a, b) + rate(2, a, b))
    assert stats.kstest(t_root, stats.beta(1, k).cdf).pvalue > 1e-4


def test_samples_are_reproducible():
    X, tree = rt.sample_pydt(n=25, d=3, alpha=1.0, beta=0.2, c=1.0, sigma2=0.5, random_state=7)
    X2, tree2 = rt.sample_pydt(n=25, d=3, alpha=1.0, beta=0.2, c=1.0, sigma2=0.5, random_state=7)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(tree.heights, tree2.heights)
    assert tree.children == tree2.children
    X3, _ = rt.sample_pydt(n=25, d=3, alpha=1.0, beta=0.2, c=1.0, sigma2=0.5, random_state=8)
    assert not np.array_equal(X, X3)
    assert X.shape == (25, 3)
    assert tree.n_leaves == 25
    assert np.all(tree.heights[:25] == 1.0)
    assert np.all((tree.heights[25:] > 0) & (tree.heights[25:] < 1))
    assert isinstance(tree, rt.Tree)
    # Defaults.
    X4, tree4 = rt.sample_pydt()
    assert X4.shape == (20, 2)
    assert math.isfinite(rt.pydt_log_prior(tree4, alpha=1.0, beta=0.0, c=1.0))
    assert math.isfinite(rt.pydt_log_likelihood(X4, tree4))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": -0.5, "beta": 0.2}, "alpha"),
        ({"alpha": math.nan}, "alpha"),
        ({"alpha": "1"}, "alpha"),
        ({"beta": 1.0}, "beta"),
        ({"beta": -0.1}, "beta"),
        ({"c": 0.0}, "c"),
        ({"c": math.inf}, "c"),
    ],
)
def test_bad_hyperparameters_are_named(kwargs, name):
    tree = {"t": 0.5, "children": [0, 1]}
    with pytest.raises(rt.InvalidParameterError) as info:
        rt.pydt_log_prior(tree, **kwargs)
    assert info.value.parameter == name
    with pytest.raises(rt.InvalidParameterError) as info:
        rt.sample_pydt(n=3, **kwargs)
    assert info.value.parameter == name


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n": 0}, "n"),
        ({"n": 2.5}, "n"),
        ({"n": 2**70}, "n"),
        ({"d": 0}, "d"),
        ({"d": 2**64}, "d"),
        ({"d": True}, "d"),
        ({"sigma2": 0.0}, "sigma2"),
        ({"sigma2": -1.0}, "sigma2"),
        ({"random_state": -1}, "random_state"),
    ],
)
def test_bad_sampler_arguments_are_named(kwargs, name):
    with pytest.raises(rt.InvalidParameterError) as info:
        rt.sample_pydt(**kwargs)
    assert info.value.parameter == name


def test_bad_sigma2_and_data():
    tree = {"t": 0.5, "children": [0, 1]}
    X = np.zeros((2, 2))
    for sigma2 in (0.0, -2.0, math.nan, math.inf):
        with pytest.raises(rt.InvalidParameterError) as info:
            rt.pydt_log_likelihood(X, tree, sigma2=sigma2)
        assert info.value.parameter == "sigma2"
    with pytest.raises(rt.InvalidDataError) as info:
        rt.pydt_log_likelihood(np.array([[0.0, 1.0], [np.nan, 0.0]]), tree)
    assert (info.value.row, info.value.column) == (1, 0)
    with pytest.raises(rt.InvalidTreeError):
        rt.pydt_log_likelihood(np.zeros((3, 1)), tree)


@pytest.mark.parametrize(
    "tree",
    [
        {"t": 0.5, "children": [0, {"t": 0.5, "children": [1, 2]}]},  # not strictly later
        {"t": 0.0, "children": [0, 1]},  # at the origin
        {"t": 1.0, "children": [0, 1]},  # at the leaves
        {"t": 0.7, "children": [0, {"t": 0.2, "children": [1, 2]}]},  # child before parent
        {"t": 0.5, "children": [0, 2]},  # leaves are not 0 .. n - 1
        {"t": 0.5, "children": [0, 0]},
        {"t": 0.5, "children": [0]},
        rt.Tree(2, [[0, 1]], [0.0, 0.0, -1.0]),  # a coalescent tree
        rt.Tree(2, [[0, 1]]),  # no times
    ],
)
def test_invalid_trees_are_rejected(tree):
    with pytest.raises(rt.InvalidTreeError):
        rt.pydt_log_prior(tree)


def test_a_tree_and_its_nested_dicts_agree():
    tree = rt.Tree(4, [[1, 3], [4, 0, 2]], [1.0, 1.0, 1.0, 1.0, 0.75, 0.35])
    as_dict = SMALL_TREES[3]
    assert rt.pydt_log_prior(tree) == rt.pydt_log_prior(as_dict)
    X = np.arange(8.0).reshape(4, 2) / 4
    assert rt.pydt_log_likelihood(X, tree, sigma2=0.7) == rt.pydt_log_likelihood(
        X, as_dict, sigma2=0.7
    )
    # A single point.
    assert rt.pydt_log_prior(0) == 0.0


def test_log_densities_below_the_float_range_raise_instead_of_minus_inf():
    tree = {"t": 0.3, "children": [0, {"t": 0.6, "children": [1, 2]}]}
    # ln Γ(m + α) for α = 1e308 exceeds the largest float: the true value is finite.
    with pytest.raises(rt.NumericalError, match="alpha"):
        rt.pydt_log_prior(tree, alpha=1e308, beta=0.2)
    assert np.isfinite(rt.pydt_log_prior(tree, alpha=1e300, beta=0.2))
    # A probability of zero stays -inf: three branches where α + 2β = 0.
    flat = {"t": 0.3, "children": [0, 1, 2]}
    assert rt.pydt_log_prior(flat, alpha=0.0, beta=0.0) == -np.inf
    X = np.array([[1e308], [-1e308], [1e308]])
    with pytest.raises(rt.NumericalError, match="rescale"):
        rt.pydt_log_likelihood(X, tree)
    assert np.isfinite(rt.pydt_log_likelihood(X / 1e300, tree))
