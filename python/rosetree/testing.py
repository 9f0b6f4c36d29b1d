"""Hypothesis strategies for rose trees and data, and a tree checker, for property tests.

Importing this module requires `hypothesis` (``pip install bayesian-rosetree[test]``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .tree import RoseTree

__all__ = ["assert_valid_tree", "binary_data", "rose_trees"]


@st.composite
def rose_trees(draw: st.DrawFn, items: Sequence[int], binary: bool = False) -> Any:
    """Nested-list rose trees over ``items`` (every item exactly once).

    With ``binary=True`` every internal node has two children.
    """
    items = list(items)
    if len(items) == 1:
        return items[0]
    perm = draw(st.permutations(items))
    k = 2 if binary else draw(st.integers(2, len(items)))
    cuts = sorted(
        draw(st.lists(st.integers(1, len(items) - 1), min_size=k - 1, max_size=k - 1, unique=True))
    )
    bounds = [0, *cuts, len(items)]
    return [draw(rose_trees(perm[a:b], binary)) for a, b in itertools.pairwise(bounds)]


@st.composite
def binary_data(
    draw: st.DrawFn, n: int, d: int, missing: bool = False, distinct: bool = False
) -> np.ndarray:
    """An ``n`` × ``d`` array of 0/1 entries (NaN for missing ones if ``missing``).

    With ``distinct=True`` no two rows are equal (needs ``2**d >= n``).
    """
    elements = st.sampled_from([0.0, 1.0, np.nan] if missing else [0.0, 1.0])
    rows = st.lists(elements, min_size=d, max_size=d).map(tuple)
    data = draw(st.lists(rows, min_size=n, max_size=n, unique=distinct))
    return np.array(data, dtype=np.float64)


def assert_valid_tree(tree: RoseTree) -> None:
    """Check the structural invariants of a fitted tree (raises AssertionError)."""
    n = tree.n_leaves
    seen = np.zeros(tree.n_nodes, dtype=int)
    for v in tree.internal_nodes:
        kids = tree.children[v]
        assert len(kids) >= 2, f"node {v} has {len(kids)} children"
        assert all(c < v for c in kids), f"node {v} has a child with a larger id"
        seen[list(kids)] += 1
        assert tree.sizes[v] == sum(tree.sizes[c] for c in kids)
    assert (seen[:-1] == 1).all() and seen[-1] == 0, "every node but the root has one parent"
    assert tree.leaves() == list(range(n))
    assert np.all(tree.log_r <= 0.0)
    assert np.isfinite(tree.log_p).all() and np.isfinite(tree.log_f).all()
