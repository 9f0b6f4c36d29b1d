r"""Quality of a hierarchy against known class labels.

Three scores from the hierarchical-clustering literature, for any rooted tree over labelled
items: any :class:`~rosetree.Tree` (a fitted rose tree with nodes of any number of children,
a coalescent's tree), a SciPy linkage matrix ``Z`` (binary), or nested lists of row indices
such as ``[[0, 1, 2], [3, 4]]``.
All three lie in [0, 1], higher is better, and a tree that keeps every class in a subtree of
its own scores 1 on each.

- :func:`dendrogram_purity` (Heller & Ghahramani 2005, §5; Teh, Daumé & Roy 2007, §5),
- :func:`subtree_score` (Teh, Daumé & Roy 2007, §5),
- :func:`leave_one_out_accuracy` (Teh, Daumé & Roy 2007, §5).

Every score reads the tree once, without recursion (trees may be 100,000 levels deep), and
costs :math:`O(n_\mathrm{nodes} \cdot n_\mathrm{classes})` time and memory.
"""

from __future__ import annotations

from typing import Any, NamedTuple, cast

import numpy as np

from .exceptions import InvalidParameterError, InvalidTreeError
from .tree import Tree, nested_to_internal

__all__ = ["dendrogram_purity", "leave_one_out_accuracy", "subtree_score"]


class _Labelled(NamedTuple):
    """A tree with per-node class counts.

    Node ids are dense: leaves ``0 .. n - 1`` (leaf *i* is label ``y[i]``), every child's id
    below its parent's, the root last.
    """

    parent: np.ndarray  # (n_nodes,) int64, -1 at the root
    counts: np.ndarray  # (n_nodes, n_classes) int64: leaves of each class below each node
    sizes: np.ndarray  # (n_nodes,) int64: leaves below each node
    codes: np.ndarray  # (n_leaves,) int64: class index of every leaf
    n_children: np.ndarray  # (n_nodes,) int64

    @property
    def n_leaves(self) -> int:
        return int(self.codes.size)


def _parent_array(tree: Any, n_labels: int) -> np.ndarray:
    """The parent of every node of ``tree`` (-1 at the root), ids as in :class:`_Labelled`."""
    if isinstance(tree, Tree):
        return np.asarray(tree.parent, dtype=np.int64)
    if isinstance(tree, np.ndarray):
        return _linkage_parents(tree)
    if isinstance(tree, (list, tuple)):
        return _nested_parents(tree, n_labels)
    raise InvalidParameterError(
        "tree must be a rosetree.Tree (a RoseTree, a coalescent's tree), a SciPy linkage "
        "matrix (ndarray of shape "
        f"(n - 1, 4)) or nested lists of row indices; got {type(tree).__name__}",
        "tree",
    )


def _linkage_parents(tree: np.ndarray) -> np.ndarray:
    from scipy.cluster.hierarchy import is_valid_linkage

    try:
        Z = np.asarray(tree, dtype=np.float64)
        is_valid_linkage(Z, throw=True, name="tree")
        if not np.all(np.isfinite(Z)):
            raise ValueError("it holds NaN or infinite values")
        ids = Z[:, :2]
        if ids.size and (ids.max() >= 2 * Z.shape[0] + 1 or np.any(ids != np.round(ids))):
            raise ValueError("its cluster ids must be integers below 2 n - 1")
    except (TypeError, ValueError) as exc:
        raise InvalidTreeError(f"tree is not a valid linkage matrix: {exc}") from None
    n = Z.shape[0] + 1
    parent = np.full(2 * n - 1, -1, dtype=np.int64)
    merged = np.arange(n, 2 * n - 1, dtype=np.int64)
    parent[Z[:, 0].astype(np.int64)] = merged
    parent[Z[:, 1].astype(np.int64)] = merged
    return parent


def _count_leaves(tree: Any) -> int:
    count, stack = 0, [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, (list, tuple)):
            stack.extend(t)
        else:
            count += 1
    return count


def _nested_parents(tree: Any, n_labels: int) -> np.ndarray:
    try:
        internal = nested_to_internal(tree, n_labels)
    except InvalidTreeError:
        _check_n_labels(n_labels, _count_leaves(tree))
        raise
    n_leaf_slots = sum(len(kids) for kids in internal) - max(len(internal) - 1, 0)
    _check_n_labels(n_labels, max(n_leaf_slots, 1))
    child_ids = np.fromiter((c for kids in internal for c in kids), dtype=np.int64)
    times = np.bincount(child_ids[child_ids < n_labels], minlength=n_labels)
    if (times != 1).any():
        row = int(np.flatnonzero(times != 1)[0])
        raise InvalidTreeError(f"row {row} appears {times[row]} times in the tree")
    n_nodes = n_labels + len(internal)
    parent = np.full(n_nodes, -1, dtype=np.int64)
    parent[child_ids] = np.repeat(
        np.arange(n_labels, n_nodes, dtype=np.int64), [len(kids) for kids in internal]
    )
    return parent


