import sys

import numpy as np
import pytest
import rosetree as rt
from rosetree.exceptions import InvalidParameterError

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from rosetree.plot import plot_tree  # noqa: E402

# Node ids: leaves 0..6, then [0, 4] = 7, [3, [0, 4]] = 8, [1, 2] = 9, [[1, 2], 5, 6] = 10,
# root = 11.
NESTED = [[3, [0, 4]], [[1, 2], 5, 6]]
NAMES = ["a0", "b1", "c2", "d3", "e4", "f5", "g6"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def tree():
    return rt.evaluate_tree(np.zeros((7, 1)), NESTED)


def flatten(t):
    return [t] if isinstance(t, int) else [x for c in t for x in flatten(c)]


def collection(ax, gid):
    (found,) = [c for c in ax.collections if c.get_gid() == gid]
    return found


def segments(ax, gid, orientation="top"):
    """Segments as sorted ((position, height), (position, height)) tuples."""
    out = []
    for seg in collection(ax, gid).get_segments():
        pts = [tuple(map(float, p)) for p in seg]
        if orientation == "left":
            pts = [(y, x) for x, y in pts]
        out.append(tuple(sorted(pts)))
    return sorted(out)


def leaf_axis(ax, orientation):
    axis = ax.yaxis if orientation == "left" else ax.xaxis
    ticks = axis.get_majorticklocs()
    texts = [t.get_text() for t in axis.get_majorticklabels()]
    return [float(x) for x in ticks], texts


# Hand-drawn geometry of NESTED: leaves 3, 0, 4, 1, 2, 5, 6 at positions 0..6; a node sits
# midway between its first and last child, at its number of edges to its deepest leaf:
#   [0, 4] at 1.5, height 1;  [3, [0, 4]] at 0.75, height 2;  [1, 2] at 3.5, height 1;
#   [[1, 2], 5, 6] at (3.5 + 6) / 2 = 4.75, height 2;  root at 2.75, height 3.
EXPECTED_BARS = sorted(
    [((1.0, 1.0), (2.0, 1.0)), ((0.0, 2.0), (1.5, 2.0)), ((3.0, 1.0), (4.0, 1.0)),
     ((3.5, 2.0), (6.0, 2.0)), ((0.75, 3.0), (4.75, 3.0))]
)  # fmt: skip
EXPECTED_STEMS = sorted(
    [((1.0, 0.0), (1.0, 1.0)), ((2.0, 0.0), (2.0, 1.0)), ((0.0, 0.0), (0.0, 2.0)),
     ((1.5, 1.0), (1.5, 2.0)), ((3.0, 0.0), (3.0, 1.0)), ((4.0, 0.0), (4.0, 1.0)),
     ((3.5, 1.0), (3.5, 2.0)), ((5.0, 0.0), (5.0, 2.0)), ((6.0, 0.0), (6.0, 2.0)),
     ((0.75, 2.0), (0.75, 3.0)), ((4.75, 2.0), (4.75, 3.0))]
)  # fmt: skip


@pytest.mark.parametrize("orientation", ["left", "top"])
def test_geometry_matches_hand_drawing(tree, orientation):
    ax = plot_tree(tree, NAMES, orientation=orientation)
    assert segments(ax, "rosetree-bars", orientation) == EXPECTED_BARS
    assert segments(ax, "rosetree-edges", orientation) == EXPECTED_STEMS
    # one stem per edge, one bar per internal node
    assert len(EXPECTED_STEMS) == tree.n_nodes - 1
    assert len(EXPECTED_BARS) == tree.n_nodes - tree.n_leaves


@pytest.mark.parametrize("orientation", ["left", "top"])
def test_leaf_axis_is_left_to_right_order_with_names(tree, orientation):
    ax = plot_tree(tree, NAMES, orientation=orientation)
    ticks, texts = leaf_axis(ax, orientation)
    assert ticks == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert texts == [NAMES[i] for i in flatten(NESTED)]
    assert texts == ["d3", "a0", "e4", "b1", "c2", "f5", "g6"]


def test_left_orientation_puts_root_left_and_first_leaf_on_top(tree):
    ax = plot_tree(tree, orientation="left")
    x0, x1 = ax.get_xlim()
    assert x0 > 3 > 0 > x1  # heights decrease to the right
    y0, y1 = ax.get_ylim()
    assert y0 > y1  # leaf position 0 at the top
    _, texts = leaf_axis(ax, "left")
    assert texts == [str(i) for i in flatten(NESTED)]  # default names: row indices


def test_multiway_bar_spans_all_children(tree):
    ax = plot_tree(tree, orientation="top")
    leaf_pos = {int(t): k for k, t in enumerate(leaf_axis(ax, "top")[1])}
    # The ternary node [[1, 2], 5, 6] at height 2: its bar runs from its first child (the
    # node [1, 2], midway between leaves 1 and 2) to its last (leaf 6), and the middle
    # child's stem ends on it.
    first = 0.5 * (leaf_pos[1] + leaf_pos[2])
    assert ((first, 2.0), (leaf_pos[6], 2.0)) in segments(ax, "rosetree-bars")
    assert ((leaf_pos[5], 0.0), (leaf_pos[5], 2.0)) in segments(ax, "rosetree-edges")
    assert first < leaf_pos[5] < leaf_pos[6]


def test_two_leaf_tree():
    t = rt.evaluate_tree(np.array([[1.0, 0.0], [0.0, 1.0]]), [0, 1])
    ax = plot_tree(t, ["x", "y"], orientation="top")
    assert segments(ax, "rosetree-bars") == [((0.0, 1.0), (1.0, 1.0))]
    assert segments(ax, "rosetree-edges") == [((0.0, 0.0), (0.0, 1.0)), ((1.0, 0.0), (1.0, 1.0))]
    assert leaf_axis(ax, "top")[1] == ["x", "y"]


def test_custom_heights_place_bars(tree):
    heights = np.zeros(tree.n_nodes)
    heights[tree.n_leaves :] = [0.5, 2.5, 1.25, 3.0, 7.0]  # nodes 7 .. 11
    ax = plot_tree(tree, heights=heights, orientation="top")
    assert segments(ax, "rosetree-bars") == sorted(
        [((1.0, 0.5), (2.0, 0.5)), ((0.0, 2.5), (1.5, 2.5)), ((3.0, 1.25), (4.0, 1.25)),
         ((3.5, 3.0), (6.0, 3.0)), ((0.75, 7.0), (4.75, 7.0))]
    )  # fmt: skip
    assert ((0.0, 0.0), (0.0, 2.5)) in segments(ax, "rosetree-edges")  # leaf 3 up to node 8
    ax = plot_tree(tree, heights="size", orientation="top")
    bar_heights = sorted(seg[0][1] for seg in segments(ax, "rosetree-bars"))
    assert bar_heights == [2.0, 2.0, 3.0, 4.0, 7.0]
    assert ((0.0, 0.0), (0.0, 3.0)) in segments(ax, "rosetree-edges")  # leaves stay at 0


def test_fitted_tree_with_cut_clusters_coloured():
    ds = rt.datasets.load_animals()
    est = rt.BayesianRoseTree(model=rt.BetaBernoulli(1.0, 1.0), gamma=0.5).fit(ds.data)
    t = est.tree_
    ax = plot_tree(t, ds.names, clusters="cut", color="black", orientation="left")
    _, texts = leaf_axis(ax, "left")
    assert sorted(texts) == sorted(ds.names)
    assert texts == [ds.names[i] for i in flatten(t.to_nested())]
    edges = collection(ax, "rosetree-edges")
    assert len(edges.get_segments()) == t.n_nodes - 1
    assert len(collection(ax, "rosetree-bars").get_segments()) == t.n_nodes - t.n_leaves

    # An edge is coloured exactly when its parent lies within one cluster of the cut, i.e.
    # when all the parent's rows share a label of tree.cut() whose cluster has 2+ rows.
    labels = t.cut(0.5)
    counts = np.bincount(labels)
    expected = []
    for v in t.internal_nodes:
        rows = t.leaves(v)
        inside = len(set(labels[rows])) == 1 and counts[labels[rows[0]]] >= 2
        expected += [inside] * len(t.children[v])
    colours = [tuple(c) for c in edges.get_colors()]
    black = to_rgba("black")
    assert [c != black for c in colours] == expected
    n_big = int(np.sum(counts >= 2))
    assert n_big >= 2
    assert len(set(colours) - {black}) == n_big  # one colour per cluster
    # leaf names inside a cluster carry its colour
    axis_labels = ax.get_yticklabels()
    for text in axis_labels:
        row = ds.names.index(text.get_text())
        coloured = to_rgba(text.get_color()) != black
        assert coloured == (counts[labels[row]] >= 2)


def test_given_cluster_nodes_colour_their_subtrees(tree):
    # node 10 is [[1, 2], 5, 6]: its bar, the bar of [1, 2] and the five stems below them are
    # red; everything else keeps the default colour, and so do the names outside.
    ax = plot_tree(tree, clusters=[10], cluster_colors=["red"], orientation="top")
    red = to_rgba("red")
    bars = collection(ax, "rosetree-bars")
    coloured = sorted(
        tuple(map(tuple, seg.tolist()))
        for seg, c in zip(bars.get_segments(), bars.get_colors(), strict=True)
        if tuple(c) == red
    )
    assert coloured == [((3.0, 1.0), (4.0, 1.0)), ((3.5, 2.0), (6.0, 2.0))]
    edges = collection(ax, "rosetree-edges")
    assert sum(tuple(c) == red for c in edges.get_colors()) == 5
    red_names = [t.get_text() for t in ax.get_xticklabels() if to_rgba(t.get_color()) == red]
    assert red_names == ["1", "2", "5", "6"]


def test_draws_on_given_axes(tree):
    fig, ax = plt.subplots()
    assert plot_tree(tree, ax=ax) is ax
    assert len(fig.axes) == 1


@pytest.mark.parametrize(
    ("kwargs", "parameter"),
    [
        ({"labels": ["a", "b"]}, "labels"),
        ({"labels": [*NAMES, "extra"]}, "labels"),
        ({"orientation": "bottom"}, "orientation"),
        ({"heights": np.zeros(3)}, "heights"),
        ({"heights": "rank"}, "heights"),
        ({"heights": np.full(10, np.nan)}, "heights"),
        ({"clusters": [99]}, "clusters"),
        ({"clusters": "all"}, "clusters"),
        ({"clusters": "cut", "threshold": 1.5}, "threshold"),
        ({"p": 1}, "p"),
        ({"p": 2.5}, "p"),
        ({"truncate_above": 0}, "truncate_above"),
        ({"truncate_above": "auto"}, "truncate_above"),
    ],
)
def test_bad_arguments_raise(tree, kwargs, parameter):
    with pytest.raises(InvalidParameterError) as info:
        plot_tree(tree, **kwargs)
    assert info.value.parameter == parameter


def test_missing_matplotlib_names_the_extra(tree, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r"bayesian-rosetree\[plot\]"):
        plot_tree(tree)


def test_an_estimator_is_drawn_with_its_labels_in_colour():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rosetree.plot import plot_tree

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(m, 0.1, (5, 2)) for m in (0.0, 5.0, 10.0)])
    est = rt.BayesianRoseTree(rt.NormalInverseWishart(), n_clusters=3).fit(X)
    ax = plot_tree(est)
    # One colour per cluster of labels_ on the tick labels (the leaves' names).
    colours = {}
    for tick in ax.get_yticklabels():
        colours.setdefault(est.labels_[int(tick.get_text())], set()).add(tick.get_color())
    assert len(colours) == 3 and all(len(c) == 1 for c in colours.values())
    assert len({next(iter(c)) for c in colours.values()}) == 3
    plt.close("all")
    with pytest.raises(rt.InvalidParameterError, match="clusters"):
        plot_tree(est.tree_, clusters="labels")


