#!/usr/bin/env python3
r"""Run PERCH (Kobren et al. 2017) online on the rows that rosetree's ``partial_fit`` streams.

PERCH is the reference Python implementation of "A hierarchical algorithm for extreme
clustering" (KDD 2017), ``PNode`` in github.com/iesl/xcluster. It is not part of rosetree,
is not installed or imported by the package or its tests, and nothing of it is copied here:
:func:`load_perch` imports it from a checkout given on the command line
(``bench_partial_fit.py --perch-src /path/to/xcluster/src``). Its module needs NumPy and
Numba; where Numba is missing, install it for the benchmark run only, outside the project
(``pip install --target /tmp/perch-deps --no-deps numba llvmlite`` and
``PYTHONPATH=/tmp/perch-deps``).

How it is run, as the paper's hierarchical experiments and the repository's
``xcluster.eval.eval_dataset`` run it: one ``PNode(exact_dist_thres=10)`` root, every row
inserted once, one at a time in the stream's order (``root = root.insert(pt,
collapsibles=None, L=inf)``: exact A* search for the nearest leaf by Euclidean distance,
split down, then masking and balance rotations), no bound on the number of leaves and no
collapsing. Its node ids come from :mod:`random`, which only breaks ties of its heaps;
:func:`run_perch` seeds it.

The tree is read back as nested lists of row indices (:func:`perch_to_nested`), which
:func:`rosetree.metrics.dendrogram_purity` scores exactly as it scores rosetree's trees.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def load_perch(src: str | Path) -> Any:
    """The ``PNode`` class of an xcluster checkout.

    ``src`` may be the repository, its ``src`` folder or its ``src/python`` folder (the
    folder holding the ``xcluster`` package).
    """
    src = Path(src)
    for folder in (src, src / "python", src / "src" / "python"):
        if (folder / "xcluster" / "models" / "PNode.py").is_file():
            sys.path.insert(0, str(folder))
            from xcluster.models.PNode import PNode  # type: ignore[import-not-found]

            return PNode
    raise SystemExit(f"no xcluster/models/PNode.py under {src} (its src or src/python)")


def perch_to_nested(root: Any) -> Any:
    """A PERCH tree as nested lists of row indices (a leaf's point id is its row).

    Read with an explicit stack (PERCH trees can be deeper than Python's recursion limit).
    A leaf holds its one point ``(vector, label, id)`` in ``pts``; internal nodes hold
    ``children``.
    """
    done: dict[int, Any] = {}
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if not node.children:
            (point,) = node.pts
            done[id(node)] = int(point[2])
        elif expanded:
            done[id(node)] = [done.pop(id(c)) for c in node.children]
        else:
            stack.append((node, True))
            stack.extend((c, False) for c in node.children)
    return done[id(root)]


def check_conversion(PNode: Any) -> None:
    """Asserts :func:`perch_to_nested` on two tiny trees: one built by hand, one by PERCH."""
    from rosetree.metrics import dendrogram_purity

    def leaf(row: int) -> Any:
        node = PNode()
        node.pts = [(np.zeros(1), "?", row)]
        return node

    def internal(*children: Any) -> Any:
        node = PNode()
        for c in children:
            node.add_child(c)
        return node

    # ((2, 0), (1, (3, 4))) by hand: the conversion keeps ids and child order.
    hand = internal(internal(leaf(2), leaf(0)), internal(leaf(1), internal(leaf(3), leaf(4))))
    assert perch_to_nested(hand) == [[2, 0], [1, [3, 4]]], perch_to_nested(hand)
    # Rows 0, 1 of class a, 2, 3, 4 of b: {0, 1} meet at the root (2 of its 5 leaves are
    # a), so do {2, 3} and {2, 4} (3 of 5 are b); {3, 4} meet in a pure node.
    purity = dendrogram_purity(perch_to_nested(hand), ["a", "a", "b", "b", "b"])
    expected = (2 / 5 + 3 / 5 + 3 / 5 + 1.0) / 4
    assert abs(purity - expected) < 1e-12, (purity, expected)
    # PERCH itself on two well-separated groups: each group is a subtree, purity 1.
    X = np.array([[0.0], [10.0], [0.1], [10.1], [0.2], [10.2]])
    nested, _ = run_perch(PNode, X, seed=0)
    assert sorted(_flatten(nested)) == list(range(6)), nested
    assert dendrogram_purity(nested, [0, 1, 0, 1, 0, 1]) == 1.0, nested
    # On overlapping blobs, rosetree's purity of the converted tree is xcluster's own exact
    # dendrogram purity of PERCH's tree. (Its labels start at 1: xcluster's node purity
    # takes a label 0 for "no label given".)
    from xcluster.utils.dendrogram_purity import (  # type: ignore[import-not-found]
        dendrogram_purity as perch_purity,
    )

    rng = np.random.default_rng(0)
    y = rng.integers(1, 4, size=60)
    X = rng.normal(size=(60, 2)) + 1.5 * y[:, None]
    root = _perch_tree(PNode, X, y.tolist(), seed=0)
    ours, theirs = dendrogram_purity(perch_to_nested(root), y), perch_purity(root)
    assert 0.3 < ours < 1.0 and abs(ours - theirs) < 1e-12, (ours, theirs)


def _flatten(nested: Any) -> list[int]:
    out, stack = [], [nested]
    while stack:
        t = stack.pop()
        if isinstance(t, list):
            stack.extend(t)
        else:
            out.append(t)
    return out


def run_perch(PNode: Any, X: np.ndarray, seed: int = 0) -> tuple[Any, float]:
    """PERCH on the rows of ``X``, inserted one at a time in order.

    Returns the tree as nested lists of row indices and the wall time of the insertions in
    seconds. The first insertions compile PERCH's Numba functions; the time includes that
    (well under a second), as any run of PERCH would.
    """
    t0 = time.perf_counter()
    root = _perch_tree(PNode, X, [None] * len(X), seed)
    seconds = time.perf_counter() - t0
    return perch_to_nested(root), seconds


def _perch_tree(PNode: Any, X: np.ndarray, labels: list[Any], seed: int) -> Any:
    """PERCH's root after inserting the rows of ``X`` in order (point ids are rows).

    ``labels`` only ride along (PERCH's insertion never reads them; its purity functions
    do).
    """
    random.seed(seed)
    X = np.ascontiguousarray(X, dtype=np.float64)
    root = PNode(exact_dist_thres=10)
    for i in range(len(X)):
        root = root.insert((X[i], labels[i], i), collapsibles=None, L=float("inf"))
    return root
