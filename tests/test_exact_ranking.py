"""Greedy merges are ranked as exact arithmetic ranks them.

A slow reference of the greedy search (BRT Figure 1.4; Heller & Ghahramani's BHC for
``merge_rule="posterior"``) is written here from the equations with mpmath at 300 digits,
from the double ``ln f`` values of an independent Beta-Bernoulli marginal (SciPy's
``betaln``, per-feature pseudo-counts). On well-separated clusters the top merges are
hopeless: their likelihood ratios round to the same double, ``ln(1 - pi)``, and only exact
arithmetic orders them. The core's trees must be the reference's, merge for merge.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import mpmath
import numpy as np
import pytest
import rosetree as rt
from scipy import special

DIGITS = 300
SEEDS = (0, 2)
OPS = ("join", "absorb", "absorb_reverse", "collapse")


def log_f(X, rows, a, b):
    """``ln f`` of the Beta-Bernoulli cluster model as a double (BRT eq 1.19)."""
    sub = X[list(rows)]
    k, n = sub.sum(axis=0), len(rows)
    return float(np.sum(special.betaln(a + k, b + n - k) - special.betaln(a, b)))


@dataclass
class Tree:
    leaves: tuple[int, ...]
    children: tuple[int, ...]  # tree ids; empty for a leaf
    log_p: mpmath.mpf
    log_pi: mpmath.mpf
    log_1m_pi: mpmath.mpf
    log_d: mpmath.mpf


class Reference:
    """The greedy search, every quantity an mpmath number with ``DIGITS`` digits."""

    def __init__(self, X, mixing, gamma, alpha, binary, rule):
        self.X, self.mixing, self.binary, self.rule = X, mixing, binary, rule
        self.gamma, self.alpha = mpmath.mpf(gamma), mpmath.mpf(alpha)
        self.cache = {}
        # The smallest |u - v| gap met by a merge that was taken or compared: the reference
        # is exact only while e^{-gap} is far above 10^-DIGITS.
        self.widest_gap = mpmath.mpf(0)
        self.rounding_decided = 0

    def lf(self, rows):
        key = tuple(sorted(rows))
        if key not in self.cache:
            self.cache[key] = mpmath.mpf(log_f(self.X, key, *HYPER))
        return self.cache[key]

    def prior(self, n_children, n_leaves, sum_log_d):
        if self.mixing == "brt":
            log_1m_pi = (n_children - 1) * mpmath.log1p(-self.gamma)
            return mpmath.log(-mpmath.expm1(log_1m_pi)), log_1m_pi, mpmath.mpf(0)
        if self.mixing == "gamma":
            return mpmath.log(self.gamma), mpmath.log1p(-self.gamma), mpmath.mpf(0)
        log_a_gamma = mpmath.log(self.alpha) + mpmath.loggamma(n_leaves)
        log_d = logaddexp(log_a_gamma, sum_log_d)
        return log_a_gamma - log_d, sum_log_d - log_d, log_d

    def leaf(self, i):
        lf = self.lf([i])
        log_d = mpmath.log(self.alpha) if self.mixing == "dp" else mpmath.mpf(0)
        return Tree((i,), (), lf, mpmath.mpf(0), mpmath.mpf("-inf"), log_d)

    def node(self, leaves, children, trees):
        kids = [trees[c] for c in children]
        prior = self.prior(len(kids), len(leaves), sum(k.log_d for k in kids))
        u = prior[0] + self.lf(leaves)
        v = prior[1] + sum(k.log_p for k in kids)
        self.widest_gap = max(self.widest_gap, abs(u - v))
        return Tree(tuple(sorted(leaves)), tuple(children), logaddexp(u, v), *prior), u - v

    def candidates(self, i, j, trees):
        a, b = trees[i], trees[j]
        yield "join", (i, j)
        if not self.binary:
            if a.children:
                yield "absorb", (*a.children, j)
            if b.children:
                yield "absorb_reverse", (*b.children, i)
            if a.children and b.children:
                yield "collapse", (*a.children, *b.children)

    def best_merge(self, i, j, trees):
        """(key, op, children) of the pair's best operation (eq 1.23; ties: earlier op)."""
        best = None
        for op, children in self.candidates(i, j, trees):
            t, log_odds = self.node(trees[i].leaves + trees[j].leaves, children, trees)
            ratio = t.log_p - trees[i].log_p - trees[j].log_p
            if best is None or ratio > best[0]:
                best = (ratio, op, children, log_odds)
        ratio, op, children, log_odds = best
        key = ratio if self.rule == "likelihood_ratio" else log_odds
        return key, op, children

    def fit(self):
        n = len(self.X)
        trees = {i: self.leaf(i) for i in range(n)}
        live = list(range(n))
        scores = {}
        while len(live) > 1:
            for i, j in itertools.combinations(live, 2):
                if (i, j) not in scores:
                    scores[(i, j)] = self.best_merge(i, j, trees)
            # Highest key, then the lowest pair of ids.
            (i, j), (key, _, children) = max(
                scores.items(), key=lambda kv: (kv[1][0], -kv[0][0], -kv[0][1])
            )
            rounded = float(key)
            if any(float(s[0]) == rounded and p < (i, j) for p, s in scores.items() if p != (i, j)):
                self.rounding_decided += 1
            m = max(trees) + 1
            trees[m], _ = self.node(trees[i].leaves + trees[j].leaves, children, trees)
            live = [t for t in live if t not in (i, j)] + [m]
            scores = {p: s for p, s in scores.items() if i not in p and j not in p}
        return canonical_of(trees, live[0]), trees[live[0]].log_p


def logaddexp(a, b):
    hi, lo = (a, b) if a >= b else (b, a)
    if lo == mpmath.mpf("-inf"):
        return hi
    return hi + mpmath.log1p(mpmath.exp(lo - hi))


