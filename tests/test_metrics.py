"""Tree-quality scores: hand-computed cases, brute-force references, all three tree forms."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import rosetree as rt
from scipy.cluster.hierarchy import linkage, to_tree

SCORES = (rt.dendrogram_purity, rt.subtree_score, rt.leave_one_out_accuracy)


# --------------------------------------------------------------------------- references
# Written from the definitions alone: a tree is the list of its internal nodes, each as
# (set of leaves, number of children); every pair and every leaf is examined directly.
def nodes_of_nested(tree):
    out = []

    def leaves(t):
        if isinstance(t, list):
            sets = [leaves(c) for c in t]
            s = frozenset().union(*sets)
            out.append((s, len(t)))
            return s
        return frozenset([t])

    leaves(tree)
    return out


def nodes_of_linkage(Z):
    out = []
    stack = [to_tree(Z)]
    while stack:
        node = stack.pop()
        if not node.is_leaf():
            out.append((frozenset(node.pre_order()), 2))
            stack += [node.get_left(), node.get_right()]
    return out


def nodes_of_rosetree(tree):
    return [(frozenset(tree.leaves(v)), len(tree.children[v])) for v in tree.internal_nodes]


def lca(nodes, i, j):
    return min((s for s, _ in nodes if i in s and j in s), key=len)


def purity_reference(nodes, y):
    values = []
    for i, j in itertools.combinations(range(len(y)), 2):
        if y[i] == y[j]:
            s = lca(nodes, i, j)
            values.append(Fraction(sum(y[k] == y[i] for k in s), len(s)))
    return float(sum(values) / len(values))


def subtree_reference(nodes, y):
    """Teh et al.'s count; a pure node with c children counts c - 1 times."""
    pure = sum(c - 1 for s, c in nodes if len({y[k] for k in s}) == 1)
    return pure / (len(y) - len(set(y)))


def loo_reference(nodes, y):
    """Majority label of the nearest leaves in the tree (smallest LCA); ties split."""
    total = Fraction(0)
    n = len(y)
    for i in range(n):
        dist = {j: len(lca(nodes, i, j)) for j in range(n) if j != i}
        nearest = [j for j in dist if dist[j] == min(dist.values())]
        votes = Counter(y[j] for j in nearest)
        top = [label for label, v in votes.items() if v == max(votes.values())]
        total += Fraction(int(y[i] in top), len(top))
    return float(total / n)


REFERENCES = (purity_reference, subtree_reference, loo_reference)


def random_nested(n, rng, max_children=4):
    """A random rose tree over rows 0 .. n-1: merge 2..max_children random trees at a time."""
    forest = [int(i) for i in rng.permutation(n)]
    while len(forest) > 1:
        k = int(rng.integers(2, min(max_children, len(forest)) + 1))
        picked = sorted(rng.choice(len(forest), k, replace=False).tolist(), reverse=True)
        forest.append([forest.pop(p) for p in picked])
    return forest[0]


def random_labels(n, rng):
    while True:
        y = rng.integers(0, int(rng.integers(2, 5)), n)
        if np.bincount(y).max() >= 2:
            return y


# --------------------------------------------------------------------------- by hand
def test_hand_computed_binary_tree():
    # [[0, 1], [2, [3, 4]]] with labels a a b b a. Internal nodes: A = {0, 1} (a a),
    # B = {3, 4} (b a), C = {2, 3, 4} (b b a), root (a a b b a).
    tree, y = [[0, 1], [2, [3, 4]]], ["a", "a", "b", "b", "a"]
    # Purity, over the same-class pairs: (0,1) meet in A, purity 1; (0,4) and (1,4) meet at
    # the root, 3/5 of it is a; (2,3) meet in C, 2/3 of it is b.
    assert rt.dendrogram_purity(tree, y) == pytest.approx((1 + 3 / 5 + 3 / 5 + 2 / 3) / 4)
    assert rt.dendrogram_purity(tree, y) == pytest.approx(43 / 60, abs=1e-15)
    # Subtree: only A is pure; n - #classes = 5 - 2 = 3.
    assert rt.subtree_score(tree, y) == pytest.approx(1 / 3, abs=1e-15)
    # Leave-one-out: 0 -> {1} = a, right; 1 -> {0} = a, right; 2 -> {3, 4} = b, a: a tie
    # that holds b, 1/2; 3 -> {4} = a, wrong; 4 -> {3} = b, wrong. (1 + 1 + 1/2) / 5.
    assert rt.leave_one_out_accuracy(tree, y) == pytest.approx(0.5, abs=1e-15)


