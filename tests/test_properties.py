"""Property tests (hypothesis) of the rose-tree mixture's invariants, BRT §1.3–1.4.

The reference computations here are written independently of the Rust core: partitions
are enumerated in Python, cluster likelihoods come from SciPy's ``betaln``, and the mixing
proportions are computed from their definitions.
"""

import itertools
import math

import numpy as np
import pytest
import rosetree as rt
from hypothesis import assume, given
from hypothesis import strategies as st
from rosetree.testing import assert_valid_tree, binary_data, rose_trees
from scipy import special

MIXINGS = ["brt", "gamma", "dp"]


def log_f(X, rows, a=1.0, b=1.0):
    sub = X[list(rows)]
    obs = ~np.isnan(sub)
    k = np.nansum(sub, axis=0)
    n = obs.sum(axis=0)
    return float(np.sum(special.betaln(a + k, b + n - k) - special.betaln(a, b)))


def rows_of(t):
    return [t] if isinstance(t, int) else [r for c in t for r in rows_of(c)]


def enumerate_partitions(t, mixing, gamma, alpha):
    """[(clusters, log m)] and log d of the (sub)tree t, from eqs 1.3, 1.6, 1.7."""
    if isinstance(t, int):
        return [([(t,)], 0.0)], math.log(alpha)
    below = [enumerate_partitions(c, mixing, gamma, alpha) for c in t]
    n_c, n_t = len(t), len(rows_of(t))
    # ln π and ln(1 − π) straight from the definitions, each in the form that keeps its
    # precision when π is close to 0 or 1.
    if mixing == "brt":
        log_1m_pi = (n_c - 1) * math.log1p(-gamma)
        log_pi = math.log(-math.expm1(log_1m_pi))
        log_d = 0.0
    elif mixing == "gamma":
        log_pi, log_1m_pi, log_d = math.log(gamma), math.log1p(-gamma), 0.0
    else:
        log_prod_d = sum(ld for _, ld in below)
        log_a_gamma = math.log(alpha) + math.lgamma(n_t)
        log_d = float(np.logaddexp(log_a_gamma, log_prod_d))
        log_pi, log_1m_pi = log_a_gamma - log_d, log_prod_d - log_d
    out = [([tuple(sorted(rows_of(t)))], log_pi)]
    for combo in itertools.product(*(parts for parts, _ in below)):
        clusters = [c for cl, _ in combo for c in cl]
        out.append((clusters, log_1m_pi + sum(w for _, w in combo)))
    return out, log_d


def brute_force_evidence(X, tree, mixing, gamma, alpha):
    parts, _ = enumerate_partitions(tree, mixing, gamma, alpha)
    terms = [w + sum(log_f(X, c) for c in cl) for cl, w in parts]
    return float(special.logsumexp(terms)), parts


@st.composite
def data_and_tree(draw, max_n=7, binary=False, missing=False):
    n = draw(st.integers(2, max_n))
    d = draw(st.integers(1, 6))
    X = draw(binary_data(n, d, missing=missing))
    tree = draw(rose_trees(range(n), binary=binary))
    return X, tree


gammas = st.floats(0.05, 0.95)
#: The Beta(1, 1) prior that ``log_f`` above assumes.
UNIFORM = rt.BetaBernoulli(alpha=1.0, beta=1.0)
alphas = st.floats(0.1, 5.0)


@given(data_and_tree(missing=True), st.sampled_from(MIXINGS), gammas, alphas)
def test_recursion_equals_sum_over_enumerated_partitions(case, mixing, gamma, alpha):
    X, tree = case
    expected, parts = brute_force_evidence(X, tree, mixing, gamma, alpha)
    assert special.logsumexp([w for _, w in parts]) == pytest.approx(0.0, abs=1e-12)
    fitted = rt.evaluate_tree(X, tree, model=UNIFORM, mixing=mixing, gamma=gamma, dp_alpha=alpha)
    assert fitted.log_evidence == pytest.approx(expected, rel=1e-10, abs=1e-10)
    assert_valid_tree(fitted)
    # The core's own enumeration agrees in count, weights and total.
    core_parts = fitted.partitions()
    assert len(core_parts) == len(parts) == fitted.n_partitions()
    assert special.logsumexp([w for _, w in core_parts]) == pytest.approx(0.0, abs=1e-12)
    got = {tuple(tuple(c) for c in sorted(cl)): w for cl, w in core_parts}
    want = {tuple(sorted(cl)): w for cl, w in parts}
    assert got.keys() == want.keys()
    for key, w in want.items():
        assert got[key] == pytest.approx(w, rel=1e-10, abs=1e-12)


