"""The tree type shared by every model family: heights in each family's direction."""

import pickle

import numpy as np
import pytest
import rosetree as rt
from scipy.cluster import hierarchy

# ((0, 1), (2, 3)): node 4 = (0, 1), 5 = (2, 3), 6 = root.
INTERNAL = [[0, 1], [2, 3], [4, 5]]
DISTANCES = np.array([0, 0, 0, 0, 1.0, 2.0, 3.5])


@pytest.mark.parametrize(
    "heights",
    [DISTANCES, -DISTANCES, 1.0 - DISTANCES / 4.0],
    ids=["growing from 0", "coalescent times", "divergence times"],
)
def test_heights_in_any_direction_give_scipy_linkage_and_newick(heights):
    tree = rt.Tree(4, INTERNAL, heights)
    scale = abs(heights[-1] - heights[0]) / 3.5
    Z = tree.to_linkage()
    assert hierarchy.is_valid_linkage(Z) and hierarchy.is_monotonic(Z)
    np.testing.assert_allclose(Z[:, 2], scale * np.array([1.0, 2.0, 3.5]))
    # SciPy's own cut of the matrix equals the tree's.
    labels = hierarchy.fcluster(Z, 1.5 * scale, "distance")
    assert len(set(labels)) == 3 and labels[0] == labels[1]
    assert tree.clusters_at_height(1.5 * scale) == [2, 3, 4]
    assert tree.max_clusters_nodes(2) == [4, 5]
    np.testing.assert_array_equal(tree.max_clusters(2), [0, 0, 1, 1])
    newick = tree.to_newick(lengths=True)
    # Every leaf is at the same distance from the root.
    assert newick.count(":") == 6
    assert tree.to_newick() == "((0,1),(2,3));"
    assert tree.to_nested() == [[0, 1], [2, 3]]
    back = pickle.loads(pickle.dumps(tree))
    np.testing.assert_array_equal(back.heights, heights)
    assert back.to_newick(lengths=True) == newick
    assert "height" in tree.format() and "height" in str(tree.to_dict()["root"])


def test_a_tree_without_heights_keeps_its_structure_and_says_what_it_lacks():
    tree = rt.Tree(4, INTERNAL)
    assert tree.heights is None
    assert tree.leaves(5) == [2, 3] and tree.n_partitions() == 5
    assert list(tree.parent) == [4, 4, 5, 5, 6, 6, -1]
    for call in (
        tree.to_linkage,
        lambda: tree.to_newick(lengths=True),
        lambda: tree.max_clusters(2),
        lambda: tree.clusters_at_height(1.0),
    ):
        with pytest.raises(rt.InvalidTreeError, match="no heights"):
            call()
    assert pickle.loads(pickle.dumps(tree)).to_nested() == [[0, 1], [2, 3]]


@pytest.mark.parametrize(
    ("heights", "match"),
    [
        ([0, 0, 0, 0, 1, 2], "expected 7 heights"),
        ([0, 0, 0, 1, 1, 2, 3], "share one height"),
        ([0, 0, 0, 0, 3, 1, 2], "nearer the leaves"),
        ([0, 0, 0, 0, 1, np.nan, 3], "NaN"),
    ],
)
def test_inconsistent_heights_are_refused(heights, match):
    with pytest.raises(rt.InvalidTreeError, match=match):
        rt.Tree(4, INTERNAL, heights)


def test_a_rose_tree_is_a_tree_with_its_own_heights():
    X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 1, 1]], dtype=float)
    tree = rt.BayesianRoseTree(model=rt.BetaBernoulli(alpha=1.0, beta=1.0)).fit(X).tree_
    assert isinstance(tree, rt.Tree)
    # The heights are the path maxima of -ln r, and the shared structure agrees.
    for v in range(tree.n_nodes):
        path, u = [], v
        while u != -1:
            path.append(u)
            u = tree.parent[u]
        assert tree.heights[v] == pytest.approx(-max(tree.log_r[path]), abs=0)
    shared = rt.Tree(tree.n_leaves, [list(c) for c in tree.children[tree.n_leaves :]], tree.heights)
    np.testing.assert_array_equal(shared.to_linkage(), tree.to_linkage())
    assert shared.to_newick(lengths=True) == tree.to_newick(lengths=True)


def test_a_coalescent_tree_plots_cuts_and_converts_like_a_rose_tree():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from rosetree.plot import dendrogram_layout, plot_tree

    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 0.1, (5, 2)), rng.normal(5, 0.1, (5, 2))])
    tree = rt.KingmanCoalescent(Lambda=1.0).fit(X).tree_
    assert isinstance(tree, rt.Tree) and tree.heights[-1] < 0
    np.testing.assert_array_equal(tree.distances, -tree.heights)
    _, h = dendrogram_layout(tree, heights="tree")
    np.testing.assert_array_equal(h, tree.distances)
    plot_tree(tree, heights="tree", clusters=tree.max_clusters_nodes(2))
    # The two groups are the two clusters at any height between their merge and the root's.
    cut = 0.5 * (tree.distances[-1] + max(tree.distances[list(tree.children[-1])]))
    labels = tree.labels_at_height(cut)
    assert sorted(np.bincount(labels)) == [5, 5]
    np.testing.assert_array_equal(labels, tree.max_clusters(2))
    with pytest.raises(rt.InvalidParameterError, match="needs a RoseTree"):
        plot_tree(tree, clusters="cut")


def test_tree_scores_accept_any_family_s_tree():
    # ((0, 1), (2, 3)) with classes a a b b is pure; ((0, 2), (1, 3)) is not.
    pure = rt.Tree(4, INTERNAL, -DISTANCES)
    mixed = rt.Tree(4, [[0, 2], [1, 3], [4, 5]], -DISTANCES)
    y = ["a", "a", "b", "b"]
    assert rt.dendrogram_purity(pure, y) == 1.0
    # Each same-class pair meets only at the root, whose 4 leaves hold 2 of its class.
    assert rt.dendrogram_purity(mixed, y) == 0.5


@pytest.mark.parametrize("node", [-1, 5, 99, 2**70, float("inf"), 1.0, True, "0"])
def test_node_ids_outside_the_tree_are_named(node):
    tree = rt.Tree(3, [[0, 1], [2, 3]])
    for method in (tree.leaves, tree.to_nested):
        with pytest.raises(rt.InvalidParameterError) as info:
            method(node)
        assert info.value.parameter == "node"
    assert tree.leaves(np.int64(3)) == [0, 1]
    assert tree.to_nested() == [2, [0, 1]]