def _check_n_labels(n_labels: int, n_leaves: int) -> None:
    if n_leaves < 2:
        raise InvalidParameterError(f"the tree needs at least 2 leaves, got {n_leaves}", "tree")
    if n_labels != n_leaves:
        raise InvalidParameterError(f"y has {n_labels} labels; the tree has {n_leaves} leaves", "y")


def _class_codes(labels: np.ndarray) -> tuple[np.ndarray, int]:
    """Class index of every leaf and the number of classes, with the labels checked."""
    if labels.dtype.kind in "fc" and np.isnan(labels).any():
        raise InvalidParameterError(
            f"y has NaN at position {int(np.flatnonzero(np.isnan(labels))[0])}", "y"
        )
    try:
        classes, codes = np.unique(labels, return_inverse=True)
    except TypeError:
        raise InvalidParameterError(
            "y must hold labels of one comparable type (integers or strings)", "y"
        ) from None
    if np.bincount(codes).max() < 2:
        raise InvalidParameterError(
            "y needs at least two leaves of one class: no pair of leaves shares a label, so "
            "the scores are undefined",
            "y",
        )
    return codes.astype(np.int64), int(classes.size)


def _labelled(tree: Any, y: Any) -> _Labelled:
    """Check ``tree`` and ``y`` and count the leaves of every class below every node."""
    labels = np.asarray(y)
    if labels.ndim != 1:
        raise InvalidParameterError(f"y must be 1-D, got shape {labels.shape}", "y")
    parent = _parent_array(tree, labels.size)
    n_nodes = parent.size
    n_children = np.bincount(parent[parent >= 0], minlength=n_nodes).astype(np.int64)
    n_leaves = int(np.count_nonzero(n_children == 0))
    _check_n_labels(labels.size, n_leaves)
    codes, n_classes = _class_codes(labels)

    # Sizes bottom-up, then every node's slice of a leaf order in which each subtree is
    # contiguous, top-down. Both walks use the id order (children below parents) instead of
    # recursion; they are the only per-node Python loops.
    par = parent.tolist()
    size = [1] * n_leaves + [0] * (n_nodes - n_leaves)
    for v in range(n_nodes - 1):
        size[par[v]] += size[v]
    start = [0] * n_nodes
    fill = [0] * n_nodes  # next free position inside each node's slice
    for v in range(n_nodes - 2, -1, -1):
        p = par[v]
        start[v] = fill[v] = fill[p]
        fill[p] += size[v]
    sizes = np.asarray(size, dtype=np.int64)
    starts = np.asarray(start, dtype=np.int64)

    # Leaves of class k below v = (class-k leaves before start + size) - (before start).
    leaf_at = np.empty(n_leaves, dtype=np.int64)
    leaf_at[starts[:n_leaves]] = np.arange(n_leaves)
    onehot = np.zeros((n_leaves + 1, n_classes), dtype=np.int64)
    onehot[np.arange(1, n_leaves + 1), codes[leaf_at]] = 1
    prefix = np.cumsum(onehot, axis=0)
    counts = prefix[starts + sizes] - prefix[starts]
    return _Labelled(parent, counts, sizes, codes, n_children)


def dendrogram_purity(tree: Any, y: Any) -> float:
    r"""Dendrogram purity of a tree against class labels (Heller & Ghahramani 2005).

    The mean, over all unordered pairs of distinct leaves that share a class :math:`k`, of
    the fraction of class-:math:`k` leaves among the leaves of the smallest subtree that
    contains both (their lowest common ancestor):

    .. math::
        \mathrm{DP} = \frac{1}{|P|} \sum_{\{i, j\} \in P}
        \frac{|\mathrm{leaves}(\mathrm{lca}(i, j)) \cap C_k|}
             {|\mathrm{leaves}(\mathrm{lca}(i, j))|},
        \qquad P = \{\{i, j\} : i \ne j,\ y_i = y_j\}.

    Parameters
    ----------
    tree : Tree, ndarray of shape (n - 1, 4), or nested lists
        A :class:`Tree` (e.g. a fitted :class:`RoseTree`), a SciPy linkage matrix ``Z``, or
        nested lists of row indices ``0 .. n - 1`` (a list of one element stands for that
        element).
    y : array_like of shape (n,)
        Class label of every leaf (row), integers or strings.

    Returns
    -------
    float
        In (0, 1]; 1 exactly when every node is either pure or the root of whole classes
        (every same-class pair meets in a pure subtree).

    Raises
    ------
    InvalidParameterError
        If ``y`` does not have one label per leaf, is not 1-D, holds NaN, or has no two
        leaves of one class (``parameter="y"``); if ``tree`` is of another type or has fewer
        than two leaves (``parameter="tree"``).
    InvalidTreeError
        If ``tree`` is not a valid linkage matrix, or its nested lists do not hold every row
        exactly once.

    Notes
    -----
    Heller & Ghahramani describe the score as the expected purity when a leaf is drawn at
    random and then a second leaf of its class; the exact score of later work (Kobren et
    al. 2017, "A hierarchical algorithm for extreme clustering", and Teh et al. 2007's
    Table 1) averages uniformly over the pairs, as here. The two agree when all classes have
    the same size. Leaves that are alone in their class take part in no pair.

    In a multi-way tree the lowest common ancestor is the multi-way node itself, so
    replacing a node by a cascade of binary merges (as :meth:`RoseTree.to_linkage` does)
    changes the score, in either direction: pairs then meet in smaller subtrees, which may
    be purer or less pure than the node.

    The count runs in :math:`O(n_\mathrm{nodes} \cdot n_\mathrm{classes})`: with
    :math:`c_{v,k}` the class-:math:`k` leaves below node :math:`v`, exactly
    :math:`\binom{c_{v,k}}{2} - \sum_{u \in \mathrm{children}(v)} \binom{c_{u,k}}{2}`
    class-:math:`k` pairs have :math:`v` as their lowest common ancestor.

    Examples
    --------
    >>> import rosetree as rt
    >>> rt.dendrogram_purity([[0, 1], [2, [3, 4]]], ["a", "a", "b", "b", "a"])
    0.7166666666666667
    """
    t = _labelled(tree, y)
    pairs = t.counts * (t.counts - 1) // 2
    below = np.zeros_like(pairs)
    child = np.flatnonzero(t.parent >= 0)
    np.add.at(below, t.parent[child], pairs[child])
    meeting = pairs - below  # class-k pairs whose lowest common ancestor is v
    inner = slice(t.n_leaves, None)
    purity = t.counts[inner] / t.sizes[inner, None]
    return float(np.sum(meeting[inner] * purity) / pairs[-1].sum())