def test_purity_averages_pairs_not_leaves():
    # Classes of unequal size: a = {0, 1, 4} (3 pairs), b = {2, 3} (1 pair). Averaging per
    # leaf (draw a leaf, then a partner) would give (0.8 + 0.8 + 0.6 + 2/3 + 2/3) / 5 =
    # 0.70667; the pair average is 43/60 = 0.71667.
    value = rt.dendrogram_purity([[0, 1], [2, [3, 4]]], [0, 0, 1, 1, 0])
    assert value == pytest.approx(43 / 60, abs=1e-15)
    assert value != pytest.approx(0.70667, abs=1e-4)


def test_hand_computed_multiway_tree():
    # One node with three leaves a a b: the pair (0, 1) meets at the root, 2/3 of it a.
    # No internal node is pure. Leave-one-out: 0 -> {1, 2} = a, b tie, 1/2; 1 likewise;
    # 2 -> {0, 1} = a a, wrong. (1/2 + 1/2 + 0) / 3.
    y = ["a", "a", "b"]
    assert rt.dendrogram_purity([0, 1, 2], y) == pytest.approx(2 / 3, abs=1e-15)
    assert rt.subtree_score([0, 1, 2], y) == 0.0
    assert rt.leave_one_out_accuracy([0, 1, 2], y) == pytest.approx(1 / 3, abs=1e-15)


def test_label_values_do_not_matter():
    rng = np.random.default_rng(5)
    tree, y = random_nested(15, rng), random_labels(15, rng)
    names = np.array(["z", "m", "a", "q"])[y]
    for score in SCORES:
        assert score(tree, names) == pytest.approx(score(tree, y), abs=1e-15)
        assert score(tree, list(y + 10)) == pytest.approx(score(tree, y), abs=1e-15)


# --------------------------------------------------------------------------- brute force
@pytest.mark.parametrize("seed", range(40))
def test_random_rose_trees_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 16))
    tree, y = random_nested(n, rng), random_labels(n, rng)
    nodes = nodes_of_nested(tree)
    for score, reference in zip(SCORES, REFERENCES, strict=True):
        assert score(tree, y) == pytest.approx(reference(nodes, y), abs=1e-12)


@pytest.mark.parametrize("method", ["average", "single", "complete", "ward"])
def test_scipy_linkages_match_brute_force(method):
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(c, 1.0, (8, 2)) for c in (0.0, 2.0, 4.0)])
    y = np.repeat([0, 1, 2], 8)
    Z = linkage(X, method)
    nodes = nodes_of_linkage(Z)
    for score, reference in zip(SCORES, REFERENCES, strict=True):
        assert score(Z, y) == pytest.approx(reference(nodes, y), abs=1e-12)


# --------------------------------------------------------------------------- multi-way
def binarisations(tree):
    """Every binary tree obtained by replacing each multi-way node by binary merges."""
    if not isinstance(tree, list):
        yield tree
        return
    for kids in itertools.product(*[list(binarisations(c)) for c in tree]):
        yield from _binary_over(list(kids))


def _binary_over(items):
    if len(items) == 1:
        yield items[0]
        return
    first, rest = items[0], items[1:]
    # Split into two groups; the group holding the first item is listed first, so each
    # unordered split appears once.
    for r in range(len(rest)):
        for chosen in itertools.combinations(range(len(rest)), r):
            left = [first] + [rest[i] for i in chosen]
            right = [rest[i] for i in range(len(rest)) if i not in chosen]
            for a in _binary_over(left):
                for b in _binary_over(right):
                    yield [a, b]