def canonical_of(trees, t):
    kids = trees[t].children
    if not kids:
        return trees[t].leaves[0]
    return frozenset(canonical_of(trees, c) for c in kids)


def canonical(nested):
    if isinstance(nested, list):
        return frozenset(canonical(c) for c in nested)
    return nested


# Per-feature pseudo-counts, all different: with symmetric ones, clusters whose counts agree up
# to a permutation of the features would tie exactly, and ties are settled by how each side
# rounds its sums, not by the rule under test.
HYPER = (
    np.linspace(0.6, 1.4, 32) + np.sqrt(np.arange(32)) / 97,
    np.linspace(1.3, 0.7, 32) + np.sqrt(np.arange(32) + 0.5) / 89,
)


def separated_clusters(seed, sizes=(2, 3, 4, 5, 6, 7, 3, 2), d=32, flip=0.05):
    """Clusters of binary rows around random prototypes, shuffled.

    Under ``"dp"`` the prior of a subtree depends on its shape, and subtrees of one size and
    nearly one shape have priors that agree to 25 digits and more: beyond the doubles in
    which the core holds ``ln d``. Clusters of different sizes keep the test away from such
    near-ties, which no double-precision prior can order.
    """
    rng = np.random.default_rng(seed)
    protos = rng.random((len(sizes), d)) < 0.5
    X = np.repeat(protos, sizes, axis=0)
    X = np.where(rng.random(X.shape) < flip, ~X, X).astype(float)
    return X[rng.permutation(len(X))]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize(
    ("mixing", "gamma", "alpha"), [("brt", 0.5, 1.0), ("gamma", 0.3, 1.0), ("dp", 0.5, 2.0)]
)
@pytest.mark.parametrize("rule", ["likelihood_ratio", "posterior"])
def test_greedy_tree_is_the_exact_arithmetic_one(seed, binary, mixing, gamma, alpha, rule):
    X = separated_clusters(seed)
    with mpmath.workdps(DIGITS):
        ref = Reference(X, mixing, gamma, alpha, binary, rule)
        expected, log_p = ref.fit()
        # The reference resolves every gap it met.
        assert ref.widest_gap < DIGITS * np.log(10) / 2
        est = rt.BayesianRoseTree(
            model=rt.BetaBernoulli(alpha=HYPER[0], beta=HYPER[1]),
            mixing=mixing,
            gamma=gamma,
            dp_alpha=alpha,
            binary=binary,
            merge_rule=rule,
        ).fit(X)
        assert canonical(est.tree_.to_nested()) == expected
        assert est.log_evidence_ == pytest.approx(float(log_p), rel=1e-12)


def test_the_data_exercise_rounding():
    """Rounded to doubles, some of these merges tie with a pair of lower ids, which would win
    the tie: the test above would fail if the core ranked rounded scores."""
    with mpmath.workdps(DIGITS):
        for binary in (False, True):
            decided = 0
            for seed in SEEDS:
                ref = Reference(
                    separated_clusters(seed), "brt", 0.5, 1.0, binary, "likelihood_ratio"
                )
                ref.fit()
                decided += ref.rounding_decided
            assert decided >= 3


def reference_contraction(tree, X, mixing, gamma):
    """Edge contraction of ``tree`` (a fitted ``RoseTree``) in mpmath: passes over the
    internal nodes in id order, contracting a node into its parent whenever that raises
    ``ln p(D | T)``, until none does."""
    n = tree.n_leaves
    children = {v: list(tree.children[v]) for v in tree.internal_nodes}
    parent = {int(c): v for v, kids in children.items() for c in kids}
    leaves = {v: tree.leaves(v) for v in range(tree.n_nodes)}
    ref = Reference(X, mixing, gamma, 1.0, False, "likelihood_ratio")

    def log_p(v, kids_of):
        if v < n:
            return ref.lf([v])
        kids = kids_of[v]
        log_pi, log_1m_pi, _ = ref.prior(len(kids), len(leaves[v]), 0)
        return logaddexp(
            log_pi + ref.lf(leaves[v]), log_1m_pi + sum(log_p(c, kids_of) for c in kids)
        )

    improved = True
    while improved:
        improved = False
        for v in sorted(children):
            u = parent.get(v)
            if u is None or v not in children:
                continue
            trial = dict(children)
            trial[u] = [c for c in children[u] if c != v] + children[v]
            del trial[v]
            if log_p(u, trial) > log_p(u, children):
                for c in children[v]:
                    parent[c] = u
                children = trial
                improved = True
    root = max(children)

    def nested(v):
        return v if v < n else frozenset(nested(c) for c in children[v])

    return nested(root)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("mixing", "gamma"), [("brt", 0.5), ("brt", 0.2), ("gamma", 0.3)])
def test_edge_contraction_is_the_exact_arithmetic_one(seed, mixing, gamma):
    # Contracting the binary (BHC) tree: at its hopeless top, whether a contraction gains is
    # decided by terms far below a double's resolution.
    X = separated_clusters(seed)
    kwargs = dict(
        model=rt.BetaBernoulli(alpha=HYPER[0], beta=HYPER[1]),
        mixing=mixing,
        gamma=gamma,
        binary=True,
    )
    greedy = rt.BayesianRoseTree(**kwargs).fit(X)
    contracted = rt.BayesianRoseTree(**kwargs, contract=True).fit(X)
    with mpmath.workdps(DIGITS):
        expected = reference_contraction(greedy.tree_, X, mixing, gamma)
    assert canonical(contracted.tree_.to_nested()) == expected
    assert contracted.tree_.n_nodes < greedy.tree_.n_nodes
    assert contracted.log_evidence_ > greedy.log_evidence_