def tick_texts(ax, orientation="left"):
    axis = ax.yaxis if orientation == "left" else ax.xaxis
    return [t.get_text() for t in axis.get_ticklabels()]


@pytest.mark.parametrize(("p", "shown"), [(2, ["(3)", "(4)"]), (3, ["(3)", "(4)"])])
def test_truncation_opens_the_highest_nodes_while_p_clusters_fit(tree, p, shown):
    # heights="size": the root (7 rows) opens into 8 (3 rows) and 10 (4 rows); opening 10
    # next would give 4 clusters, more than p.
    ax = plot_tree(tree, labels=NAMES, heights="size", truncate_above=3, p=p)
    assert tick_texts(ax) == shown
    assert len(segments(ax, "rosetree-bars")) == 1
    assert len(segments(ax, "rosetree-edges")) == 2


def test_truncation_draws_a_closed_cluster_as_a_leaf_and_keeps_single_rows(tree):
    # p = 4: the root, then 10 (4 rows, higher than 8) open: 8, [1, 2] = 9, f5, g6.
    ax = plot_tree(tree, labels=NAMES, heights="size", truncate_above=3, p=4, orientation="top")
    assert tick_texts(ax, "top") == ["(3)", "(2)", "f5", "g6"]
    # The root's bar spans positions 0 .. 2 (8 at 0, 10 midway between 1 and 3), at 7 rows.
    assert segments(ax, "rosetree-bars") == [((0.0, 7.0), (2.0, 7.0)), ((1.0, 4.0), (3.0, 4.0))]
    # Closed clusters stand on the leaves' level: the stem of 8 runs from 0 up to 7.
    assert segments(ax, "rosetree-edges") == sorted(
        [((0.0, 0.0), (0.0, 7.0)), ((2.0, 4.0), (2.0, 7.0)), ((1.0, 0.0), (1.0, 4.0)),
         ((2.0, 0.0), (2.0, 4.0)), ((3.0, 0.0), (3.0, 4.0))]
    )  # fmt: skip


def test_a_large_tree_is_drawn_down_to_its_top_clusters_by_default():
    X = np.random.default_rng(0).normal(size=(300, 2))
    big = rt.BayesianRoseTree(binary=True).fit(X).tree_
    ax = plot_tree(big)
    names = tick_texts(ax)
    assert 2 <= len(names) <= 30
    # Every row is in exactly one drawn cluster.
    sizes = [int(n[1:-1]) if n.startswith("(") else 1 for n in names]
    assert sum(sizes) == 300
    assert (
        len(segments(ax, "rosetree-edges")) == len(names) + len(segments(ax, "rosetree-bars")) - 1
    )
    # A figure for 30 leaves, not a strip for 300.
    assert ax.figure.get_size_inches()[1] <= 0.25 * 30
    plt.close("all")
    full = plot_tree(big, truncate_above=None)
    assert len(tick_texts(full)) == 300
    assert len(segments(full, "rosetree-edges")) == big.n_nodes - 1
    assert len(tick_texts(plot_tree(big, p=5))) <= 5