def paper_subtree_score(binary_tree, y):
    """Teh et al.'s definition, literally, on a binary tree."""
    pure = sum(1 for s, _ in nodes_of_nested(binary_tree) if len({y[k] for k in s}) == 1)
    return pure / (len(y) - len(set(y)))


def test_binarised_pure_node_keeps_purity_and_subtree_score():
    # Each class is one flat node; every binarisation is also perfect.
    tree, y = [[0, 1, 2], [3, 4]], ["a", "a", "a", "b", "b"]
    for binary in binarisations(tree):
        for score in SCORES:
            assert score(binary, y) == 1.0
    for score in SCORES:
        assert score(tree, y) == 1.0


def test_binarising_an_impure_node_changes_scores():
    y = ["a", "a", "b"]
    # [[0, 1], 2] lets the a-pair meet in a pure node; [[0, 2], 1] does not.
    assert rt.dendrogram_purity([[0, 1], 2], y) == 1.0
    assert rt.dendrogram_purity([[0, 2], 1], y) == pytest.approx(2 / 3, abs=1e-15)
    assert rt.subtree_score([[0, 1], 2], y) == 1.0
    assert rt.subtree_score([[0, 2], 1], y) == 0.0
    assert rt.leave_one_out_accuracy([[0, 1], 2], y) == pytest.approx(2 / 3, abs=1e-15)
    # ... while the flat node gives 2/3, 0 and 1/3 (test_hand_computed_multiway_tree).


@pytest.mark.parametrize("seed", range(12))
def test_subtree_score_is_the_least_favourable_binarisation(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(3, 8))
    tree, y = random_nested(n, rng, max_children=4), random_labels(n, rng)
    scores = [paper_subtree_score(b, y) for b in binarisations(tree)]
    assert rt.subtree_score(tree, y) == pytest.approx(min(scores), abs=1e-12)


# --------------------------------------------------------------------------- three forms
@pytest.fixture(scope="module")
def animals():
    return rt.datasets.load_animals()


def test_binary_rosetree_linkage_and_nested_agree(animals):
    est = rt.BayesianRoseTree(binary=True).fit(animals.data)
    tree = est.tree_
    nested = tree.to_nested()
    Z = tree.to_linkage()
    y = animals.target
    nodes = nodes_of_rosetree(tree)
    for score, reference in zip(SCORES, REFERENCES, strict=True):
        expected = reference(nodes, y)
        assert score(tree, y) == pytest.approx(expected, abs=1e-12)
        assert score(nested, y) == pytest.approx(expected, abs=1e-12)
        assert score(Z, y) == pytest.approx(expected, abs=1e-12)


def test_multiway_rosetree_and_its_forms(animals):
    tree = rt.BayesianRoseTree().fit(animals.data).tree_
    assert max(len(c) for c in tree.children) > 2  # a real rose tree
    y = animals.target
    Z = tree.to_linkage()
    for score, reference in zip(SCORES, REFERENCES, strict=True):
        expected = reference(nodes_of_rosetree(tree), y)
        assert score(tree, y) == pytest.approx(expected, abs=1e-12)
        assert score(tree.to_nested(), y) == pytest.approx(expected, abs=1e-12)
        # to_linkage replaces multi-way nodes by chains: a different (binary) tree, scored
        # as such.
        assert score(Z, y) == pytest.approx(reference(nodes_of_linkage(Z), y), abs=1e-12)
    assert rt.subtree_score(Z, y) >= rt.subtree_score(tree, y)


def test_pure_trees_score_one():
    y = np.repeat([3, 1, 2], [4, 5, 3])
    rows = np.arange(12)
    flat = [rows[y == c].tolist() for c in (3, 1, 2)]
    deep = [[[0, 1], [2, 3]], [[4, [5, 6]], [7, 8]], [9, [10, 11]]]
    Z = linkage(np.repeat([0.0, 10.0, 20.0], [4, 5, 3])[:, None] + 0.01 * rows[:, None])
    for tree in (flat, deep, Z):
        for score in SCORES:
            assert score(tree, y) == 1.0


