"""RoseTree.coarsen: the most probable coarsening, against every coarsening evaluated."""

import itertools

import numpy as np
import pytest
import rosetree as rt
from scipy.cluster.hierarchy import linkage


def coarsened(tree: rt.Tree, dissolved: set[int], v: int | None = None) -> list:
    """``tree`` (below ``v``) as nested lists, each node in ``dissolved`` replaced by its
    children."""
    out: list = []
    for c in tree.children[tree.root if v is None else v]:
        if c < tree.n_leaves:
            out.append(c)
        elif c in dissolved:
            out.extend(coarsened(tree, dissolved, c))
        else:
            out.append(coarsened(tree, dissolved, c))
    return out


@pytest.mark.parametrize("mixing", ["brt", "gamma"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_coarsening_of_scipys_tree_beats_every_other(mixing, seed):
    rng = np.random.default_rng(seed)
    X = np.repeat(rng.normal(size=(3, 2)) * 3, 3, axis=0) + 0.2 * rng.normal(size=(9, 2))
    model = rt.NormalGamma()
    Z = linkage(X, "average")
    tree = rt.evaluate_tree(X, rt.Tree(len(X), Z[:, :2].astype(int)), model=model, mixing=mixing)
    best = tree.coarsen(mixing, gamma=0.5)

    below_root = [v for v in tree.internal_nodes if v != tree.root]
    scores = []
    for k in range(len(below_root) + 1):
        for dissolved in itertools.combinations(below_root, k):
            nested = coarsened(tree, set(dissolved))
            scores.append(rt.log_evidence(X, nested, model=model, mixing=mixing))
    assert len(scores) == 2 ** len(below_root)
    assert best.log_evidence == pytest.approx(max(scores), rel=1e-12)
    # Its numbers are those of its own tree, computed again from the data.
    again = rt.evaluate_tree(X, best, model=model, mixing=mixing)
    assert again.log_evidence == pytest.approx(best.log_evidence, rel=1e-12)
    np.testing.assert_allclose(again.log_p, best.log_p, rtol=1e-12)
    # Here some coarsening is strictly better than the binary tree.
    assert best.log_evidence > tree.log_evidence + 0.3
    assert len(best.internal_nodes) < len(tree.internal_nodes)
    clusters = {frozenset(tree.leaves(v)) for v in tree.internal_nodes}
    assert {frozenset(best.leaves(v)) for v in best.internal_nodes} <= clusters


def test_dp_mixing_and_trees_too_deep_are_refused():
    X = np.eye(4)
    tree = rt.evaluate_tree(X, [[0, 1], [2, 3]], mixing="dp")
    with pytest.raises(rt.InvalidParameterError, match="mixing") as info:
        tree.coarsen("dp")
    assert info.value.parameter == "mixing"
    # A chain of 2**15 rows needs about 2**29 table entries.
    n = 2**15
    chain = rt.Tree(n, [[0, 1]] + [[n + k - 1, k + 1] for k in range(1, n - 1)])
    deep = rt.evaluate_tree(np.zeros((n, 1)), chain)
    with pytest.raises(rt.InvalidParameterError, match="too deep") as info:
        deep.coarsen()
    assert info.value.parameter == "tree"