@given(st.integers(2, 9).flatmap(lambda n: rose_trees(range(n), binary=True)), gammas)
def test_eq_1_10_non_finest_mass_of_any_binary_tree(tree, gamma):
    n = len(rows_of(tree))
    X = np.zeros((n, 1))
    parts = rt.evaluate_tree(X, tree, mixing="brt", gamma=gamma).partitions()
    finest = [w for cl, w in parts if len(cl) == n]
    assert len(finest) == 1
    assert 1 - math.exp(finest[0]) == pytest.approx(1 - (1 - gamma) ** (n - 1), rel=1e-10)


@given(
    st.integers(3, 8).flatmap(lambda n: st.tuples(st.just(n), rose_trees(range(n)))),
    binary_data(1, 5),
    gammas,
)
def test_collapsed_tree_wins_on_indistinguishable_data(case, row, gamma):
    # Identical rows: every split partition is less likely than the single cluster
    # (the premise of Proposition 1.3.6), so the flat tree beats any tree with more structure.
    n, tree = case
    assume(any(isinstance(c, list) for c in tree))  # tree has more than one internal node
    X = np.repeat(row, n, axis=0)
    flat = rt.log_evidence(X, list(range(n)), mixing="brt", gamma=gamma)
    assert flat > rt.log_evidence(X, tree, mixing="brt", gamma=gamma)


@given(
    st.integers(2, 8).flatmap(
        lambda n: st.tuples(binary_data(n, 4), rose_trees(range(n), binary=True))
    ),
    gammas,
)
def test_gamma_and_brt_agree_on_binary_trees(case, gamma):
    X, tree = case
    a = rt.log_evidence(X, tree, mixing="gamma", gamma=gamma, binary=True)
    b = rt.log_evidence(X, tree, mixing="brt", gamma=gamma, binary=True)
    assert a == pytest.approx(b, rel=1e-13, abs=1e-13)


def shuffle_tree(t, rng):
    if isinstance(t, int):
        return t
    kids = [shuffle_tree(c, rng) for c in t]
    rng.shuffle(kids)
    return kids


@given(data_and_tree(), st.sampled_from(MIXINGS), st.integers(0, 2**32 - 1))
def test_statistics_merge_in_any_order(case, mixing, seed):
    X, tree = case
    rng = np.random.default_rng(seed)
    a = rt.log_evidence(X, tree, mixing=mixing)
    b = rt.log_evidence(X, shuffle_tree(tree, rng), mixing=mixing)
    assert a == pytest.approx(b, rel=1e-12, abs=1e-12)


def canonical(t):
    if isinstance(t, int):
        return (t,)
    return tuple(sorted((canonical(c) for c in t), key=lambda c: min(_flat(c))))


def _flat(c):
    return [c[0]] if len(c) == 1 and isinstance(c[0], int) else [r for x in c for r in _flat(x)]


def relabel(t, mapping):
    return mapping[t] if isinstance(t, int) else [relabel(c, mapping) for c in t]