# --------------------------------------------------------------------------- deep trees
def chain_references(y):
    """Scores of the chain ((((0, 1), 2), 3) ...), walked once with running counts."""
    n, counts = len(y), Counter()
    terms, credits = [], [float(y[0] == y[1])]  # leaf 0's only neighbour is leaf 1
    pairs = pure = 0
    for j in range(n):
        if j >= 1:
            # Leaf j meets every earlier leaf at the node over 0 .. j, which has j + 1
            # leaves; the earlier leaves are also j's nearest neighbours.
            same = counts[y[j]]
            pairs += same
            terms.append(same * (same + 1) / (j + 1))
            top = [k for k, v in counts.items() if v == max(counts.values())]
            credits.append((y[j] in top) / len(top))
        counts[y[j]] += 1
        pure += j >= 1 and len(counts) == 1
    return math.fsum(terms) / pairs, pure / (n - len(counts)), math.fsum(credits) / n


def test_deep_chain_of_100000_leaves():
    n = 100_000
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, n)
    y[:40], y[40] = 2, 0  # a pure bottom of the chain: 39 pure nodes
    Z = np.empty((n - 1, 4))
    Z[:, 0] = np.r_[0, np.arange(n, 2 * n - 2)]
    Z[:, 1] = np.arange(1, n)
    Z[:, 2] = np.arange(1, n)
    Z[:, 3] = np.arange(2, n + 1)
    nested = 0
    for i in range(1, n):
        nested = [nested, i]
    expected = chain_references(y)
    assert expected[1] == pytest.approx(39 / (n - 3))
    for tree in (Z, nested):
        for score, value in zip(SCORES, expected, strict=True):
            assert score(tree, y) == pytest.approx(value, rel=1e-12)


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("score", SCORES)
def test_length_mismatch_names_y(score, animals):
    tree = rt.BayesianRoseTree(binary=True).fit(animals.data[:6]).tree_
    for form in (tree, tree.to_linkage(), tree.to_nested()):
        for y in ([0, 0, 1, 1, 1], [0, 0, 1, 1, 1, 1, 1]):
            with pytest.raises(rt.InvalidParameterError, match="y has") as info:
                score(form, y)
            assert info.value.parameter == "y"


@pytest.mark.parametrize("score", SCORES)
@pytest.mark.parametrize(
    "y",
    [
        [0, 1, 2, 3],  # every class has one leaf: no pair
        [[0, 0], [1, 1]],  # not 1-D
        [0.0, np.nan, 1.0, 1.0],
    ],
)
def test_bad_labels_name_y(score, y):
    with pytest.raises(rt.InvalidParameterError) as info:
        score([[0, 1], [2, 3]], y)
    assert info.value.parameter == "y"


@pytest.mark.parametrize("score", SCORES)
def test_bad_trees(score):
    y = [0, 0, 1, 1]
    with pytest.raises(rt.InvalidParameterError, match="tree must be") as info:
        score({"a": 1}, y)
    assert info.value.parameter == "tree"
    with pytest.raises(rt.InvalidParameterError, match="at least 2 leaves") as info:
        score([0], [0])
    assert info.value.parameter == "tree"
    with pytest.raises(rt.InvalidTreeError, match="row 0 appears 2 times"):
        score([[0, 0], [2, 3]], y)
    with pytest.raises(rt.InvalidTreeError, match="empty list"):
        score([[0, 1], [], [2, 3]], y)
    with pytest.raises(rt.InvalidTreeError, match="linkage"):
        score(np.array([[0.0, 1.0, 1.0, 2.0], [0.0, 4.0, 2.0, 3.0], [4.0, 5.0, 3.0, 4.0]]), y)
    with pytest.raises(rt.InvalidTreeError, match="linkage"):
        score(np.zeros((3, 3)), y)
