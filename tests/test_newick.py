"""Newick: rosetree's trees written and read back, through Bio.Phylo too, and published trees."""

import io
import re

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


def test_round_trip_through_ete():
    # ete4 is not in the test extra: its sdist compiles for minutes and its only wheel
    # (4.0.0) lacks its compiled parts. `pip install ete4` runs this test.
    ete = pytest.importorskip("ete4", reason="ete4 is not installed (optional: pip install ete4)")
    text = TREE.to_newick(labels=NAMES, lengths=True)
    parsed = ete.Tree(text, parser=1)
    assert sorted(leaf.name for leaf in parsed.leaves()) == sorted(NAMES)
    assert {leaf.name: parsed.get_distance(parsed, leaf) for leaf in parsed.leaves()} == (
        pytest.approx(dict.fromkeys(NAMES, 3.5))
    )
    back = rt.Tree.from_newick(parsed.write(parser=1), labels=NAMES)  # 'c_d' comes back as c_d
    assert leaf_sets(back) == leaf_sets(TREE)
    np.testing.assert_allclose(back.heights, TREE.heights, rtol=1e-15)


def same_nodes(a, b):
    """Each internal node of ``a`` is one of ``b`` with the same leaves and its height."""
    by_leaves = {tuple(b.leaves(v)): b.heights[v] for v in b.internal_nodes}
    assert leaf_sets(a) == leaf_sets(b)
    for v in a.internal_nodes:
        assert a.heights[v] == pytest.approx(by_leaves[tuple(a.leaves(v))], rel=1e-12, abs=1e-15)


def lengths_of(text):
    """The branch lengths of a Newick text, in order."""
    return [float(x) for x in re.findall(r":([^,();]+)", text)]


@pytest.mark.parametrize(
    ("likelihood", "inference"),
    [("brownian", "greedy-rate1"), ("brownian", "smc-priorpost"), ("multinomial", "greedy-rate1")],
)
def test_a_coalescent_tree_reads_back_with_its_log_joint(likelihood, inference):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3)) if likelihood == "brownian" else rng.integers(0, 3, (12, 4))
    est = rt.KingmanCoalescent(likelihood, inference=inference, n_particles=8, random_state=1)
    tree = est.fit(X.astype(float)).tree_
    names = [f"row {i}" for i in range(12)]
    text = tree.to_newick(labels=names, lengths=True)
    # Lengths are the time differences of parent and child, written in full.
    h = tree.heights
    want = sorted(float(h[c] - h[p]) for p in tree.internal_nodes for c in tree.children[p])
    assert sorted(lengths_of(text)) == pytest.approx(want, rel=1e-12, abs=1e-15)
    back = rt.Tree.from_newick(text, labels=names, leaf_time=0)
    assert back.heights.max() == 0.0 and back.heights[back.root] < 0  # t = -distance
    same_nodes(back, tree)
    model = {"likelihood": likelihood, "Lambda": est.Lambda_, "noise": est.noise_}
    log_joint = rt.coalescent_log_joint(X, back, **model)
    assert log_joint == pytest.approx(est.log_joint_, rel=1e-9)
    # Read as distances (the default), the heights are the same times with the sign flipped.
    np.testing.assert_array_equal(rt.Tree.from_newick(text, names).heights, -back.heights)


@pytest.mark.parametrize(("alpha", "beta"), [(0.5, 0.2), (0.0, 0.0)])
def test_a_diffusion_tree_reads_back_with_its_log_joint(alpha, beta):
    X, _ = rt.sample_pydt(n=15, d=2, alpha=0.5, beta=0.2, random_state=0)
    est = rt.PitmanYorDiffusionTree(
        alpha, beta, inference="mcmc", n_iter=30, summary="best", random_state=0
    )
    tree = est.fit(X).tree_
    if alpha > 0:
        assert max(len(c) for c in tree.children) > 2  # a multi-way branch point
    text = tree.to_newick(lengths=True)
    h = tree.heights
    want = sorted(float(h[c] - h[p]) for p in tree.internal_nodes for c in tree.children[p])
    assert sorted(lengths_of(text)) == pytest.approx(want, rel=1e-12, abs=1e-15)
    back = rt.Tree.from_newick(text, leaf_time=1)
    assert back.heights.min() > 0 and back.heights[0] == 1.0  # t = 1 - distance
    same_nodes(back, tree)

    def log_joint(t):
        return rt.pydt_log_prior(t, est.alpha_, est.beta_, est.c_) + rt.pydt_log_likelihood(
            (X - est.center_) / est.scale_, t, est.sigma2_
        )

    assert log_joint(back) == pytest.approx(est.log_joint_, rel=1e-9)