@given(
    st.integers(3, 10).flatmap(lambda n: binary_data(n, 8, distinct=True)),
    st.sampled_from(MIXINGS),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_permuting_rows_relabels_the_greedy_tree(X, mixing, binary, seed):
    rng = np.random.default_rng(seed)
    # Distinct per-feature priors, so that no two different merges tie exactly.
    model = rt.BetaBernoulli(alpha=rng.uniform(0.3, 2.0, 8), beta=rng.uniform(0.3, 2.0, 8))
    perm = rng.permutation(len(X))
    est = rt.BayesianRoseTree(model=model, mixing=mixing, binary=binary)
    a = est.fit(X).tree_
    b = est.fit(X[perm]).tree_
    # Row i of X[perm] is row perm[i] of X.
    mapped = relabel(b.to_nested(), {i: int(p) for i, p in enumerate(perm)})
    assert canonical(mapped) == canonical(a.to_nested())
    assert b.log_evidence == pytest.approx(a.log_evidence, rel=1e-12)


@given(
    st.integers(2, 7).flatmap(lambda n: binary_data(n, 6)),
    st.sampled_from(MIXINGS),
    st.booleans(),
)
def test_greedy_never_beats_the_exhaustive_optimum(X, mixing, binary):
    greedy = rt.BayesianRoseTree(mixing=mixing, binary=binary).fit(X)
    assert_valid_tree(greedy.tree_)
    best = rt.optimal_tree(X, mixing=mixing, binary=binary)
    assert greedy.log_evidence_ <= best.log_evidence + 1e-9


def all_rose_trees(items):
    """Every rose tree over ``items`` (Schröder's fourth problem: 1, 1, 4, 26, 236, …)."""
    items = list(items)
    if len(items) == 1:
        yield items[0]
        return
    for blocks in set_partitions(items):
        if len(blocks) >= 2:
            for kids in itertools.product(*(list(all_rose_trees(b)) for b in blocks)):
                yield list(kids)


def set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for p in set_partitions(rest):
        for k in range(len(p)):
            yield [*p[:k], [first, *p[k]], *p[k + 1 :]]
        yield [[first], *p]


@pytest.mark.parametrize(("n", "count"), [(2, 1), (3, 4), (4, 26), (5, 236)])
def test_tree_enumeration_counts_schroeder_numbers(n, count):
    assert len({canonical(t) for t in all_rose_trees(range(n))}) == count


@pytest.mark.parametrize("mixing", MIXINGS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_optimal_tree_is_the_best_of_all_trees(mixing, seed):
    X = (np.random.default_rng(seed).random((5, 10)) < 0.4).astype(float)
    best = max(rt.log_evidence(X, t, mixing=mixing) for t in all_rose_trees(range(5)))
    found = rt.optimal_tree(X, mixing=mixing)
    assert found.log_evidence == pytest.approx(best, rel=1e-12)


@given(data_and_tree(missing=True), st.sampled_from(MIXINGS), gammas, alphas)
def test_predictive_cluster_weights_follow_eq_1_25_and_sum_to_one(case, mixing, gamma, alpha):
    X, tree = case
    fitted = rt.evaluate_tree(X, tree, model=UNIFORM, mixing=mixing, gamma=gamma, dp_alpha=alpha)
    log_w = fitted.log_cluster_weights()
    assert special.logsumexp(log_w) == pytest.approx(0.0, abs=1e-10)
    # Each weight from its ancestor chain, with r_S = π_S f(S) / p(S) taken from the
    # brute-force sum over the partitions of the subtree at S.
    subtrees = {}

    def index(t):
        node = t if isinstance(t, int) else None
        if node is None:
            kids = [index(c) for c in t]
            node = fitted.parent[kids[0]]
        subtrees[int(node)] = t
        return int(node)

    index(tree)

    def r(v):
        if v < fitted.n_leaves:
            return 1.0
        t = subtrees[v]
        parts, _ = enumerate_partitions(t, mixing, gamma, alpha)
        evidence, _ = brute_force_evidence(X, t, mixing, gamma, alpha)
        return math.exp(parts[0][1] + log_f(X, rows_of(t)) - evidence)

    for v in range(fitted.n_nodes):
        w, child = r(v), v
        while fitted.parent[child] >= 0:
            a = int(fitted.parent[child])
            w *= (1 - r(a)) * len(rows_of(subtrees[child])) / len(rows_of(subtrees[a]))
            child = a
        assert math.exp(log_w[v]) == pytest.approx(w, rel=1e-8, abs=1e-12)
