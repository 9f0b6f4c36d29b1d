"""Newick: rosetree's trees written and read back, through Bio.Phylo too, and published trees."""

import io

import numpy as np
import pytest
import rosetree as rt

# ((0, 1), (2, 3)) with heights 1 and 2 under a root at 3.5.
TREE = rt.Tree(4, [[0, 1], [2, 3], [4, 5]], heights=[0, 0, 0, 0, 1.0, 2.0, 3.5])
NAMES = ["a b", "o'k", "c_d", "e(1)"]


def leaf_sets(tree):
    return sorted(tuple(tree.leaves(v)) for v in tree.internal_nodes)


@pytest.mark.parametrize("labels", [None, NAMES])
def test_a_written_tree_reads_back(labels):
    text = TREE.to_newick(labels=labels, lengths=True)
    back = rt.Tree.from_newick(text, labels=labels)
    assert back.children == TREE.children
    np.testing.assert_allclose(back.heights, TREE.heights, rtol=1e-15)
    structure = rt.Tree.from_newick(TREE.to_newick(labels=labels), labels=labels)
    assert structure.children == TREE.children and structure.heights is None


def test_a_fitted_rose_tree_reads_back_with_its_evidence():
    animals = rt.datasets.load_animals()
    est = rt.BayesianRoseTree().fit(animals.data)
    names = list(animals.names)
    back = rt.Tree.from_newick(est.tree_.to_newick(labels=names, lengths=True), labels=names)
    assert leaf_sets(back) == leaf_sets(est.tree_)

    def height_of_leaf_set(tree):
        return {tuple(tree.leaves(v)): tree.distances[v] for v in tree.internal_nodes}

    want, got = height_of_leaf_set(est.tree_), height_of_leaf_set(back)
    for key, h in want.items():
        assert got[key] == pytest.approx(h, rel=1e-12, abs=1e-12 * max(want.values()))
    # A tree read from Newick is evaluated under any model.
    assert rt.log_evidence(animals.data, back) == pytest.approx(est.log_evidence_, rel=1e-12)


def test_round_trip_through_bio_phylo():
    phylo = pytest.importorskip("Bio.Phylo")
    text = TREE.to_newick(labels=NAMES, lengths=True)
    parsed = phylo.read(io.StringIO(text), "newick")
    assert sorted(c.name for c in parsed.get_terminals()) == sorted(NAMES)
    assert {c.name: parsed.distance(c) for c in parsed.get_terminals()} == pytest.approx(
        dict.fromkeys(NAMES, 3.5)
    )
    out = io.StringIO()
    phylo.write(parsed, out, "newick")
    back = rt.Tree.from_newick(out.getvalue().strip(), labels=NAMES)
    assert leaf_sets(back) == leaf_sets(TREE)
    np.testing.assert_allclose(back.heights, TREE.heights, rtol=1e-6)  # Bio writes 5 digits


def test_round_trip_through_dendropy():
    dendropy = pytest.importorskip("dendropy")
    text = TREE.to_newick(labels=NAMES, lengths=True)
    parsed = dendropy.Tree.get(data=text, schema="newick", preserve_underscores=True)
    assert sorted(leaf.taxon.label for leaf in parsed.leaf_node_iter()) == sorted(NAMES)
    written = parsed.as_string(schema="newick").strip()  # 'a b' comes back as a_b
    back = rt.Tree.from_newick(written, labels=NAMES, underscore_is_space=True)
    assert leaf_sets(back) == leaf_sets(TREE)
    np.testing.assert_allclose(back.heights, TREE.heights, rtol=1e-15)


def test_published_trees_with_comments_internal_names_and_unary_nodes():
    text = "[a comment] ((Bat:1.0,'Big cat':1)Mammals:2,(((Crow:3))):0);"
    tree = rt.Tree.from_newick(text, labels=["Crow", "Bat", "Big cat"])
    assert leaf_sets(tree) == [(0, 1, 2), (1, 2)]
    assert tree.heights[tree.root] == 3.0
    assert rt.Tree.from_newick("(0,1,(2,3));").children[4:] == ((2, 3), (0, 1, 4))


def test_deep_trees_are_read_without_recursion():
    n = 5000
    text = "(" * (n - 1) + "0" + "".join(f",{i})" for i in range(1, n)) + ";"
    tree = rt.Tree.from_newick(text)
    assert tree.n_leaves == n and tree.depth() == n - 1


@pytest.mark.parametrize(
    ("text", "labels", "message"),
    [
        ("((0,1),2)", None, "end with ';'"),
        ("((0,1),2;", None, "unbalanced"),
        ("((0,1),2));", None, "unexpected"),
        ("((0,1),,2);", None, "empty name"),
        ("((0,1),5);", None, "the rows"),
        ("((0,0),1);", None, "repeated"),
        ("((a,b),c);", ["a", "b"], "3 leaves for 2 labels"),
        ("((0:1,1:1):1,2:1);", None, "not ultrametric"),
        ("((0:x,1:1),2);", None, "branch length"),
        ("((0:-1,1:1),2);", None, ">= 0"),
        ("(0,1);(0,1);", None, "one tree"),
        ("((0,1),'2);", None, "not closed"),
    ],
)
def test_bad_newick_is_named(text, labels, message):
    with pytest.raises(rt.InvalidTreeError, match=message):
        rt.Tree.from_newick(text, labels=labels)


def test_names_with_underscores_or_spaces_are_quoted():
    # Readers differ on an unquoted '_' (a space for DendroPy, kept by Bio.Phylo and ete):
    # quoted, every reader takes the name as written.
    assert "'c_d'" in TREE.to_newick(labels=NAMES) and "'a b'" in TREE.to_newick(labels=NAMES)
    tree = rt.Tree.from_newick("((a_b,c),d);", labels=["a_b", "c", "d"])
    assert leaf_sets(tree) == [(0, 1), (0, 1, 2)]
    spaced = rt.Tree.from_newick("(('a_b',c_d),e);", ["a_b", "c d", "e"], underscore_is_space=True)
    assert leaf_sets(spaced) == [(0, 1), (0, 1, 2)]
