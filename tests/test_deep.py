"""Every tree operation on a chain (caterpillar) of 100,000 leaves: nothing may recurse.

The tree [[[[0, 1], 2], 3], ...] is 99,999 internal nodes deep, far beyond Python's recursion
limit, and is given as a 100,000-deep nested Python list.
"""

import json
import pickle
from types import SimpleNamespace

import numpy as np
import pytest
import rosetree as rt
from rosetree.cli import _report
from rosetree.tree import nested_to_internal
from scipy.cluster import hierarchy

N = 100_000


@pytest.fixture(scope="module")
def chain():
    rng = np.random.default_rng(0)
    X = (rng.random((N, 3)) < 0.3).astype(float)
    nested = 0
    for i in range(1, N):
        nested = [nested, i]
    tree = rt.evaluate_tree(X, nested)
    return X, nested, tree


def expected_internal():
    return [[0, 1]] + [[N + k - 1, k + 1] for k in range(1, N - 1)]


def test_nested_lists_are_read_without_recursion(chain):
    X, nested, tree = chain
    assert nested_to_internal(nested, N) == expected_internal()
    assert nested_to_internal(tree, N) == expected_internal()
    assert tree.n_nodes == 2 * N - 1 and tree.depth() == N - 1
    assert rt.log_evidence(X, nested) == tree.log_evidence
    assert rt.log_evidence(X, tree) == tree.log_evidence
    assert np.isfinite(rt.evidence_gradient(X, tree).log_evidence)
    # A self-containing list would loop forever; it is rejected instead.
    loop = [0]
    loop.append(loop)
    with pytest.raises(rt.InvalidTreeError, match="twice"):
        nested_to_internal(loop, 2)


def test_conversions(chain):
    _, _, tree = chain
    assert nested_to_internal(tree.to_nested(), N) == expected_internal()
    d = tree.to_dict()
    node, depth = d["root"], 0
    while "children" in node:
        assert [c["n_leaves"] for c in node["children"]] == [N - depth - 1, 1]
        node, depth = node["children"][0], depth + 1
    assert depth == N - 1 and node["row"] == 0
    text = tree.to_json()
    assert text.count('"children"') == N - 1
    assert text.startswith('{"n_leaves"') and text.endswith("}")
    assert json.loads(text[:200].split(', "root"')[0] + "}")["n_leaves"] == N
    newick = tree.to_newick()
    assert newick == "(" * (N - 1) + "0," + ",".join(f"{i})" for i in range(1, N)) + ";"
    assert tree.to_newick(lengths=True).count(":") == 2 * N - 2
    lines = tree.format(max_leaves=3).splitlines()
    assert len(lines) == tree.n_nodes
    assert max(map(len, lines)) < 300 and "«+" in lines[-1]
    assert pickle.loads(pickle.dumps(tree)).to_newick() == newick


def test_flat_clusters_heights_and_linkage(chain):
    _, _, tree = chain
    h = tree.heights
    assert np.all(h[tree.parent[: tree.n_nodes - 1]] >= h[: tree.n_nodes - 1])
    Z = tree.to_linkage()
    assert hierarchy.is_valid_linkage(Z) and hierarchy.is_monotonic(Z)
    for t in (0.5, 0.01):
        flat = hierarchy.fcluster(Z, -np.log(t), criterion="distance")
        assert len(np.unique(flat)) == len(np.unique(tree.cut(t)))
    assert len(np.unique(tree.map_partition())) >= 1
    assert len(np.unique(tree.max_clusters(7))) <= 7
    assert tree.n_partitions() == N
    assert tree.n_partitions(log10=True) == pytest.approx(np.log10(N))
    with pytest.raises(rt.InvalidParameterError, match="limit"):
        tree.partitions()
    assert np.exp(tree.log_cluster_weights()).sum() == pytest.approx(1.0, rel=1e-9)
    assert tree.leaves() == list(range(N))


def test_plot_and_command_line_report(chain, tmp_path, capsys):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rosetree.plot import dendrogram_layout, leaf_order, plot_tree

    _, _, tree = chain
    assert leaf_order(tree)[:3] == [0, 1, 2]
    pos, _ = dendrogram_layout(tree, heights="posterior")
    kids = pos[list(tree.children[tree.root])]
    assert pos[tree.root] == pytest.approx((kids.min() + kids.max()) / 2)
    plot_tree(tree, clusters="cut", heights="posterior")
    plt.close("all")

    est = SimpleNamespace(
        tree_=tree,
        labels_=tree.cut(),
        log_evidence_=tree.log_evidence,
        n_clusters=None,
        flat_clusters="cut",
        cut_threshold=0.5,
    )
    args = SimpleNamespace(
        max_children=None,
        learn=False,
        mixing="brt",
        newick=str(tmp_path / "t.nwk"),
        labels_out=None,
        json=str(tmp_path / "t.json"),
    )
    _report(est, None, args)
    out = capsys.readouterr().out
    assert "flat clusters" in out and "wrote JSON" in out
    assert (tmp_path / "t.json").read_text().count('"children"') == N - 1
