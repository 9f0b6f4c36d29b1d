"""Trees: the shared tree type with heights, and the rose tree with its per-node quantities."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import cached_property
from json.encoder import encode_basestring_ascii
from typing import Any

import numpy as np

from . import _core
from ._validation import check_flag, check_int, check_real, is_int, is_real, mixing_args
from .exceptions import InvalidParameterError, InvalidTreeError

__all__ = ["RoseTree", "Tree", "nested_to_internal"]


def _read_only(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


class Tree:
    r"""A tree over ``n_leaves`` data items, with an optional height per node.

    The tree type shared by every model family: rose trees (:class:`RoseTree`, a subclass
    that adds the rose-tree mixture's quantities), and trees with times. Node ids are
    dense: leaves are ``0 .. n_leaves - 1`` (leaf *i* is data row *i*), internal nodes
    follow with every child before its parent, and the root is the last node.

    Parameters
    ----------
    n_leaves : int
        Number of leaves.
    internal : sequence of sequence of int
        Children of each internal node, in id order (node ``n_leaves + k`` has children
        ``internal[k]``, all with smaller ids).
    heights : array-like of shape (n_nodes,), optional
        A height per node in the family's own units and direction: all leaves at one height,
        and heights moving away from it monotonically towards the root (a rose tree's
        :math:`-\max \ln r` grows from 0; coalescence times fall from 0; divergence times
        fall from 1).

    Attributes
    ----------
    n_leaves : int
        Number of data items.
    n_nodes : int
        Number of nodes, leaves included.
    root : int
        Id of the root node.
    children : tuple of tuple of int
        Child ids of every node (empty at leaves).
    parent : ndarray of shape (n_nodes,)
        Parent id of every node, -1 at the root.
    sizes : ndarray of shape (n_nodes,)
        Leaves below every node.
    heights : ndarray of shape (n_nodes,) or None
        The height of every node, if the tree has heights.
    distances : ndarray of shape (n_nodes,) or None
        Every node's distance ``|heights - heights[0]|`` from the leaves' height: what
        :meth:`to_linkage`, the branch lengths of ``to_newick(lengths=True)``,
        :meth:`clusters_at_height`, :meth:`labels_at_height` and :meth:`max_clusters` use.
    """

    def __init__(
        self,
        n_leaves: int,
        internal: Sequence[Sequence[int]],
        heights: Any = None,
    ) -> None:
        n_leaves = check_int(n_leaves, "n_leaves", low=0)
        try:
            if isinstance(internal, (str, bytes)):
                raise TypeError("a string")
            children = [[int(v) for v in _ids(c)] for c in internal]
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidTreeError(
                f"internal must be a list of lists of node ids (int): {exc}"
            ) from None
        if any(not 0 <= v < 2**63 for c in children for v in c):
            raise InvalidTreeError("internal: node ids must be non-negative node ids")
        # Every node but the root is a child once: checked before the core allocates nodes.
        if sum(map(len, children)) != n_leaves + len(children) - 1:
            raise InvalidTreeError(
                f"internal: a tree of {n_leaves} leaves and {len(children)} internal nodes has "
                f"{n_leaves + len(children) - 1} children in all, got {sum(map(len, children))}"
            )
        h = None
        if heights is not None:
            try:
                arr = np.asarray(heights, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise InvalidTreeError(f"heights must be real numbers: {exc}") from None
            if arr.ndim != 1:
                raise InvalidTreeError(
                    f"heights must be a 1-D array (one per node), got shape {arr.shape}"
                )
            h = [float(x) for x in arr]
        self._set_structure(_core.Tree(n_leaves, children, h))

    def _set_structure(self, structure: Any) -> None:
        self._structure = structure
        # Tuples made by the core; every leaf shares the empty tuple.
        self.children: tuple[tuple[int, ...], ...] = structure.children_tuples()
        self.n_leaves: int = int(structure.n_leaves)
        self.n_nodes: int = len(self.children)
        self.root: int = self.n_nodes - 1

    # The per-node arrays are made on first use: a tree over millions of rows that is only
    # cut into flat clusters never holds them.
    @cached_property
    def sizes(self) -> np.ndarray:
        """Leaves below every node."""
        return _read_only(np.asarray(self._structure.sizes(), dtype=np.int64))

    @cached_property
    def parent(self) -> np.ndarray:
        """Parent id of every node, -1 at the root."""
        return _read_only(np.asarray(self._structure.parents(), dtype=np.int64))

    @cached_property
    def heights(self) -> np.ndarray | None:
        """The height of every node, or ``None`` for a tree without heights."""
        heights = self._structure.heights()
        return None if heights is None else _read_only(np.asarray(heights))

    @cached_property
    def distances(self) -> np.ndarray | None:
        """Every node's distance ``|heights - heights[0]|`` from the leaves' height."""
        distances = self._structure.distances()
        return None if distances is None else _read_only(np.asarray(distances))

    def __reduce__(self) -> tuple[Any, ...]:
        internal = [list(c) for c in self.children[self.n_leaves :]]
        heights = None if self.heights is None else self.heights.tolist()
        return (Tree, (self.n_leaves, internal, heights))

    # ------------------------------------------------------------------ structure
    @property
    def internal_nodes(self) -> range:
        """Ids of the internal nodes, children before parents."""
        return range(self.n_leaves, self.n_nodes)

    def leaves(self, node: int | None = None) -> list[int]:
        """Data rows below ``node`` (default: the root), in increasing order."""
        node = self.root if node is None else self._check_node(node)
        return list(self._structure.leaves_of(node))

    def depth(self) -> int:
        """Number of edges on the longest root-to-leaf path."""
        return int(self._structure.depth())

    def _check_node(self, node: int) -> int:
        """``node`` as an int, if it is an integer id of this tree.

        Negative ids do not count from the end. Raises :class:`InvalidParameterError` naming
        ``node`` otherwise.
        """
        if not is_int(node):
            raise InvalidParameterError(f"node must be an integer id, got {node!r}", "node")
        if not 0 <= int(node) < self.n_nodes:
            raise InvalidParameterError(
                f"node {node} is not in the tree (0 .. {self.n_nodes - 1})", "node"
            )
        return int(node)

    def n_partitions(self, log10: bool = False) -> int | float:
        r"""Number of tree-consistent partitions :math:`|\Phi(T)|` (eq 1.3).

        Parameters
        ----------
        log10 : bool, default=False
            Return :math:`\log_{10} |\Phi(T)|` as a float instead of the exact integer
            (which can have thousands of digits for large trees).
        """
        if check_flag(log10, "log10"):
            return float(self._structure.n_partitions_log10())
        return int(self._structure.n_partitions())

    def max_clusters(self, n_clusters: int, *, split_multiway: bool = False) -> np.ndarray:
        r"""At most ``n_clusters`` flat clusters: the lowest cut of the heights giving no more.

        This is SciPy's ``fcluster(self.to_linkage(), n_clusters, "maxclust")``.

        The number of clusters changes only where the cut passes the height of an internal
        node, and a node with *m* children (or several nodes at one height) splits into all
        of them at once, so the tree may allow no cut with exactly ``n_clusters``; then this
        gives the largest number below it rather than a part of a multi-way node (which would
        not be a cluster of the tree). With ``n_clusters >= n_leaves`` every row is alone.
        ``split_multiway=True`` gives exactly ``n_clusters`` instead (see below).

        Parameters
        ----------
        n_clusters : int
            At least 1.
        split_multiway : bool, default=False
            Give exactly ``min(n_clusters, n_leaves)`` clusters. From the lowest cut with
            fewer, the cluster nodes are split highest first (a tie: the larger id); where
            splitting a node into all of its children would give more than ``n_clusters``,
            its largest children (most rows; a tie: the smaller id) become clusters of their
            own and the rest of its children form one cluster together. Such a cluster is a
            union of sibling subtrees, not a single node of the tree. A three-group data
            set under a root with four children thus gives three clusters, not one.

        Returns
        -------
        labels : ndarray of shape (n_leaves,)
            Cluster labels ``0 .. K-1`` (``K <= n_clusters``), numbered by first row.
        """
        return self._labels_of_groups(
            self.max_clusters_groups(n_clusters, split_multiway=split_multiway)
        )

    def _labels_of_groups(self, groups: Sequence[Sequence[int]]) -> np.ndarray:
        """Label *k* for the leaves of every node in ``groups[k]`` (which partition them)."""
        nodes = [v for group in groups for v in group]
        # The core labels the nodes by first row; each node's label then becomes its group's.
        by_node = np.asarray(self._structure.labels(nodes), dtype=np.int64)
        group_of = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
        remap = np.empty(len(nodes), dtype=np.int64)
        remap[by_node[[self._a_leaf(v) for v in nodes]]] = group_of
        return remap[by_node]

    def _a_leaf(self, node: int) -> int:
        """A leaf below ``node`` (its first child's first child ...)."""
        while node >= self.n_leaves:
            node = self.children[node][0]
        return node

    def _in_first_row_order(self, nodes: Sequence[int]) -> list[int]:
        """``nodes``, which partition the rows, sorted by the smallest row below each."""
        ids = [int(v) for v in nodes]
        by_first_row = self._structure.labels(ids)
        return sorted(ids, key=lambda v: int(by_first_row[self._a_leaf(v)]))

    def max_clusters_groups(
        self, n_clusters: int, *, split_multiway: bool = False
    ) -> list[list[int]]:
        """The nodes that form each cluster of :meth:`max_clusters`, cluster by cluster.

        Cluster *k* (label *k* of :meth:`max_clusters`, numbered by first row) is the union
        of the leaves of the nodes in entry *k*: one node, or with ``split_multiway=True``
        several children of one multi-way node, in increasing id order.
        """
        if not check_flag(split_multiway, "split_multiway"):
            groups = [[v] for v in self.max_clusters_nodes(n_clusters)]
        else:
            groups = self._split_multiway(
                min(check_int(n_clusters, "n_clusters", cap=True), self.n_leaves)
            )
        return sorted(groups, key=lambda g: min(self.leaves(v)[0] for v in g))

    def _split_multiway(self, k: int) -> list[list[int]]:
        """Exactly ``k`` groups of nodes, from the lowest cut with at most ``k`` clusters."""
        groups: list[list[int]] = [[v] for v in self.max_clusters_nodes(k)]
        distances, children = self.distances, self.children
        assert distances is not None  # max_clusters_nodes refuses a tree without heights
        while len(groups) < k:
            # The single-node cluster that the cut would split next.
            split = [g[0] for g in groups if len(g) == 1 and children[g[0]]]
            v = max(split, key=lambda u: (distances[u], u))
            groups.remove([v])
            kids = list(children[v])
            free = k - len(groups)  # clusters that v's children may take
            if len(kids) <= free:
                groups += [[c] for c in kids]
                continue
            by_size = sorted(kids, key=lambda c: (-len(self.leaves(c)), c))
            groups += [[c] for c in by_size[: free - 1]] + [sorted(by_size[free - 1 :])]
        return groups

    def max_clusters_nodes(self, n_clusters: int) -> list[int]:
        """The nodes that form the clusters of :meth:`max_clusters`, in increasing id order."""
        k = min(
            check_int(n_clusters, "n_clusters", cap=True), self.n_leaves
        )  # more clusters than rows
        return list(self._structure.max_clusters(k))

    def labels_of(self, nodes: Sequence[int]) -> np.ndarray:
        """Cluster label of every data row, given the nodes of a flat clustering.

        Parameters
        ----------
        nodes : sequence of int
            Node ids whose leaf sets partition the data, e.g. :meth:`RoseTree.cut_nodes`.

        Returns
        -------
        labels : ndarray of shape (n_leaves,)
            Labels ``0 .. len(nodes) - 1`` numbered by the first row of each cluster.

        Raises
        ------
        InvalidParameterError
            If the nodes do not partition the rows.
        """
        try:
            ids = [int(v) for v in nodes]
        except (TypeError, ValueError):
            raise InvalidParameterError("nodes must be node ids (int)", "nodes") from None
        if any(v < 0 for v in ids):
            raise InvalidParameterError("nodes must hold non-negative node ids", "nodes")
        return np.asarray(self._structure.labels(ids), dtype=np.int64)

    def labels_at_height(self, height: float) -> np.ndarray:
        """Flat cluster labels of the cut at distance ``height`` from the leaves.

        The clusters of :meth:`clusters_at_height`, numbered by the first row of each, as
        SciPy's ``fcluster(self.to_linkage(), height, "distance")`` (up to numbering).
        """
        return self.labels_of(self.clusters_at_height(height))

    def clusters_at_height(self, height: float) -> list[int]:
        """The maximal nodes at distance at most ``height`` from the leaves, in id order.

        The distance of node *v* is ``|heights[v] - heights[0]|`` (for a rose tree, its
        height itself). These are the clusters of SciPy's ``fcluster(self.to_linkage(),
        height, "distance")``; leaves are always clusters.
        """
        return list(self._structure.clusters_at_height(check_real(height, "height")))

    # ------------------------------------------------------------------ conversions
    def _subtree(self, node: int | None) -> tuple[int, list[int]]:
        """``node`` (default: the root) and the ids below it, children before parents."""
        node = self.root if node is None else self._check_node(node)
        ids: list[int] = []
        stack = [node]
        while stack:
            v = stack.pop()
            ids.append(v)
            if v >= self.n_leaves:
                stack.extend(self.children[v])
        ids.sort()
        return node, ids

    def to_nested(self, node: int | None = None) -> list[Any]:
        """The tree as nested lists of data rows, e.g. ``[[0, 1, 2], [3, 4]]``.

        Built bottom-up without recursion, so trees of any depth work.
        """
        node, ids = self._subtree(node)
        built: dict[int, Any] = {}
        for v in ids:  # children before parents
            built[v] = v if v < self.n_leaves else [built.pop(c) for c in self.children[v]]
        return built[node]  # type: ignore[no-any-return]

    @classmethod
    def from_newick(
        cls,
        text: str,
        labels: Sequence[Any] | None = None,
        lengths: bool = True,
        underscore_is_space: bool = False,
        *,
        leaf_time: float | None = None,
        time_scale: float = 1.0,
        ultrametric_rtol: float = 1e-9,
    ) -> Tree:
        r"""A tree read from Newick, e.g. one written by :meth:`to_newick` or a published one.

        Parameters
        ----------
        text : str
            One tree in Newick format, ending in ``;``: quoted (``'a b'``, ``''`` for a
            quote) or unquoted leaf names, optional branch lengths ``:x``, internal node
            names and ``[comments]`` (both ignored). A node with one child is spliced out.
        labels : sequence of str, optional
            The name of each data row: leaf ``name`` becomes the row ``labels.index(name)``.
            Without it, the leaves must be named ``0 .. n - 1`` (as :meth:`to_newick` names
            them without labels).
        lengths : bool, default=True
            Heights from the branch lengths, when every branch has one: the distance from
            the leaves, which must all be equally far from the root (an ultrametric tree, as
            :meth:`to_newick` writes). ``False`` reads the structure alone.
        underscore_is_space : bool, default=False
            Read ``_`` in unquoted names as a space, the Newick standard's rule, which
            DendroPy follows (it writes ``'a b'`` as ``a_b``); Bio.Phylo and ete keep ``_``.
            Quoted names are always read as written (:meth:`to_newick` quotes names with
            ``_`` or spaces).
        leaf_time : float, optional
            Heights as the times of a family whose leaves are at ``leaf_time`` and whose
            times fall towards the root: the node at distance *d* from the leaves (the sum
            of the branch lengths down to them) gets the height ``leaf_time - d /
            time_scale``. ``0`` gives the coalescence times of :class:`KingmanCoalescent`
            and :func:`coalescent_log_joint` (:math:`t = -d`); ``1`` the divergence times of
            :class:`PitmanYorDiffusionTree`, :func:`pydt_log_prior` and
            :func:`pydt_log_likelihood` (:math:`t = 1 - d`: every branch point must then be
            less than ``time_scale`` from the leaves). ``None`` (the default): the heights
            are the distances ``d / time_scale``, rising from 0 at the leaves, as a rose
            tree's. A tree that ``to_newick(lengths=True)`` wrote from a fitted coalescent
            (diffusion) tree reads back with its times, up to rounding in the last digits,
            with ``leaf_time=0`` (``1``). A length on the root (``(...):x;``), such as the
            diffusion tree's branch from the origin, is ignored. Needs a length on every
            branch.
        time_scale : float, default=1.0
            The branch length that makes one unit of the family's time: every distance is
            divided by it (exactly nothing changes with 1). For a published tree in other
            units, e.g. the distance from the diffusion tree's origin (time 0) to the
            leaves, in the tree's units, for :func:`pydt_log_prior`.
        ultrametric_rtol : float, default=1e-9
            How far apart, relative to the deepest, the leaves' distances from the root may
            be for the lengths to count as ultrametric; the heights are then measured from
            the deepest leaf, and every leaf is put at the leaves' height. Raise it for a
            tree whose lengths were written with few digits (Bio.Phylo writes 5 significant
            digits by default, ete 6: about ``1e-5`` of the depth per branch).

        Raises
        ------
        InvalidTreeError
            For text that is not one Newick tree, leaf names that are not the rows, lengths
            that do not give one height to every leaf, or a ``leaf_time`` or ``time_scale``
            for a tree without lengths.
        InvalidParameterError
            For a ``leaf_time``, ``time_scale`` or ``ultrametric_rtol`` that is not a finite
            number (positive for ``time_scale``, at least 0 for ``ultrametric_rtol``),
            naming it.

        Examples
        --------
        >>> import rosetree as rt
        >>> rt.Tree.from_newick("((0:1,1:1):2,2:3);").heights.tolist()
        [0.0, 0.0, 0.0, 1.0, 3.0]
        >>> rt.Tree.from_newick("((0:1,1:1):2,2:3);", leaf_time=0).heights.tolist()
        [0.0, 0.0, 0.0, -1.0, -3.0]
        >>> rt.Tree.from_newick("((0:1,1:1):2,2:3);", leaf_time=1, time_scale=4).heights.tolist()
        [1.0, 1.0, 1.0, 0.75, 0.25]
        """
        return _read_newick(
            text,
            labels,
            check_flag(lengths, "lengths"),
            check_flag(underscore_is_space, "underscore_is_space"),
            None if leaf_time is None else _newick_number(leaf_time, "leaf_time"),
            _newick_number(time_scale, "time_scale", low=0.0, strict=True),
            _newick_number(ultrametric_rtol, "ultrametric_rtol", low=0.0),
        )

    def to_newick(self, labels: Sequence[Any] | None = None, lengths: bool = False) -> str:
        """The tree in Newick format; leaves are named by ``labels`` or by row index.

        Parameters
        ----------
        labels : sequence of length n_leaves, optional
            Leaf names (quoted where Newick needs it).
        lengths : bool, default=False
            Give every branch the length :math:`|h_{parent} - h_{child}|` of :attr:`heights`,
            so that each leaf is at the same distance from the root.
        """
        names = None if labels is None else [str(s) for s in self._check_labels(labels)]
        if names is not None and len(set(names)) != len(names):
            twice = next(m for m in names if names.count(m) > 1)
            raise InvalidParameterError(
                f"labels has {twice!r} twice: a Newick tree names each leaf once", "labels"
            )
        return str(self._structure.to_newick(names, check_flag(lengths, "lengths")))

    def to_linkage(self) -> np.ndarray:
        r"""The tree as a SciPy linkage matrix ``Z`` of shape ``(n_leaves - 1, 4)``.

        Merge heights are the distances ``|heights - heights[0]|`` from the leaves: a parent
        is never below its children, rows are in increasing height, and
        ``fcluster(Z, t, "distance")`` gives :meth:`clusters_at_height` (``fcluster(Z, k,
        "maxclust")`` gives :meth:`max_clusters`). For a :class:`RoseTree` these are its
        heights :math:`h_v = -\max \ln r_A`, so ``fcluster(Z, -np.log(t), "distance")``
        gives :meth:`RoseTree.cut` at threshold *t*. A node with *k* children becomes a
        chain of *k - 1* binary merges at the node's height (zero-length branches), children
        in increasing (height, id).
        """
        return np.asarray(self._structure.to_linkage())

    def to_dict(self, labels: Sequence[Any] | None = None) -> dict[str, Any]:
        """A JSON-ready description: nested nodes with their statistics.

        Every node has ``id``, ``n_leaves`` and (with heights) ``height``; leaves add ``row``
        (and ``label``), internal nodes ``children``; subclasses add their own per-node
        values. Built without recursion; note that :func:`json.dumps` recurses, and
        :meth:`to_json` does not.
        """
        names = None if labels is None else self._check_labels(labels)
        built: dict[int, dict[str, Any]] = {}
        for v in range(self.n_nodes):  # children before parents
            d: dict[str, Any] = {"id": v, "n_leaves": int(self.sizes[v])}
            d.update(self._node_values(v))
            if self.heights is not None:
                d["height"] = float(self.heights[v])
            if v < self.n_leaves:
                d["row"] = v
                if names is not None:
                    d["label"] = names[v]
            else:
                d.update(self._internal_values(v))
                d["children"] = [built.pop(c) for c in self.children[v]]
            built[v] = d
        out: dict[str, Any] = {"n_leaves": self.n_leaves}
        out.update(self._tree_values())
        out["log10_n_partitions"] = self.n_partitions(log10=True)
        out["root"] = built[self.root]
        return out

    def _node_values(self, v: int) -> dict[str, Any]:
        """Family-specific values of every node for :meth:`to_dict`."""
        return {}

    def _internal_values(self, v: int) -> dict[str, Any]:
        """Family-specific values of an internal node for :meth:`to_dict`."""
        return {}

    def _tree_values(self) -> dict[str, Any]:
        """Family-specific values of the whole tree for :meth:`to_dict`."""
        return {}

    def _describe(self, v: int) -> str:
        """What :meth:`format` prints after an internal node's size."""
        if self.heights is None:
            return ""
        return f"  height = {self.heights[v]:.4g}"

    def to_json(self, labels: Sequence[Any] | None = None, indent: int | None = None) -> str:
        """:meth:`to_dict` as a JSON string, written without recursion.

        The text equals ``json.dumps(self.to_dict(labels), indent=indent, default=str)``,
        which itself fails on trees deeper than Python's recursion limit. Note that with
        ``indent`` every line is indented by its depth, so a chain of *n* leaves takes
        *O(n²)* characters; leave ``indent=None`` for deep trees. Python's own
        :func:`json.loads` recurses too and cannot read back trees deeper than about 490
        levels (two JSON levels per node); for those, keep the flat arrays (``children``,
        ``log_p``, ...) instead.
        """
        if indent is not None and (not is_int(indent) or not 0 <= indent <= 64):
            raise InvalidParameterError(
                f"indent must be None or an integer from 0 to 64, got {indent!r}", "indent"
            )
        return _dumps(self.to_dict(labels), None if indent is None else int(indent))

    def format(
        self,
        labels: Sequence[Any] | None = None,
        max_leaves: int | None = None,
        max_indent: int = 40,
    ) -> str:
        """An indented drawing of the tree with leaf labels and per-node values.

        Parameters
        ----------
        labels : sequence, optional
            Leaf names (default: row indices).
        max_leaves : int, optional
            Print at most this many leaves under any node, then a count of the rest.
        max_indent : int, default=40
            Indent at most this many levels: a deeper line starts with ``«+m»``, the number
            of outer levels left out, and then shows the innermost ``max_indent`` levels, so
            that a deep tree (a chain of *n* leaves) takes *O(n)* text rather than *O(n²)*.
        """
        names = (
            [str(i) for i in range(self.n_leaves)]
            if labels is None
            else [str(s) for s in self._check_labels(labels)]
        )
        max_indent = min(check_int(max_indent, "max_indent", cap=True), 2**20)
        if max_leaves is not None:
            max_leaves = check_int(max_leaves, "max_leaves", cap=True)
        width = 4 * max_indent
        lines: list[str] = []
        # (node, guides of the innermost levels, levels left out, last child, is the root);
        # each guide is 4 characters wide.
        stack: list[tuple[int, str, int, bool, bool] | str] = [(self.root, "", 0, True, True)]
        while stack:
            item = stack.pop()
            if isinstance(item, str):  # a "more children" line
                lines.append(item)
                continue
            v, guides, hidden, last, top = item
            prefix = guides if hidden == 0 else f"«+{hidden}» {guides}"
            branch = "" if top else ("└── " if last else "├── ")
            if v < self.n_leaves:
                lines.append(f"{prefix}{branch}{names[v]}")
                continue
            lines.append(
                f"{prefix}{branch}[{self.sizes[v]} leaves, {len(self.children[v])} children]"
                f"{self._describe(v)}"
            )
            kids = sorted(self.children[v], key=lambda c: (c >= self.n_leaves, c))
            shown = kids if max_leaves is None else kids[: max(max_leaves, 1)]
            inner, inner_hidden = guides, hidden
            if not top:
                inner += "    " if last else "│   "
                if len(inner) > width:
                    inner, inner_hidden = inner[4:], hidden + 1
            if len(shown) < len(kids):
                more = inner if inner_hidden == 0 else f"«+{inner_hidden}» {inner}"
                stack.append(f"{more}└── … {len(kids) - len(shown)} more")
            for k in reversed(range(len(shown))):
                is_last = k == len(shown) - 1 and len(shown) == len(kids)
                stack.append((shown[k], inner, inner_hidden, is_last, False))
        return "\n".join(lines)

    def _check_labels(self, labels: Sequence[Any]) -> list[Any]:
        labels = _label_list(labels)
        if len(labels) != self.n_leaves:
            raise InvalidParameterError(
                f"labels has {len(labels)} entries; the tree has {self.n_leaves} leaves", "labels"
            )
        return labels

    def __repr__(self) -> str:
        return (
            f"Tree(n_leaves={self.n_leaves}, n_internal={self.n_nodes - self.n_leaves}, "
            f"heights={self.heights is not None})"
        )

    def __str__(self) -> str:
        return self.format()


class RoseTree(Tree):
    r"""A Bayesian rose tree over ``n_leaves`` data items.

    A :class:`Tree` (same node ids, structure and conversions; its attributes ``n_leaves``,
    ``n_nodes``, ``root``, ``children``, ``parent`` and ``sizes``) whose nodes carry the
    quantities of the rose-tree mixture (BRT eqs 1.5 and 1.26).

    Attributes
    ----------
    log_f : ndarray of shape (n_nodes,)
        :math:`\ln f(\mathrm{leaves}(T))`, the cluster marginal likelihood of every node.
    log_p : ndarray of shape (n_nodes,)
        :math:`\ln p(\mathrm{leaves}(T) \mid T)`, every subtree's log evidence.
    log_pi : ndarray of shape (n_nodes,)
        :math:`\ln \pi_T` (0 at leaves).
    log_1m_pi : ndarray of shape (n_nodes,)
        :math:`\ln(1 - \pi_T)` (-inf at leaves), accurate also where :math:`\pi_T \approx 1`.
    log_evidence : float
        :math:`\ln p(D \mid T)` of the whole tree.
    heights : ndarray of shape (n_nodes,)
        :math:`h_v = -\max_{A} \ln r_A` over the nodes *A* on the path from the root to *v*
        (*v* included), with :math:`r_A` the posterior merge probability of eq 1.26: 0 at
        leaves, never lower at a parent than at its children, and :math:`h_v \le -\ln t`
        exactly when the top-down cut :meth:`cut` at threshold *t* has reached a cluster at
        or above *v*. These are the heights of :meth:`to_linkage`, so SciPy's
        ``fcluster(Z, -np.log(t), "distance")`` gives ``cut(t)``, and of the branch lengths
        of ``to_newick(lengths=True)``. ``+inf`` where :math:`r_A = 0`: the model gives the
        rows below *A* zero probability as one cluster (:math:`\ln f = -\infty`).

    Notes
    -----
    Three rules read flat clusters off the tree:

    * :meth:`cut` (Heller & Ghahramani): descend from the root until a node's
      :math:`r_T \ge` ``threshold``. The threshold has a meaning (the posterior probability
      of the merge, given that the mixture reaches the node) and matches the linkage heights.
    * :meth:`map_partition`: the single most probable tree-consistent partition under the
      tree's own mixture over partitions (eqs 1.4, 1.6). No parameter; it weighs every
      cluster against all the ways of splitting it, so it is the natural choice when the
      model is trusted.
    * :meth:`max_clusters`: at most *k* clusters, the lowest cut of the linkage heights that
      gives no more than *k* (SciPy's ``"maxclust"``). Use it when the number of clusters is
      known.
    """

    def __init__(self, core: Any) -> None:
        self._core = core
        self._set_structure(core.tree())
        self.log_evidence: float = float(core.log_evidence)

    def __reduce__(self) -> tuple[Any, ...]:
        return (RoseTree, (self._core,))

    @cached_property
    def heights(self) -> np.ndarray:
        r""":math:`h_v = -\max_A \ln r_A` on the path from the root to every node."""
        return _read_only(np.asarray(self._structure.heights()))

    @cached_property
    def log_f(self) -> np.ndarray:
        r""":math:`\ln f(\mathrm{leaves}(T))` of every node (eq 1.1)."""
        return _read_only(np.asarray(self._core.log_f()))

    @cached_property
    def log_p(self) -> np.ndarray:
        r""":math:`\ln p(\mathrm{leaves}(T) \mid T)` of every node (eq 1.5)."""
        return _read_only(np.asarray(self._core.log_p()))

    @cached_property
    def log_pi(self) -> np.ndarray:
        r""":math:`\ln \pi_T` of every node (0 at leaves)."""
        return _read_only(np.asarray(self._core.log_pi()))

    @cached_property
    def log_1m_pi(self) -> np.ndarray:
        r""":math:`\ln(1 - \pi_T)` of every node (-inf at leaves)."""
        return _read_only(np.asarray(self._core.log_1m_pi()))

    @cached_property
    def _log_r(self) -> np.ndarray:
        return _read_only(np.asarray(self._core.log_r()))

    @property
    def log_r(self) -> np.ndarray:
        r""":math:`\ln r_T = \ln \pi_T + \ln f - \ln p` (eq 1.26) for every node.

        :math:`r_T` is the posterior probability that the leaves of *T* form one cluster,
        given that the mixture reaches *T*; it is 1 at leaves.
        """
        return self._log_r

    def log_cluster_weights(self) -> np.ndarray:
        r""":math:`\ln w_S` of every node: the predictive mixture weights of eq 1.25.

        :math:`w_S = r_S \prod_{A \in \mathrm{ancestors}(S)} (1 - r_A)\, n_{A \to S} /
        |\mathrm{leaves}(A)|`, where :math:`n_{A \to S}` is the size of the child of *A* on
        the way to *S* (the printed eq 1.25 divides by :math:`|\mathrm{leaves}(S)|`; the
        weights only sum to one with :math:`|\mathrm{leaves}(A)|`). A new data item joins
        cluster *S* with prior probability :math:`w_S`; the weights sum to one.
        """
        return np.asarray(self._core.log_cluster_weights())

    def partitions(self, limit: int = 100_000) -> list[tuple[list[list[int]], float]]:
        r"""Every tree-consistent partition with its log mixing proportion (eq 1.6).

        Returns
        -------
        list of (clusters, log_weight)
            ``clusters`` is a list of lists of data rows; ``log_weight`` is
            :math:`\ln m(\phi \mid T)`. The weights sum to one.

        Raises
        ------
        InvalidParameterError
            If the tree has more than ``limit`` partitions.
        """
        return [
            ([self.leaves(c) for c in clusters], float(w))
            for clusters, w in self._core.partitions(check_int(limit, "limit", low=0, cap=True))
        ]

    def cut(self, threshold: float = 0.5) -> np.ndarray:
        r"""Flat clustering read off the tree top-down (Heller & Ghahramani's rule).

        Starting at the root, a node whose :math:`r_T \ge` ``threshold`` (eq 1.26) becomes
        one cluster; otherwise its children are visited. Leaves are always clusters. Equal
        to SciPy's ``fcluster(self.to_linkage(), -np.log(threshold), "distance")``.

        Parameters
        ----------
        threshold : float, default=0.5
            In [0, 1]: 0 gives one cluster, 1 keeps only nodes with :math:`r_T = 1`.

        Returns
        -------
        labels : ndarray of shape (n_leaves,)
            Cluster labels ``0 .. K-1``, numbered by the first row of each cluster.
        """
        return self.labels_of(self.cut_nodes(threshold))

    def cut_nodes(self, threshold: float = 0.5) -> list[int]:
        r"""The nodes that form the clusters of :meth:`cut`, in increasing id order.

        Descending from the root, a node whose :math:`r_T` (eq 1.26) is at least
        ``threshold`` is taken as a cluster and not descended into; leaves are always taken.
        """
        if not is_real(threshold):
            raise InvalidParameterError(
                f"threshold must be a number in [0, 1], got {threshold!r}", "threshold"
            )
        return list(self._core.cut(float(threshold)))

    def remix(self, mixing: str = "dp", gamma: float = 0.5, dp_alpha: float = 1.0) -> RoseTree:
        r"""The same tree with every node's mixture quantities under another mixing rule.

        Only :math:`\pi_T` and what depends on it change (``log_pi``, ``log_p``,
        :attr:`log_r`, :attr:`heights`); the cluster marginal likelihoods ``log_f`` and the
        node ids are the tree's own, so no data are needed. ``remix("dp").cut()`` is the
        flat clustering of ``flat_clusters="dp"`` of :class:`BayesianRoseTree`.

        Parameters
        ----------
        mixing, gamma, dp_alpha
            As in :class:`BayesianRoseTree`.
        """
        return RoseTree(self._core.remix(**mixing_args(mixing, gamma, dp_alpha)))

    def coarsen(self, mixing: str = "brt", gamma: float = 0.5) -> RoseTree:
        r"""The most probable coarsening of this tree: the exact form of edge contraction.

        Among the rose trees made from this one by dissolving internal nodes into their
        parents (every cluster of the result is a cluster of this tree), the one of highest
        :math:`\ln p(D \mid T)` under ``mixing``, found exactly by dynamic programming over
        the tree from the ``log_f`` it holds, so no data are needed. It is never less
        probable than the tree itself or than greedy contraction
        (``BayesianRoseTree(contract=True)``). Where two choices give the same
        :math:`\ln p` to the last bit, a node keeps the fewest children. It forms at most
        one sum per pair of rows, :math:`n^2 / 2` (about a second at 45,000 rows), and keeps
        :math:`\sum_v (k_v - 1) n_v` numbers over the internal nodes (*k* children, *n*
        leaves each): :math:`O(n \log n)` for a balanced binary tree, :math:`O(n^2)` for a
        chain. Beyond :math:`2^{30}` sums or :math:`2^{28}` numbers it is refused.

        With :func:`evaluate_tree`, it puts any binary tree, such as SciPy's linkage, on the
        scale of the rose tree's evidence (a binary tree's own evidence is that of BHC).

        Parameters
        ----------
        mixing : {"brt", "gamma"}, default="brt"
            The prior over partitions, as in :class:`BayesianRoseTree`. Under ``"dp"`` a
            node's :math:`\pi` depends on the whole subtree below it, and the dynamic
            programme would not be exact: it is refused.
        gamma : float, default=0.5
            As in :class:`BayesianRoseTree`.

        Raises
        ------
        InvalidParameterError
            For ``"dp"`` mixing, or a tree too large or too deep for its size, naming
            ``mixing`` or ``tree``.

        Examples
        --------
        >>> import numpy as np, rosetree as rt
        >>> from scipy.cluster.hierarchy import linkage
        >>> X = np.repeat(np.eye(3), 4, axis=0)  # three groups of four equal rows
        >>> Z = linkage(X, "average")
        >>> binary = rt.evaluate_tree(X, rt.Tree(len(X), Z[:, :2].astype(int)))
        >>> best = binary.coarsen()
        >>> best.log_evidence > binary.log_evidence
        True
        >>> sorted(len(best.children[v]) for v in best.internal_nodes)  # each group one node
        [2, 2, 4, 4, 4]
        """
        return RoseTree(self._core.coarsen(**mixing_args(mixing, gamma, 1.0)))

    def map_partition(self) -> np.ndarray:
        r"""Labels of the single most probable tree-consistent partition.

        Maximises the partition posterior :math:`m(\phi \mid T) \prod_{c \in \phi}
        f(D_c)` over :math:`\phi \in \Phi(T)` (eqs 1.4, 1.6) exactly, by dynamic
        programming over the tree; a node stays whole on a tie.
        """
        return self.labels_of(self.map_nodes())

    def map_nodes(self) -> list[int]:
        """The nodes that form the clusters of :meth:`map_partition`, in increasing id order."""
        return list(self._core.map_partition())

    def _node_values(self, v: int) -> dict[str, Any]:
        return {"log_p": float(self.log_p[v]), "log_f": float(self.log_f[v])}

    def _internal_values(self, v: int) -> dict[str, Any]:
        return {"log_pi": float(self.log_pi[v]), "r": float(math.exp(self._log_r[v]))}

    def _tree_values(self) -> dict[str, Any]:
        return {"log_evidence": self.log_evidence}

    def _describe(self, v: int) -> str:
        return f"  log p = {self.log_p[v]:.3f}  r = {math.exp(self._log_r[v]):.3g}"

    def __repr__(self) -> str:
        return (
            f"RoseTree(n_leaves={self.n_leaves}, n_internal={self.n_nodes - self.n_leaves}, "
            f"log_evidence={self.log_evidence:.4f})"
        )


def _label_list(labels: Any) -> list[Any]:
    """``labels`` as a list (a string or a scalar is not a sequence of labels)."""
    if isinstance(labels, (str, bytes)) or not hasattr(labels, "__iter__"):
        raise InvalidParameterError(
            f"labels must be a sequence of leaf names, got {type(labels).__name__}", "labels"
        )
    try:
        return list(labels)
    except TypeError as exc:
        raise InvalidParameterError(f"labels must be a sequence: {exc}", "labels") from None


def _ids(value: Any) -> Any:
    """A node's children as an iterable (a string or a scalar is not one)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TypeError(f"a node's children must be a list, got {value!r}")
    return value


def _dumps(obj: Any, indent: int | None) -> str:
    """``json.dumps(obj, indent=indent, default=str)`` with an explicit stack.

    Dicts and lists may nest to any depth. Runs of other values are written by
    :func:`json.dumps` itself (with the separators that ``indent`` implies at this depth).
    """
    item_sep = ", " if indent is None else ","
    out: list[str] = []
    # Each entry is either text to write or (value, depth).
    stack: list[str | tuple[Any, int]] = [(obj, 0)]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
            continue
        value, depth = item
        if isinstance(value, dict):
            items: list[tuple[Any, Any]] = list(value.items())
            opening, closing = "{", "}"
        elif isinstance(value, (list, tuple)):
            items = [(None, v) for v in value]
            opening, closing = "[", "]"
        else:
            out.append(json.dumps(value, default=str))
            continue
        if not items:
            out.append(opening + closing)
            continue
        newline = "" if indent is None else "\n" + " " * (indent * (depth + 1))
        sep = item_sep + newline
        # (text, nested value or _END): a run of plain items, or a key and a container.
        pieces: list[tuple[str, Any]] = []
        run: list[tuple[Any, Any]] = []
        for key, v in [*items, (None, _END)]:
            if v is not _END and not isinstance(v, (dict, list, tuple)):
                run.append((key, v))
                continue
            if run:
                plain = dict(run) if opening == "{" else [x for _, x in run]
                pieces.append((json.dumps(plain, default=str, separators=(sep, ": "))[1:-1], _END))
                run = []
            if v is not _END:
                pieces.append(("" if key is None else encode_basestring_ascii(str(key)) + ": ", v))
        stack.append(("" if indent is None else "\n" + " " * (indent * depth)) + closing)
        for k in reversed(range(len(pieces))):
            text, v = pieces[k]
            if v is not _END:
                stack.append((v, depth + 1))
            stack.append((opening + newline if k == 0 else sep) + text)
    return "".join(out)


_NEWICK_PUNCTUATION = "()[]':;,"


def _newick_tokens(text: str, underscore_is_space: bool) -> list[tuple[str, str]]:
    """``(kind, value)`` tokens: ``"p"`` punctuation, ``"n"`` a name (quoted ones unquoted)."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch == "[":
            end = text.find("]", i)
            if end < 0:
                raise InvalidTreeError("Newick: a comment '[' is not closed")
            i = end + 1
        elif ch == "'":
            parts, i = [], i + 1
            while True:
                end = text.find("'", i)
                if end < 0:
                    raise InvalidTreeError("Newick: a quoted name is not closed")
                parts.append(text[i:end])
                if text.startswith("''", end):
                    parts.append("'")
                    i = end + 2
                else:
                    i = end + 1
                    break
            tokens.append(("n", "".join(parts)))
        elif ch in _NEWICK_PUNCTUATION:
            tokens.append(("p", ch))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _NEWICK_PUNCTUATION:
                i += 1
            name = text[start:i]
            tokens.append(("n", name.replace("_", " ") if underscore_is_space else name))
    return tokens


def _newick_number(value: Any, name: str, low: float | None = None, strict: bool = False) -> float:
    """``value`` as a finite float, at least ``low`` (``strict``: above it)."""
    if not is_real(value):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}", name)
    x = float(value)
    if not math.isfinite(x) or (low is not None and (x <= low if strict else x < low)):
        bound = "" if low is None else f" {'>' if strict else '>='} {low:g}"
        raise InvalidParameterError(f"{name} must be finite{bound}, got {value!r}", name)
    return x


def _read_newick(
    text: str,
    labels: Sequence[Any] | None,
    lengths: bool,
    underscore_is_space: bool,
    leaf_time: float | None = None,
    time_scale: float = 1.0,
    ultrametric_rtol: float = 1e-9,
) -> Tree:
    if not isinstance(text, str):
        raise InvalidParameterError(f"text must be a str, got {type(text).__name__}", "text")
    tokens = _newick_tokens(text, underscore_is_space)
    if not tokens or tokens[-1] != ("p", ";"):
        raise InvalidTreeError("Newick: the tree must end with ';'")
    if ("p", ";") in tokens[:-1]:
        raise InvalidTreeError("Newick: one tree only (found ';' before the end)")
    # Nodes in the order they close (children before parents): leaf names, children lists
    # and branch lengths.
    names: list[str | None] = []
    kids: list[list[int]] = []
    length: list[float | None] = []
    open_groups: list[list[int]] = []
    current: int | None = None
    k = 0
    while k < len(tokens) - 1:
        kind, value = tokens[k]
        k += 1
        if kind == "n":
            if current is None:
                names.append(value)
                kids.append([])
                length.append(None)
                current = len(names) - 1
            elif kids[current] and value.strip():
                pass  # an internal node's name
            else:
                raise InvalidTreeError(f"Newick: unexpected name {value!r}")
        elif value == "(":
            if current is not None:
                raise InvalidTreeError("Newick: '(' after a node; a ',' is missing")
            open_groups.append([])
        elif value in ",)":
            if current is None or not open_groups:
                raise InvalidTreeError(f"Newick: unexpected {value!r} (an empty name?)")
            open_groups[-1].append(current)
            current = None
            if value == ")":
                children = open_groups.pop()
                if len(children) == 1:  # a unary node: the child, its lengths added up
                    current = children[0]
                    continue
                names.append(None)
                kids.append(children)
                length.append(None)
                current = len(names) - 1
        elif value == ":":
            if current is None or k >= len(tokens) - 1 or tokens[k][0] != "n":
                raise InvalidTreeError("Newick: ':' must follow a node and precede a length")
            try:
                x = float(tokens[k][1])
            except ValueError:
                raise InvalidTreeError(f"Newick: bad branch length {tokens[k][1]!r}") from None
            if not (math.isfinite(x) and x >= 0):
                raise InvalidTreeError(f"Newick: branch lengths must be finite and >= 0, got {x}")
            previous = length[current]
            length[current] = x if previous is None else previous + x
            k += 1
        else:
            raise InvalidTreeError(f"Newick: unexpected {value!r}")
    if open_groups or current is None:
        raise InvalidTreeError("Newick: unbalanced parentheses")
    root = current
    leaves = [v for v in range(len(names)) if not kids[v]]
    leaf_names = [str(names[v]) for v in leaves]
    n = len(leaves)
    if labels is None:
        rows = {str(i): i for i in range(n)}
        want = "the rows 0 .. n - 1 (or pass labels=)"
    else:
        rows = {}
        for i, name in enumerate(_label_list(labels)):
            if str(name) in rows:
                raise InvalidParameterError(f"labels has {str(name)!r} twice", "labels")
            rows[str(name)] = i
        if len(rows) != n:
            raise InvalidTreeError(f"Newick: the tree has {n} leaves for {len(rows)} labels")
        want = "the labels"
    if len(set(leaf_names)) != n or any(name not in rows for name in leaf_names):
        bad = next((m for m in leaf_names if m not in rows), None) or "a repeated name"
        raise InvalidTreeError(f"Newick: the leaves must be {want}; got {bad!r}")
    ids = {v: rows[str(names[v])] for v in leaves}
    internal: list[list[int]] = []
    for v in range(len(names)):  # every node made is in the tree
        if kids[v]:
            ids[v] = n + len(internal)
            internal.append([ids[c] for c in kids[v]])
    heights = None
    branches = [v for v in ids if v != root]
    if lengths and branches and all(length[v] is not None for v in branches):
        depth = {root: 0.0}
        for v in sorted(ids, key=lambda v: -ids[v]):  # parents before children
            for c in kids[v]:
                depth[c] = depth[v] + float(length[c])  # type: ignore[arg-type]
        leaf_depths = [depth[v] for v in leaves]
        top = max(leaf_depths)
        if top - min(leaf_depths) > ultrametric_rtol * max(top, 1e-300):
            raise InvalidTreeError(
                "Newick: the leaves are not equally far from the root (not ultrametric, "
                f"{(top - min(leaf_depths)) / top:.2g} of the depth apart); read the structure "
                "alone with lengths=False, or allow lengths rounded in writing with "
                "ultrametric_rtol"
            )
        distances = [0.0] * (n + len(internal))
        for v, i in ids.items():
            distances[i] = 0.0 if not kids[v] else (top - depth[v]) / time_scale
        heights = distances if leaf_time is None else [leaf_time - d for d in distances]
    elif not branches and leaf_time is not None:  # a single leaf
        heights = [leaf_time]
    elif leaf_time is not None or time_scale != 1.0:
        raise InvalidTreeError(
            "Newick: leaf_time and time_scale need a length on every branch"
            + ("" if lengths else " (and lengths=True)")
        )
    return Tree(n, internal, heights)


def nested_to_internal(tree: Any, n_leaves: int) -> list[list[int]]:
    """Child lists of the internal nodes of a tree, children before parents.

    ``tree`` is nested lists (or tuples) of row indices ``0 .. n_leaves - 1``, whose internal
    nodes are numbered in post-order, or a :class:`Tree` (a :class:`RoseTree`, one read by
    :meth:`Tree.from_newick`, …), whose own ids are kept. A list
    with one element stands for that element. The nesting is read with an explicit stack, so
    any depth works; the Rust core checks that every row appears exactly once.

    Raises
    ------
    InvalidTreeError
        For an empty list, a leaf that is not a row index, a list that appears twice (as in
        a cycle), or a Tree over another number of rows.
    """
    if isinstance(tree, Tree):
        if tree.n_leaves != n_leaves:
            raise InvalidTreeError(
                f"the tree has {tree.n_leaves} leaves, but the data have {n_leaves} rows"
            )
        return [list(c) for c in tree.children[tree.n_leaves :]]
    seen: set[int] = set()

    def unwrap(t: Any) -> Any:
        """``t`` without its one-element wrappers, checked."""
        while isinstance(t, (list, tuple)):
            if id(t) in seen:
                raise InvalidTreeError("the tree contains the same list twice (or a cycle)")
            seen.add(id(t))
            if len(t) == 0:
                raise InvalidTreeError("the tree contains an empty list")
            if len(t) > 1:
                return t
            t = t[0]
        if not is_int(t):
            raise InvalidTreeError(f"leaves must be row indices (int), got {t!r}")
        if not 0 <= int(t) < n_leaves:
            raise InvalidTreeError(f"leaf {t} is not a row of the data (0 .. {n_leaves - 1})")
        return int(t)

    root = unwrap(tree)
    internal: list[list[int]] = []
    if not isinstance(root, (list, tuple)):
        return internal
    # One frame per open list: its iterator and the ids of the children seen so far.
    stack: list[tuple[Any, list[int]]] = [(iter(root), [])]
    while stack:
        items, ids = stack[-1]
        child = next(items, _END)
        if child is _END:
            stack.pop()
            internal.append(ids)
            if stack:
                stack[-1][1].append(n_leaves + len(internal) - 1)
            continue
        child = unwrap(child)
        if isinstance(child, (list, tuple)):
            stack.append((iter(child), []))
        else:
            ids.append(child)
    return internal


_END = object()