def test_a_published_tree_in_other_units_takes_a_time_scale():
    # Lengths in (say) millions of years; the root 5 from the leaves.
    text = "((a:2,b:2):3,c:5);"
    names = ["a", "b", "c"]
    nested = {"t": 0.5, "children": [{"t": 0.8, "children": [0, 1]}, 2]}
    pydt = rt.Tree.from_newick(text, names, leaf_time=1, time_scale=10)  # the origin 10 away
    assert pydt.heights.tolist() == pytest.approx([1, 1, 1, 0.8, 0.5])
    assert rt.pydt_log_prior(pydt) == pytest.approx(rt.pydt_log_prior(nested), rel=1e-12)
    X = np.array([[0.1], [0.3], [-1.0]])
    assert rt.pydt_log_likelihood(X, pydt) == pytest.approx(
        rt.pydt_log_likelihood(X, nested), rel=1e-12
    )
    coalescent = rt.Tree.from_newick(text, names, leaf_time=0, time_scale=2.5)
    assert coalescent.heights.tolist() == [0, 0, 0, -0.8, -2.0]
    timed = {"t": -2.0, "children": [{"t": -0.8, "children": [0, 1]}, 2]}
    assert rt.coalescent_log_joint(X, coalescent) == rt.coalescent_log_joint(X, timed)
    # Without a scale the root would be at t = 1 - 5 < 0: the diffusion tree refuses it.
    with pytest.raises(rt.InvalidTreeError):
        rt.pydt_log_prior(rt.Tree.from_newick(text, names, leaf_time=1))


def test_lengths_written_with_few_digits_read_with_a_tolerance():
    X = np.random.default_rng(0).normal(size=(10, 2))
    est = rt.KingmanCoalescent().fit(X)
    text = est.tree_.to_newick(lengths=True)
    rounded = re.sub(r":([^,();]+)", lambda m: f":{float(m.group(1)):.5g}", text)
    with pytest.raises(rt.InvalidTreeError, match="ultrametric_rtol"):
        rt.Tree.from_newick(rounded, leaf_time=0)
    back = rt.Tree.from_newick(rounded, leaf_time=0, ultrametric_rtol=1e-4)
    assert back.heights[: back.n_leaves].tolist() == [0.0] * 10
    assert leaf_sets(back) == leaf_sets(est.tree_)
    model = {"Lambda": est.Lambda_, "noise": est.noise_}
    assert rt.coalescent_log_joint(X, back, **model) == pytest.approx(est.log_joint_, rel=1e-3)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"leaf_time": "0"}, rt.InvalidParameterError, "leaf_time must be a number"),
        ({"leaf_time": float("nan")}, rt.InvalidParameterError, "leaf_time must be finite"),
        ({"time_scale": 0}, rt.InvalidParameterError, "time_scale must be finite > 0"),
        ({"ultrametric_rtol": -1}, rt.InvalidParameterError, "ultrametric_rtol"),
        ({"leaf_time": 0, "lengths": False}, rt.InvalidTreeError, "lengths=True"),
    ],
)
def test_bad_times_are_named(kwargs, error, message):
    with pytest.raises(error, match=message):
        rt.Tree.from_newick("((0:1,1:1):1,2:2);", **kwargs)
    assert rt.Tree.from_newick("0;", leaf_time=1).heights.tolist() == [1.0]