def subtree_score(tree: Any, y: Any) -> float:
    r"""Subtree score of Teh, Daumé & Roy (2007): the share of internal nodes that are pure.

    On a binary tree with :math:`n` leaves and :math:`K` classes the paper's score is

    .. math::
        \frac{\#\{\text{internal nodes whose leaves all have one class}\}}{n - K},

    and :math:`n - K` is the most pure internal nodes a binary tree can have (class
    :math:`k` gives at most :math:`n_k - 1`), so a tree that keeps every class in a subtree
    of its own scores 1.

    For multi-way trees (our choice; the paper only has binary trees) a pure node with
    :math:`c` children counts :math:`c - 1` times, as the :math:`c - 1` binary merges it
    stands for:

    .. math::
        \frac{1}{n - K} \sum_{v \text{ internal, pure}} (|\mathrm{children}(v)| - 1).

    This is the paper's score of the least favourable binarisation of the tree (one that
    creates no new pure node below an impure multi-way node, which always exists), so it
    does not change when a pure node is binarised, stays in [0, 1], and is 1 for a tree that
    keeps every class in a subtree of its own however flat. Binarising an impure multi-way
    node can only raise the paper's score.

    Parameters
    ----------
    tree, y
        As in :func:`dendrogram_purity`, which also lists the errors raised.

    Returns
    -------
    float
        In [0, 1]: 1 when every class has a subtree of its own, 0 when no internal node is
        pure.

    Examples
    --------
    >>> import rosetree as rt
    >>> rt.subtree_score([[0, 1], [2, [3, 4]]], ["a", "a", "b", "b", "a"])
    0.3333333333333333
    """
    t = _labelled(tree, y)
    n_classes = t.counts.shape[1]
    inner = slice(t.n_leaves, None)
    pure = t.counts[inner].max(axis=1) == t.sizes[inner]
    merges = int(np.sum(t.n_children[inner][pure] - 1))
    return cast(float, merges / (t.n_leaves - n_classes))


def leave_one_out_accuracy(tree: Any, y: Any) -> float:
    r"""Leave-one-out accuracy of the tree as a nearest-neighbour classifier.

    Teh, Daumé & Roy (2007, §5 and Table 1) report "leave-one-out accuracies" without
    spelling them out; we read them as the tree's own nearest-neighbour rule, the one the
    same section uses for average linkage ("nearest neighbor in the tree"): each leaf
    :math:`i` is held out and given the majority label of its nearest neighbours in the
    tree, the other leaves of the smallest subtree containing :math:`i` and at least one
    other leaf, i.e. all other leaves below :math:`i`'s parent. The score is the fraction of
    leaves whose own label is predicted. A tie between :math:`m` labels earns :math:`1/m`
    if the true label is among them (the expected accuracy of breaking ties at random), so
    the score does not depend on how labels are numbered.

    On a binary tree the neighbours of a leaf are the leaves of its sibling subtree; on a
    multi-way tree they are the leaves of all other children of its parent, so binarising a
    node changes the score.

    Parameters
    ----------
    tree, y
        As in :func:`dendrogram_purity`, which also lists the errors raised.

    Returns
    -------
    float
        The fraction of leaves whose label the rest of the tree predicts, in [0, 1].

    Examples
    --------
    >>> import rosetree as rt
    >>> rt.leave_one_out_accuracy([[0, 1], [2, [3, 4]]], ["a", "a", "b", "b", "a"])
    0.5
    """
    t = _labelled(tree, y)
    leaves = np.arange(t.n_leaves)
    others = t.counts[t.parent[leaves]].copy()
    others[leaves, t.codes] -= 1
    best = others == others.max(axis=1, keepdims=True)
    return float(np.mean(best[leaves, t.codes] / best.sum(axis=1)))
