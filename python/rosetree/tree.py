"""The fitted rose tree: structure, per-node quantities, and conversions."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .exceptions import InvalidParameterError, InvalidTreeError

__all__ = ["RoseTree", "nested_to_internal"]


class RoseTree:
    r"""A Bayesian rose tree over ``n_leaves`` data items.

    Node ids are dense: leaves are ``0 .. n_leaves - 1`` (leaf *i* is data row *i*), internal
    nodes follow with every child before its parent, and the root is the last node. Each
    node carries the quantities of the rose-tree mixture (BRT eqs 1.5 and 1.26).

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
    """

    def __init__(self, core: Any) -> None:
        self._core = core
        self.children: tuple[tuple[int, ...], ...] = tuple(tuple(c) for c in core.children())
        self.n_leaves: int = int(core.n_leaves)
        self.n_nodes: int = len(self.children)
        self.root: int = self.n_nodes - 1
        self.sizes = np.asarray(core.sizes(), dtype=np.int64)
        self.log_f = np.asarray(core.log_f())
        self.log_p = np.asarray(core.log_p())
        self.log_pi = np.asarray(core.log_pi())
        self.log_1m_pi = np.asarray(core.log_1m_pi())
        self.log_evidence: float = float(core.log_evidence)
        parent = np.full(self.n_nodes, -1, dtype=np.int64)
        for node, kids in enumerate(self.children):
            parent[list(kids)] = node
        self.parent = parent
        for arr in (self.sizes, self.log_f, self.log_p, self.log_pi, self.log_1m_pi, self.parent):
            arr.flags.writeable = False

    # ------------------------------------------------------------------ structure
    @property
    def internal_nodes(self) -> range:
        """Ids of the internal nodes, children before parents."""
        return range(self.n_leaves, self.n_nodes)

    @property
    def log_r(self) -> np.ndarray:
        r""":math:`\ln r_T = \ln \pi_T + \ln f - \ln p` (eq 1.26) for every node.

        :math:`r_T` is the posterior probability that the leaves of *T* form one cluster,
        given that the mixture reaches *T*; it is 1 at leaves.
        """
        return np.minimum(self.log_pi + self.log_f - self.log_p, 0.0)

    def log_cluster_weights(self) -> np.ndarray:
        r""":math:`\ln w_S` of every node: the predictive mixture weights of eq 1.25.

        :math:`w_S = r_S \prod_{A \in \mathrm{ancestors}(S)} (1 - r_A)\, n_{A \to S} /
        |\mathrm{leaves}(A)|`, where :math:`n_{A \to S}` is the size of the child of *A* on
        the way to *S* (the printed eq 1.25 divides by :math:`|\mathrm{leaves}(S)|`; the
        weights only sum to one with :math:`|\mathrm{leaves}(A)|`). A new data item joins
        cluster *S* with prior probability :math:`w_S`; the weights sum to one.
        """
        log_sizes = np.log(self.sizes.astype(float))
        reach = np.zeros(self.n_nodes)  # log probability that the mixture reaches a node
        for v in reversed(self.internal_nodes):  # parents before children
            kids = list(self.children[v])
            # ln(1 - r_v) = ln(1 - pi_v) + sum ln p(children) - ln p_v, exact near r_v = 1
            log_1m_r = min(self.log_1m_pi[v] + self.log_p[kids].sum() - self.log_p[v], 0.0)
            reach[kids] = reach[v] + log_1m_r + log_sizes[kids] - log_sizes[v]
        return reach + self.log_r

    def leaves(self, node: int | None = None) -> list[int]:
        """Data rows below ``node`` (default: the root), in increasing order."""
        node = self.root if node is None else self._check_node(node)
        out: list[int] = []
        stack = [node]
        while stack:
            v = stack.pop()
            if v < self.n_leaves:
                out.append(v)
            else:
                stack.extend(self.children[v])
        return sorted(out)

    def depth(self) -> int:
        """Number of edges on the longest root-to-leaf path."""
        return int(self._heights()[self.root])

    def _check_node(self, node: int) -> int:
        if not 0 <= int(node) < self.n_nodes:
            raise IndexError(f"node {node} is not in the tree (0 .. {self.n_nodes - 1})")
        return int(node)

    def _heights(self) -> np.ndarray:
        h = np.zeros(self.n_nodes, dtype=np.int64)
        for v in self.internal_nodes:
            h[v] = 1 + max(h[c] for c in self.children[v])
        return h

    # ------------------------------------------------------------------ partitions
    def n_partitions(self, log10: bool = False) -> int | float:
        r"""Number of tree-consistent partitions :math:`|\Phi(T)|` (eq 1.3).

        Parameters
        ----------
        log10 : bool, default=False
            Return :math:`\log_{10} |\Phi(T)|` as a float instead of the exact integer
            (which can have thousands of digits for large trees).
        """
        if log10:
            return float(self._core.n_partitions_log10())
        count = [1] * self.n_nodes
        for v in self.internal_nodes:
            count[v] = 1 + math.prod(count[c] for c in self.children[v])
        return count[self.root]

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
            for clusters, w in self._core.partitions(int(limit))
        ]

    def cut(self, threshold: float = 0.5) -> np.ndarray:
        r"""Flat clustering read off the tree top-down (Heller & Ghahramani's rule).

        Starting at the root, a node whose :math:`r_T \ge` ``threshold`` becomes one cluster;
        otherwise its children are visited. Leaves are always clusters.

        Returns
        -------
        labels : ndarray of shape (n_leaves,)
            Cluster labels ``0 .. K-1``, numbered by the first row of each cluster.
        """
        return self._labels_from(self.cut_nodes(threshold))

    def cut_nodes(self, threshold: float = 0.5) -> list[int]:
        r"""The nodes that form the clusters of :meth:`cut`, in increasing id order.

        Descending from the root, a node whose :math:`r_T` (eq 1.26) is at least
        ``threshold`` is taken as a cluster and not descended into; leaves are always taken.
        """
        if not 0.0 <= threshold <= 1.0:
            raise InvalidParameterError(
                f"threshold must lie in [0, 1], got {threshold}", "threshold"
            )
        log_thr = math.log(threshold) if threshold > 0 else -math.inf
        log_r = self.log_r
        clusters: list[int] = []
        stack = [self.root]
        while stack:
            v = stack.pop()
            if v < self.n_leaves or log_r[v] >= log_thr:
                clusters.append(v)
            else:
                stack.extend(self.children[v])
        return sorted(clusters)

    def map_partition(self) -> np.ndarray:
        r"""Labels of the single most probable tree-consistent partition.

        Maximises :math:`m(\phi \mid T)\, g(\phi)` over :math:`\phi \in \Phi(T)` exactly, by
        dynamic programming over the tree.
        """
        best = self.log_f.copy()  # at leaves, the only partition
        keep = np.ones(self.n_nodes, dtype=bool)
        for v in self.internal_nodes:
            whole = self.log_pi[v] + self.log_f[v]
            split = self.log_1m_pi[v] + sum(best[c] for c in self.children[v])
            keep[v] = whole >= split
            best[v] = max(whole, split)
        clusters: list[int] = []
        stack = [self.root]
        while stack:
            v = stack.pop()
            if keep[v]:
                clusters.append(v)
            else:
                stack.extend(self.children[v])
        return self._labels_from(clusters)

    def _labels_from(self, clusters: list[int]) -> np.ndarray:
        labels = np.empty(self.n_leaves, dtype=np.int64)
        for v in clusters:
            labels[self.leaves(v)] = v
        _, first = np.unique(labels, return_index=True)
        order = {labels[i]: k for k, i in enumerate(sorted(first))}
        return np.array([order[v] for v in labels], dtype=np.int64)

    # ------------------------------------------------------------------ conversions
    def to_nested(self, node: int | None = None) -> list[Any]:
        """The tree as nested lists of data rows, e.g. ``[[0, 1, 2], [3, 4]]``."""
        node = self.root if node is None else self._check_node(node)
        if node < self.n_leaves:
            return node  # type: ignore[return-value]
        return [self.to_nested(c) for c in self.children[node]]

    def to_newick(self, labels: Sequence[Any] | None = None) -> str:
        """The tree in Newick format; leaves are named by ``labels`` or by row index."""
        names = None if labels is None else [str(s) for s in self._check_labels(labels)]
        return str(self._core.to_newick(names))

    def to_linkage(self) -> np.ndarray:
        """The tree as a SciPy linkage matrix ``Z`` of shape ``(n_leaves - 1, 4)``.

        A node with *k* children becomes a chain of *k - 1* binary merges at the same height,
        i.e. joined by zero-length branches. The height of a node is its number of edges to
        its deepest leaf, so heights increase towards the root and the matrix is monotonic.
        """
        n = self.n_leaves
        heights = self._heights()
        cluster_of = np.arange(self.n_nodes, dtype=np.int64)
        rows: list[tuple[float, float, float, float]] = []
        size = {i: 1 for i in range(n)}
        for v in self.internal_nodes:
            kids = sorted(self.children[v], key=lambda c: (heights[c], c))
            cur = int(cluster_of[kids[0]])
            for c in kids[1:]:
                other = int(cluster_of[c])
                new = n + len(rows)
                size[new] = size[cur] + size[other]
                a, b = min(cur, other), max(cur, other)
                rows.append((a, b, float(heights[v]), size[new]))
                cur = new
            cluster_of[v] = cur
        return np.array(rows, dtype=np.float64).reshape(-1, 4)

    def to_dict(self, labels: Sequence[Any] | None = None) -> dict[str, Any]:
        """A JSON-ready description: nested nodes with their statistics."""
        names = None if labels is None else self._check_labels(labels)
        log_r = self.log_r

        def node(v: int) -> dict[str, Any]:
            d: dict[str, Any] = {
                "id": v,
                "n_leaves": int(self.sizes[v]),
                "log_p": float(self.log_p[v]),
                "log_f": float(self.log_f[v]),
            }
            if v < self.n_leaves:
                d["row"] = v
                if names is not None:
                    d["label"] = names[v]
            else:
                d["log_pi"] = float(self.log_pi[v])
                d["r"] = float(math.exp(log_r[v]))
                d["children"] = [node(c) for c in self.children[v]]
            return d

        return {
            "n_leaves": self.n_leaves,
            "log_evidence": self.log_evidence,
            "log10_n_partitions": self.n_partitions(log10=True),
            "root": node(self.root),
        }

    def to_json(self, labels: Sequence[Any] | None = None, **kwargs: Any) -> str:
        """:meth:`to_dict` as a JSON string (``kwargs`` go to :func:`json.dumps`)."""
        return json.dumps(self.to_dict(labels), default=str, **kwargs)

    def format(self, labels: Sequence[Any] | None = None, max_leaves: int | None = None) -> str:
        """An indented drawing of the tree with leaf labels and per-node log evidence.

        Parameters
        ----------
        labels : sequence, optional
            Leaf names (default: row indices).
        max_leaves : int, optional
            Print at most this many leaves under any node, then a count of the rest.
        """
        names = (
            [str(i) for i in range(self.n_leaves)]
            if labels is None
            else [str(s) for s in self._check_labels(labels)]
        )
        log_r = self.log_r
        lines: list[str] = []

        def walk(v: int, prefix: str, last: bool, top: bool) -> None:
            branch = "" if top else ("└── " if last else "├── ")
            if v < self.n_leaves:
                lines.append(f"{prefix}{branch}{names[v]}")
                return
            lines.append(
                f"{prefix}{branch}[{self.sizes[v]} leaves, {len(self.children[v])} children]  "
                f"log p = {self.log_p[v]:.3f}  r = {math.exp(log_r[v]):.3g}"
            )
            kids = sorted(self.children[v], key=lambda c: (c >= self.n_leaves, c))
            shown = kids if max_leaves is None else kids[: max(max_leaves, 1)]
            child_prefix = prefix + ("" if top else ("    " if last else "│   "))
            for k, c in enumerate(shown):
                walk(c, child_prefix, k == len(shown) - 1 and len(shown) == len(kids), False)
            if len(shown) < len(kids):
                lines.append(f"{child_prefix}└── … {len(kids) - len(shown)} more")

        walk(self.root, "", True, True)
        return "\n".join(lines)

    def _check_labels(self, labels: Sequence[Any]) -> list[Any]:
        labels = list(labels)
        if len(labels) != self.n_leaves:
            raise InvalidParameterError(
                f"labels has {len(labels)} entries; the tree has {self.n_leaves} leaves", "labels"
            )
        return labels

    def __repr__(self) -> str:
        return (
            f"RoseTree(n_leaves={self.n_leaves}, n_internal={self.n_nodes - self.n_leaves}, "
            f"log_evidence={self.log_evidence:.4f})"
        )

    def __str__(self) -> str:
        return self.format()


def nested_to_internal(tree: Any, n_leaves: int) -> list[list[int]]:
    """Child lists of the internal nodes of a nested-list tree (or a RoseTree), in post-order.

    Leaves are row indices ``0 .. n_leaves - 1``; a list with one element stands for that
    element. The Rust core checks that every row appears exactly once. The walk keeps its
    own stack, so trees of any depth (a chain of 100,000 merges) are read without
    recursion.
    """
    if isinstance(tree, RoseTree):
        tree = tree.to_nested()

    def unwrap(t: Any) -> Any:
        while isinstance(t, (list, tuple)) and len(t) == 1:
            t = t[0]
        if isinstance(t, (list, tuple)):
            if len(t) == 0:
                raise InvalidTreeError("the tree contains an empty list")
            return t
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise InvalidTreeError(f"leaves must be row indices (int), got {t!r}")
        if not 0 <= int(t) < n_leaves:
            raise InvalidTreeError(f"leaf {t} is not a row of the data (0 .. {n_leaves - 1})")
        return int(t)

    internal: list[list[int]] = []
    root = unwrap(tree)
    if not isinstance(root, (list, tuple)):
        return internal
    # Each frame: a list node and the ids of its children read so far.
    stack: list[tuple[Any, list[int]]] = [(root, [])]
    while stack:
        node, ids = stack[-1]
        if len(ids) < len(node):
            child = unwrap(node[len(ids)])
            if isinstance(child, int):
                ids.append(child)
            else:
                stack.append((child, []))
            continue
        stack.pop()
        internal.append(ids)
        if stack:
            stack[-1][1].append(n_leaves + len(internal) - 1)
    return internal
