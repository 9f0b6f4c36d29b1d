"""Dendrograms of rose trees with matplotlib (the ``bayesian-rosetree[plot]`` extra).

A rose-tree node may have any number of children, so it is drawn as one bar that spans all
of its children, with a stem from each child up to the bar, rather than as a chain of binary
merges. matplotlib is imported only when a drawing is made.

>>> import rosetree as rt
>>> from rosetree.plot import plot_tree
>>> animals = rt.datasets.load_animals()
>>> est = rt.BayesianRoseTree().fit(animals.data)
>>> ax = plot_tree(est.tree_, labels=animals.names, clusters="cut")  # doctest: +SKIP
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._validation import check_choice, check_count, is_int
from .exceptions import InvalidParameterError
from .tree import Tree

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["dendrogram_layout", "leaf_order", "plot_tree"]

_ORIENTATIONS = ("left", "top")

#: ``gid`` of the line collections that :func:`plot_tree` adds to the axes.
EDGES_GID = "rosetree-edges"
BARS_GID = "rosetree-bars"


def _import_pyplot() -> Any:
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "rosetree.plot needs matplotlib; install it with "
            "`pip install 'bayesian-rosetree[plot]'` (or `pip install matplotlib`)"
        ) from exc
    return plt


def leaf_order(tree: Tree) -> list[int]:
    """Data rows in the left-to-right order of the tree.

    Children are visited in the order of :attr:`Tree.children` (the order of
    :meth:`Tree.to_nested`), depth first.
    """
    order: list[int] = []
    stack = [tree.root]
    while stack:
        v = stack.pop()
        if v < tree.n_leaves:
            order.append(v)
        else:
            stack.extend(reversed(tree.children[v]))
    return order


def _node_heights(tree: Tree, heights: Any) -> np.ndarray:
    if isinstance(heights, str):
        if heights == "depth":
            h = np.zeros(tree.n_nodes)
            for v in tree.internal_nodes:
                h[v] = 1.0 + max(h[c] for c in tree.children[v])
            return h
        if heights in ("posterior", "tree"):
            if tree.distances is None:
                raise InvalidParameterError(
                    f"heights={heights!r} needs a tree with heights", "heights"
                )
            h = np.array(tree.distances, dtype=np.float64)
            if not np.all(np.isfinite(h)):
                raise InvalidParameterError(
                    f"heights={heights!r}: the tree has infinite heights (a rose tree's nodes "
                    "with r = 0); draw it with heights='depth' or 'size'",
                    "heights",
                )
            return h
        if heights == "size":
            h = tree.sizes.astype(np.float64)
            h[: tree.n_leaves] = 0.0
            return h
        raise InvalidParameterError(
            "heights must be 'depth', 'size', 'tree', 'posterior' or an array of one value per "
            "node, "
            f"got {heights!r}",
            "heights",
        )
    try:
        h = np.asarray(heights, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            "heights must be 'depth', 'size' or an array of numbers, one per node", "heights"
        ) from None
    if h.shape != (tree.n_nodes,):
        raise InvalidParameterError(
            f"heights must have one value per node ({tree.n_nodes}), got shape {h.shape}",
            "heights",
        )
    # Finite, and small enough that the axis limits (with their margins) are finite too.
    if not np.all(np.abs(h) <= 1e300):
        raise InvalidParameterError("heights must be finite numbers within ±1e300", "heights")
    return h


def dendrogram_layout(tree: Tree, heights: Any = "depth") -> tuple[np.ndarray, np.ndarray]:
    r"""Position and height of every node in the drawing of :func:`plot_tree`.

    Leaf *k* of :func:`leaf_order` sits at position *k*; an internal node sits midway between
    its first and last child. The bar of an internal node spans its children's positions.

    Parameters
    ----------
    tree : Tree
        A :class:`~rosetree.RoseTree` or any :class:`~rosetree.Tree` (a coalescent's).
    heights : {"depth", "size", "tree", "posterior"} or array_like, default="depth"
        ``"depth"``: a node's number of edges to its deepest leaf (leaves at 0);
        ``"size"``: its number of leaves (leaves at 0); ``"tree"``: the tree's own heights
        as distances from the leaves (:attr:`Tree.distances`, those of
        :meth:`Tree.to_linkage`; a coalescent's merge times, say); ``"posterior"``: the same
        for a :class:`~rosetree.RoseTree`, whose heights are :math:`-\max \ln r` from the
        root down, so the cut at threshold *t* is the level :math:`-\ln t`; or any per-node
        quantity (an array of shape (n_nodes,)), e.g. ``tree.log_p``.

    Returns
    -------
    position, height : ndarray of shape (n_nodes,)
    """
    h = _node_heights(tree, heights)
    pos = np.zeros(tree.n_nodes)
    pos[leaf_order(tree)] = np.arange(tree.n_leaves, dtype=np.float64)
    for v in tree.internal_nodes:  # children before parents
        kid_pos = pos[list(tree.children[v])]
        pos[v] = 0.5 * (kid_pos.min() + kid_pos.max())
    return pos, h


def _top_clusters(tree: Tree, h: np.ndarray, p: int) -> tuple[list[int], list[int]]:
    """The nodes opened and the clusters drawn as leaves when the top ``p`` are shown.

    Nodes are opened from the root down in order of height (highest first, the later node on
    ties) while the clusters below them number at most ``p``. Returns the opened nodes,
    children before parents, and the clusters in left-to-right order.
    """
    opened: set[int] = set()
    n_shown = 1
    # Max-heap by (height, node id) of the clusters that could be opened next.
    candidates = [(-h[tree.root], -tree.root)] if tree.root >= tree.n_leaves else []
    while candidates:
        _, neg = heapq.heappop(candidates)
        v = -neg
        if n_shown - 1 + len(tree.children[v]) > p:
            break
        opened.add(v)
        n_shown += len(tree.children[v]) - 1
        for c in tree.children[v]:
            if c >= tree.n_leaves:
                heapq.heappush(candidates, (-h[c], -c))
    shown: list[int] = []
    stack = [tree.root]
    while stack:
        v = stack.pop()
        if v in opened:
            stack.extend(reversed(tree.children[v]))
        else:
            shown.append(v)
    return [v for v in tree.internal_nodes if v in opened], shown


def _marked_nodes(tree: Tree, clusters: Any, threshold: float) -> list[int]:
    if clusters is None:
        return []
    if isinstance(clusters, str):
        if clusters != "cut":
            raise InvalidParameterError(
                f"clusters must be None, 'cut' or a sequence of node ids, got {clusters!r}",
                "clusters",
            )
        if not hasattr(tree, "cut_nodes"):
            raise InvalidParameterError(
                "clusters='cut' needs a RoseTree (the cut is by its posterior r); give node "
                "ids, e.g. tree.clusters_at_height(h)",
                "clusters",
            )
        # Single leaves are clusters of the cut too, but there is nothing to colour.
        return [v for v in tree.cut_nodes(threshold) if v >= tree.n_leaves]
    if not hasattr(clusters, "__iter__"):
        raise InvalidParameterError(
            f"clusters must be None, 'cut' or a sequence of node ids, got {clusters!r}",
            "clusters",
        )
    marked: list[int] = []
    for v in clusters:
        if not is_int(v):
            raise InvalidParameterError(f"clusters must hold node ids (int), got {v!r}", "clusters")
        if not 0 <= int(v) < tree.n_nodes:
            raise InvalidParameterError(
                f"node {v} is not in the tree (0 .. {tree.n_nodes - 1})", "clusters"
            )
        marked.append(int(v))
    return marked


def plot_tree(
    tree: Tree,
    labels: Sequence[Any] | None = None,
    *,
    ax: Axes | None = None,
    orientation: str = "left",
    heights: Any = "depth",
    clusters: Any = None,
    threshold: float = 0.5,
    color: Any = "black",
    cluster_colors: Any = "tab10",
    linewidth: float = 1.0,
    label_fontsize: float | None = None,
    max_leaf_labels: int = 1000,
    truncate_above: int | None = 100,
    p: int = 30,
) -> Axes:
    r"""Draw a rose tree as a dendrogram with multi-way nodes.

    Every internal node is one bar spanning all of its children, at the node's height, and
    every edge is a stem from the child's height up to its parent's bar: a tree with
    ``n_nodes`` nodes is drawn with ``n_nodes - 1`` stems and one bar per internal node.
    Leaves are placed in the order of :func:`leaf_order`, at positions ``0 .. n_leaves - 1``,
    and named on the axis.

    A tree of more than ``truncate_above`` leaves (100 by default) is drawn down to its top
    ``p`` clusters only (30 by default), as :func:`scipy.cluster.hierarchy.dendrogram` does
    with ``truncate_mode="lastp"``: nodes are opened from the root down, highest first,
    while the clusters below them number at most ``p``, and each cluster left closed is
    drawn as one leaf named by its number of rows in parentheses, "(12)" (a single row keeps
    its own name). ``truncate_above=None`` draws every leaf.

    Parameters
    ----------
    tree : Tree or fitted estimator
        A fitted or evaluated tree, e.g. ``BayesianRoseTree().fit(X).tree_`` or
        ``KingmanCoalescent().fit(X).tree_``; or a fitted :class:`BayesianRoseTree` itself,
        whose ``tree_`` is drawn with its flat clusters (:attr:`~BayesianRoseTree.labels_`,
        the subtrees ``cluster_members_``) coloured unless ``clusters`` says otherwise.
    labels : sequence of length n_leaves, optional
        Leaf names (default: row indices).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on (default: a new figure's axes).
    orientation : {"left", "top"}, default="left"
        Where the root is. ``"left"``: root on the left, leaves on the right with their names
        on the right-hand axis, the first leaf at the top; ``"top"``: root at the top, leaves
        at the bottom with vertical names (as in :func:`scipy.cluster.hierarchy.dendrogram`).
    heights : {"depth", "size", "tree", "posterior"} or array_like, default="depth"
        Node heights (an array: one per node), see :func:`dendrogram_layout`. The default
        is edges to the deepest leaf; ``"tree"`` (or, for a rose tree, ``"posterior"``)
        gives the heights of :meth:`Tree.to_linkage`.
    clusters : None, "cut", "labels" or sequence of int, optional
        Nodes whose subtrees are coloured, each in its own colour: ``"labels"`` (the default
        for an estimator) takes the nodes of its ``labels_``; ``"cut"`` takes the
        internal nodes of the cut :meth:`RoseTree.cut_nodes` (posterior :math:`r_T \ge`
        ``threshold``, eq 1.26); a sequence gives node ids. A node's bar, the stems below it
        and its leaves' names take the colour of its nearest marked ancestor (or itself).
    threshold : float, default=0.5
        Threshold on :math:`r_T` for ``clusters="cut"``.
    color : matplotlib color, default="black"
        Colour of everything outside marked clusters.
    cluster_colors : str or sequence of colors, default="tab10"
        A colormap name or a list of colours, used in turn for the marked clusters.
    linewidth : float, default=1.0
    label_fontsize : float, optional
    max_leaf_labels : int, default=1000
        Name the leaves on the axis only up to this many leaves; a larger tree is drawn
        without leaf names (100,000 tick labels take matplotlib minutes and cannot be read),
        in a figure of at most 100 inches.
    truncate_above : int or None, default=100
        Draw only the top ``p`` clusters of a tree with more leaves than this (see above);
        ``None``: never truncate.
    p : int, default=30
        The number of clusters drawn as leaves when the tree is truncated (at least 2).

    Returns
    -------
    matplotlib.axes.Axes
        The axes drawn on. Stems and bars are two ``LineCollection``\ s whose ``gid`` is
        ``"rosetree-edges"`` and ``"rosetree-bars"``.

    Raises
    ------
    InvalidParameterError
        If ``labels`` does not have one entry per leaf, or another argument is invalid.
    ImportError
        If matplotlib is not installed.
    """
    # The subtrees that make up the estimator's flat clusters (a cluster is one node, or a
    # union of sibling subtrees with n_clusters).
    members = getattr(tree, "cluster_members_", None)
    nodes = getattr(tree, "cluster_nodes_", None)
    if members is None and nodes is not None:  # the coalescent's and the diffusion tree's
        members = [[v] for v in nodes]
    if not isinstance(tree, Tree) and isinstance(getattr(tree, "tree_", None), Tree):
        tree = tree.tree_  # a fitted estimator
        if clusters is None or (isinstance(clusters, str) and clusters == "labels"):
            clusters = [] if members is None else [int(v) for m in members for v in m]
    elif isinstance(clusters, str) and clusters == "labels":
        raise InvalidParameterError(
            "clusters='labels' needs a fitted estimator (the nodes of its labels_)", "clusters"
        )
    if not isinstance(tree, Tree):
        raise InvalidParameterError(
            f"tree must be a rosetree Tree or RoseTree, got {type(tree).__name__}", "tree"
        )
    check_choice(orientation, "orientation", _ORIENTATIONS)
    names = (
        [str(i) for i in range(tree.n_leaves)]
        if labels is None
        else [str(s) for s in tree._check_labels(labels)]
    )
    if truncate_above is not None:
        truncate_above = check_count(truncate_above, "truncate_above")
    p = check_count(p, "p")
    if p < 2:
        raise InvalidParameterError(f"p must be at least 2, got {p}", "p")
    h = _node_heights(tree, heights)
    if truncate_above is not None and tree.n_leaves > truncate_above:
        internal, shown = _top_clusters(tree, h, p)
        # Closed clusters stand on the leaves' level, as leaves do.
        h = h.copy()
        h[[v for v in shown if v >= tree.n_leaves]] = h[: tree.n_leaves].min()
        names = [names[v] if v < tree.n_leaves else f"({tree.sizes[v]})" for v in shown]
    else:
        internal, shown = list(tree.internal_nodes), leaf_order(tree)
        names = [names[v] for v in shown]
    n_shown = len(shown)
    pos = np.zeros(tree.n_nodes)
    pos[shown] = np.arange(n_shown, dtype=np.float64)
    for v in internal:  # children before parents
        kid_pos = pos[list(tree.children[v])]
        pos[v] = 0.5 * (kid_pos.min() + kid_pos.max())
    visible = [*shown, *internal]
    marked = _marked_nodes(tree, clusters, threshold)

    plt = _import_pyplot()
    from matplotlib.collections import LineCollection
    from matplotlib.colors import to_rgba
    from matplotlib.ticker import MaxNLocator

    try:
        if isinstance(cluster_colors, str):
            cmap = plt.get_cmap(cluster_colors)
            n_colors = getattr(cmap, "N", 256)
            palette = [cmap(k % n_colors) for k in range(max(len(marked), 1))]
        else:
            palette = [to_rgba(c) for c in cluster_colors]
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"cluster_colors must be a colormap name or a sequence of colours: {exc}",
            "cluster_colors",
        ) from None
    if marked and not palette:
        raise InvalidParameterError("cluster_colors is empty", "cluster_colors")
    try:
        base = to_rgba(color)
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(f"color is not a colour: {exc}", "color") from None
    own = {v: palette[k % len(palette)] for k, v in enumerate(marked)}
    node_color = [base] * tree.n_nodes
    inside = np.zeros(tree.n_nodes, dtype=bool)  # at or below a marked node
    for v in reversed(range(tree.n_nodes)):  # parents before children
        if v in own:
            node_color[v], inside[v] = own[v], True
        elif tree.parent[v] >= 0:
            node_color[v], inside[v] = node_color[tree.parent[v]], inside[tree.parent[v]]

    def point(p: float, height: float) -> tuple[float, float]:
        return (height, p) if orientation == "left" else (p, height)

    stems, stem_colors, bars, bar_colors = [], [], [], []
    for v in internal:
        kids = tree.children[v]
        kid_pos = pos[list(kids)]
        bars.append([point(kid_pos.min(), h[v]), point(kid_pos.max(), h[v])])
        bar_colors.append(node_color[v])
        for c in kids:
            stems.append([point(pos[c], h[c]), point(pos[c], h[v])])
            stem_colors.append(node_color[v])

    if ax is None:
        _, ax = plt.subplots(
            figsize=(6.0, min(100.0, max(2.0, 0.25 * n_shown)))
            if orientation == "left"
            else (min(100.0, max(3.0, 0.3 * n_shown)), 4.0)
        )
    edges = LineCollection(stems, colors=stem_colors, linewidths=linewidth)
    edges.set_gid(EDGES_GID)
    bar_lines = LineCollection(bars, colors=bar_colors, linewidths=linewidth)
    bar_lines.set_gid(BARS_GID)
    ax.add_collection(edges)
    ax.add_collection(bar_lines)

    named = n_shown <= max_leaf_labels
    ticks = np.arange(n_shown if named else 0, dtype=np.float64)
    tick_names = names if named else []
    depth_axis = isinstance(heights, str) and heights == "depth"
    lo, hi = float(h[visible].min()), float(h[visible].max())
    pad = 0.05 * (hi - lo) if hi > lo else 0.5
    leaf_lim = (-0.5, n_shown - 0.5)
    if orientation == "left":
        ax.set_yticks(ticks, tick_names, fontsize=label_fontsize)
        ax.yaxis.tick_right()
        ax.set_ylim(leaf_lim[1], leaf_lim[0])  # first leaf at the top
        ax.set_xlim(hi + pad, lo - pad)  # root on the left
        tick_labels = ax.get_yticklabels()
        if depth_axis:
            ax.set_xlabel("edges to the deepest leaf")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for side in ("top", "left"):
            ax.spines[side].set_visible(False)
    else:
        ax.set_xticks(ticks, tick_names, fontsize=label_fontsize, rotation=90)
        ax.set_xlim(*leaf_lim)
        ax.set_ylim(lo - pad, hi + pad)
        tick_labels = ax.get_xticklabels()
        if depth_axis:
            ax.set_ylabel("edges to the deepest leaf")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    for text, i in zip(tick_labels, shown[: len(tick_labels)], strict=True):
        if inside[i]:
            text.set_color(node_color[i])
    return ax
