"""Flat clusters (cut, MAP partition, at most k), the linkage heights, and prediction of
the flat cluster of new rows, against SciPy and independent computations."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import rosetree as rt
from scipy import special
from scipy.cluster import hierarchy
from test_predict import bernoulli_log_f, niw_predictive_1d

ROOT = Path(__file__).resolve().parents[1]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_flat", ROOT / "benchmarks/bench_flat.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def trees():
    """Fitted trees with multi-way nodes (BRT), binary ones (BHC) and Gaussian data."""
    toy = rt.datasets.load_toy().data
    X, _ = load_bench().blobs(300, seed=3)
    return [
        rt.BayesianRoseTree().fit(toy).tree_,
        rt.BayesianRoseTree(mixing="gamma", binary=True).fit(toy).tree_,
        rt.BayesianRoseTree(rt.NormalInverseWishart()).fit(X).tree_,
        rt.BayesianRoseTree(rt.NormalInverseWishart(), binary=True).fit(X[:120]).tree_,
    ]


def same_partition(a, b):
    """Whether two labellings group the rows the same way (labels may differ)."""
    a, b = np.asarray(a), np.asarray(b)
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(np.unique(a)) == len(np.unique(b))


def descent(tree, threshold):
    """Heller & Ghahramani's cut by walking down from the root, in Python."""
    clusters, stack = [], [tree.root]
    while stack:
        v = stack.pop()
        if v < tree.n_leaves or tree.log_r[v] >= np.log(threshold):
            clusters.append(v)
        else:
            stack.extend(tree.children[v])
    return sorted(clusters)


def test_heights_are_monotone_and_zero_at_leaves(trees):
    for tree in trees:
        h = tree.heights
        assert np.all(h[: tree.n_leaves] == 0.0)
        child = np.arange(tree.n_nodes - 1)
        assert np.all(h[tree.parent[child]] >= h[child])
        # h_v is -max ln r over the root-to-v path, walked here node by node.
        for v in range(0, tree.n_nodes, 7):
            path, a = [], v
            while a >= 0:
                path.append(tree.log_r[a])
                a = tree.parent[a]
            assert h[v] == -max(path)


def test_linkage_is_valid_and_fcluster_reproduces_the_cut(trees):
    for tree in trees:
        Z = tree.to_linkage()
        assert Z.shape == (tree.n_leaves - 1, 4)
        assert hierarchy.is_valid_linkage(Z)
        assert hierarchy.is_monotonic(Z)
        thresholds = [1e-300, 1e-12, 1e-3, 0.1, 0.5, 0.9, 0.999]
        # At the node values (those of very unlikely nodes underflow to 0: no threshold).
        thresholds += [t for t in np.exp(tree.log_r[tree.n_leaves :: 5]) if t > 0]
        for t in thresholds:
            cut = tree.cut(t)
            assert tree.cut_nodes(t) == descent(tree, t)
            flat = hierarchy.fcluster(Z, -np.log(t), criterion="distance")
            assert same_partition(flat, cut), t
        dendro = hierarchy.dendrogram(Z, no_plot=True)
        assert sorted(dendro["leaves"]) == list(range(tree.n_leaves))


def test_max_clusters_matches_scipy_maxclust_and_gives_k_where_possible(trees):
    for tree in trees:
        Z = tree.to_linkage()
        # Every cluster count some cut of the heights can give.
        possible = {len(tree.clusters_at_height(t)) for t in np.unique(tree.heights)}
        for k in range(1, min(tree.n_leaves, 60)):
            labels = tree.max_clusters(k)
            got = len(np.unique(labels))
            assert got <= k
            assert got == max(c for c in possible | {1} if c <= k)
            assert same_partition(labels, hierarchy.fcluster(Z, k, criterion="maxclust"))
        assert len(np.unique(tree.max_clusters(tree.n_leaves))) == tree.n_leaves
    with pytest.raises(rt.InvalidParameterError, match="n_clusters"):
        trees[0].max_clusters(0)


def test_map_partition_is_the_most_probable_partition():
    X = rt.datasets.load_toy().data[::4]
    model = rt.BetaBernoulli(alpha=1.0, beta=1.0)
    tree = rt.BayesianRoseTree(model, binary=True).fit(X).tree_
    # Posterior of a partition: m(phi | T) prod f(D_c), enumerated, f from eq 1.19 directly.
    best = max(
        (w + sum(bernoulli_log_f(X[c], 1.0, 1.0) for c in clusters), clusters)
        for clusters, w in tree.partitions()
    )
    labels = tree.map_partition()
    assert same_partition(labels, tree.labels_of(tree.map_nodes()))
    groups = sorted(sorted(np.flatnonzero(labels == k).tolist()) for k in np.unique(labels))
    assert groups == sorted(best[1])


def test_labels_of_rejects_nodes_that_do_not_partition_the_rows(trees):
    tree = trees[0]
    with pytest.raises(rt.InvalidParameterError, match="clusters"):
        tree.labels_of([tree.root, 0])
    with pytest.raises(rt.InvalidParameterError, match="clusters"):
        tree.labels_of([0])
    with pytest.raises(rt.InvalidParameterError, match="nodes"):
        tree.labels_of([-1])
    with pytest.raises(rt.InvalidParameterError, match="threshold"):
        tree.cut(1.5)


def test_estimator_rules_and_their_parameters():
    X = rt.datasets.load_toy().data
    est = rt.BayesianRoseTree().fit(X)
    tree = est.tree_
    np.testing.assert_array_equal(est.labels_, tree.remix("dp", dp_alpha=1.0).cut(0.5))
    np.testing.assert_array_equal(
        rt.BayesianRoseTree(flat_clusters="cut").fit(X).labels_, tree.cut(0.5)
    )
    np.testing.assert_array_equal(
        rt.BayesianRoseTree(flat_clusters="map").fit(X).labels_, tree.map_partition()
    )
    np.testing.assert_array_equal(
        rt.BayesianRoseTree(cut_threshold=0.99, dp_alpha=3.0).fit(X).labels_,
        tree.remix("dp", dp_alpha=3.0).cut(0.99),
    )
    three = rt.BayesianRoseTree(flat_clusters="map", n_clusters=3).fit(X)
    np.testing.assert_array_equal(three.labels_, tree.max_clusters(3))
    # cluster_nodes_[k] holds exactly the rows labelled k.
    for e in (est, three):
        for k, v in enumerate(e.cluster_nodes_):
            assert tree.leaves(v) == np.flatnonzero(e.labels_ == k).tolist()
    for name, value in [
        ("flat_clusters", "top"),
        ("n_clusters", 0),
        ("n_clusters", 2.5),
        ("cut_threshold", 2.0),
        ("cut_threshold", "half"),
    ]:
        with pytest.raises(rt.InvalidParameterError, match=name):
            rt.BayesianRoseTree(**{name: value}).fit(X)


def flat_reference(est, X_train, X_new, log_f):
    """p(c | x) ∝ n_c f(D_c ∪ {x}) / f(D_c), cluster by cluster in Python."""
    terms = np.empty((len(X_new), len(est.cluster_nodes_)))
    for k, v in enumerate(est.cluster_nodes_):
        cluster = X_train[est.tree_.leaves(v)]
        for r, x in enumerate(X_new):
            terms[r, k] = np.log(len(cluster)) + log_f(np.vstack([cluster, x])) - log_f(cluster)
    return np.exp(terms - special.logsumexp(terms, axis=1, keepdims=True))


def test_predict_proba_is_the_cluster_posterior_for_binary_data():
    X = rt.datasets.load_toy().data
    a = np.linspace(0.5, 2.0, X.shape[1])
    est = rt.BayesianRoseTree(rt.BetaBernoulli(alpha=a, beta=0.8), flat_clusters="map").fit(X)
    new = np.array([[1] * 4 + [0] * 8, [0] * 8 + [1] * 4, [1, np.nan] + [0] * 10], dtype=float)
    got = est.predict_proba(new)
    assert got.shape == (3, len(np.unique(est.labels_)))
    expected = flat_reference(est, X, new, lambda rows: bernoulli_log_f(rows, a, 0.8))
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(est.predict(new), np.argmax(expected, axis=1))


def test_n_clusters_splits_a_multiway_node_into_exactly_that_many():
    X = rt.datasets.load_toy().data
    a = np.linspace(0.5, 2.0, X.shape[1])
    model = rt.BetaBernoulli(alpha=a, beta=0.8)
    tree = rt.BayesianRoseTree(model).fit(X).tree_
    # The toy tree's three classes are nodes with 15-16 children each: no cut of its heights
    # gives 4 or 5 clusters.
    assert tree.max_clusters(5).max() + 1 == 3
    for k in (4, 5):
        est = rt.BayesianRoseTree(model, n_clusters=k).fit(X)
        assert est.labels_.max() + 1 == k
        np.testing.assert_array_equal(est.labels_, tree.max_clusters(k, split_multiway=True))
        unions = [m for m in est.cluster_members_ if len(m) > 1]
        assert len(unions) == 1  # the rest of one class's children, together
        siblings = set(unions[0].tolist())
        assert any(siblings <= set(children) for children in tree.children)
        for c, (v, members) in enumerate(
            zip(est.cluster_nodes_, est.cluster_members_, strict=True)
        ):
            rows = sorted(leaf for m in members for leaf in tree.leaves(int(m)))
            assert rows == np.flatnonzero(est.labels_ == c).tolist()
            assert v == (members[0] if len(members) == 1 else -1)
        # A union's column is the sum of its subtrees' n_v f(x | D_v) terms.
        new = np.array([[1] * 4 + [0] * 8, [0] * 8 + [1] * 4, [1, np.nan] + [0] * 10], float)
        nodes = [int(v) for m in est.cluster_members_ for v in m]
        terms = np.array(
            [
                [
                    np.log(len(tree.leaves(v)))
                    + bernoulli_log_f(np.vstack([X[tree.leaves(v)], x]), a, 0.8)
                    - bernoulli_log_f(X[tree.leaves(v)], a, 0.8)
                    for v in nodes
                ]
                for x in new
            ]
        )
        by_node = np.exp(terms - special.logsumexp(terms, axis=1, keepdims=True))
        owner = np.repeat(np.arange(k), [len(m) for m in est.cluster_members_])
        expected = np.stack([by_node[:, owner == c].sum(axis=1) for c in range(k)], axis=1)
        np.testing.assert_allclose(est.predict_proba(new), expected, rtol=1e-9, atol=1e-15)
        np.testing.assert_array_equal(est.predict(new), np.argmax(expected, axis=1))


def test_predict_proba_with_gaussian_clusters_is_a_student_t_mixture():
    X = np.array([[-2.1], [-1.8], [-2.4], [-2.0], [3.1], [3.3], [2.7], [3.0]])
    prior = dict(mu0=0.0, kappa0=0.5, nu0=3.0, psi0=1.0)
    model = rt.NormalInverseWishart(mu0=[0.0], kappa0=0.5, nu0=3.0, psi0=[[1.0]])
    est = rt.BayesianRoseTree(model, n_clusters=2).fit(X)
    assert len(est.cluster_nodes_) == 2
    xs = np.array([-3.0, -1.0, 0.4, 2.0, 5.0])
    terms = np.array(
        [
            [
                np.log(len(c)) + niw_predictive_1d(c, x, **prior)
                for c in (X[est.tree_.leaves(v), 0] for v in est.cluster_nodes_)
            ]
            for x in xs
        ]
    )
    expected = np.exp(terms - special.logsumexp(terms, axis=1, keepdims=True))
    np.testing.assert_allclose(est.predict_proba(xs[:, None]), expected, rtol=1e-9)


def test_predict_reproduces_the_labels_of_separated_training_rows():
    X, _ = load_bench().blobs(300, seed=1)
    est = rt.BayesianRoseTree(rt.NormalInverseWishart()).fit(X)
    assert np.mean(est.predict(X) == est.labels_) > 0.95
    assert len(np.unique(est.predict(X))) == len(est.cluster_nodes_)


def test_node_posterior_keeps_its_own_name():
    est = rt.BayesianRoseTree().fit(rt.datasets.load_toy().data)
    new = np.zeros((2, 12))
    assert est.predict_node_proba(new).shape == (2, est.tree_.n_nodes)


def test_adjusted_rand_index_of_the_benchmark():
    ari = load_bench().adjusted_rand_index
    # Hand computation: pairs within the table's cells 1, rows 2, columns 1, C(4,2) = 6;
    # expected 2 * 1 / 6 = 1/3, max (2 + 1) / 2, so ARI = (1 - 1/3) / (3/2 - 1/3) = 4/7.
    assert ari([0, 0, 1, 1], [0, 0, 1, 2]) == pytest.approx(4 / 7, rel=1e-15)
    assert ari([0, 0, 1, 1], [5, 5, 3, 3]) == 1.0
    assert ari([0, 0, 0, 0], [0, 0, 0, 0]) == 1.0
    # Chance level: every pair structure is independent of the other.
    assert ari([0, 0, 1, 1], [0, 1, 0, 1]) == pytest.approx(-0.5)


@pytest.mark.parametrize("indent", [None, 1, 2])
def test_json_is_written_as_json_dumps_writes_it(trees, indent):
    names = [f"row é{i}" if i % 3 else i for i in range(trees[0].n_leaves)]
    for tree, labels in [(trees[0], names), (trees[1], None)]:
        expected = json.dumps(tree.to_dict(labels), indent=indent, default=str)
        assert tree.to_json(labels, indent=indent) == expected


def test_format_shortens_deep_indentation(trees):
    tree = trees[1]  # binary, a few levels deep
    full = tree.format().splitlines()
    short = tree.format(max_indent=2).splitlines()
    assert len(short) == len(full)
    for a, b in zip(full, short, strict=True):
        if not b.startswith("«+"):
            assert a == b
        else:
            hidden = int(b[2 : b.index("»")])
            # The hidden levels are 4 characters each; the rest of the line is unchanged.
            assert a[4 * hidden :] == b[b.index("»") + 2 :]
    with pytest.raises(rt.InvalidParameterError, match="max_indent"):
        tree.format(max_indent=0)


def test_command_line_flat_cluster_options(tmp_path, capsys):
    from rosetree.cli import main

    data = tmp_path / "d.csv"
    rows = ["a,b,c", "1,1,0", "1,1,0", "0,0,1", "0,1,1"]
    data.write_text("\n".join(rows) + "\n")
    assert main(["fit", str(data), "--n-clusters", "1"]) == 0
    assert "flat clusters     1 (at most 1" in capsys.readouterr().out
    assert main(["fit", str(data), "--flat", "map"]) == 0
    assert "most probable tree-consistent partition" in capsys.readouterr().out
    assert main(["fit", str(data), "--cut-threshold", "2"]) == 2
    assert "cut_threshold" in capsys.readouterr().err


@pytest.mark.parametrize(("mixing", "binary"), [("brt", False), ("gamma", True), ("dp", False)])
def test_remix_is_the_tree_evaluated_under_another_rule(mixing, binary):
    X = rt.datasets.load_toy().data
    model = rt.BetaBernoulli(alpha=0.7, beta=1.3)
    tree = rt.BayesianRoseTree(model, mixing=mixing, binary=binary).fit(X).tree_
    for other, kwargs in [("dp", {"dp_alpha": 2.5}), ("brt", {"gamma": 0.3}), ("gamma", {})]:
        remixed = tree.remix(other, **kwargs)
        direct = rt.evaluate_tree(X, tree, model=model, mixing=other, **kwargs)
        assert remixed.children == tree.children
        np.testing.assert_array_equal(remixed.log_f, tree.log_f)
        np.testing.assert_allclose(remixed.log_p, direct.log_p, rtol=1e-12)
        np.testing.assert_allclose(remixed.log_pi, direct.log_pi, rtol=1e-12, atol=1e-300)
    with pytest.raises(rt.InvalidParameterError, match="mixing"):
        tree.remix("uniform")


@pytest.mark.parametrize("n", [150, 1000, 2500])
def test_default_flat_clusters_do_not_split_separated_blobs_as_n_grows(n):
    rng = np.random.default_rng(n)
    y = np.arange(n) % 5
    X = 12.0 * np.eye(5, 8)[y] + rng.standard_normal((n, 8))
    est = rt.BayesianRoseTree(rt.NormalInverseWishart()).fit(X)
    assert len(np.unique(est.labels_)) == 5
    # The same tree's own cut under the "brt" rule keeps splitting the blobs as n grows.
    if n >= 1000:
        assert len(np.unique(est.tree_.cut())) > 5
    # Each cluster is one blob.
    for k in range(5):
        assert len(np.unique(y[est.labels_ == k])) == 1


# Three groups of three rows and one outlier (row 9) under a root with four children.
FOUR_WAY = rt.Tree(
    10, [[0, 1, 2], [3, 4, 5], [6, 7, 8], [10, 11, 12, 9]], [0.0] * 10 + [1.0, 1.0, 1.0, 5.0]
)


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        (1, [0] * 10),
        (2, [0, 0, 0, 1, 1, 1, 1, 1, 1, 1]),
        (3, [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]),
        (4, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]),
        # The root's four children, then node 12 (tied height, larger id) split in two:
        # row 6 alone, rows 7 and 8 together.
        (5, [0, 0, 0, 1, 1, 1, 2, 3, 3, 4]),
        (10, list(range(10))),
        (11, list(range(10))),
    ],
)
def test_split_multiway_gives_exactly_k_clusters(k, expected):
    # Worked by hand from the documented rule (largest children alone, the rest together).
    np.testing.assert_array_equal(FOUR_WAY.max_clusters(k, split_multiway=True), expected)


def test_split_multiway_refines_the_lowest_cut():
    for k in range(1, 11):
        lowest = FOUR_WAY.max_clusters(k)
        split = FOUR_WAY.max_clusters(k, split_multiway=True)
        assert len(np.unique(split)) == k
        # Every cluster of the split lies within one cluster of the lowest cut.
        assert all(len(np.unique(lowest[split == c])) == 1 for c in range(k))
    # Without the option, the root's four children leave no cut with 2 or 3 clusters.
    assert len(np.unique(FOUR_WAY.max_clusters(3))) == 1


# The coalescent's and the diffusion tree's flat clusters: their rows as the cluster model
# reads them (the coalescent: standardized columns; the diffusion tree: its scaled rows).
FAMILIES = {
    "coalescent": (
        lambda: rt.KingmanCoalescent(),
        lambda est, X: (X - X.mean(axis=0)) / X.std(axis=0),
    ),
    "diffusion-tree": (
        lambda: rt.PitmanYorDiffusionTree(random_state=0),
        lambda est, X: (X - est.center_) / est.scale_,
    ),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_flat_clusters_model_is_chosen_by_the_structure_it_finds_in_the_tree(family):
    from sklearn.metrics import adjusted_rand_score

    make, rows = FAMILIES[family]
    rng = np.random.default_rng(21)
    y = np.repeat([0, 1, 2], 40)
    centres = np.array([[0, 0, 0, 0], [4, -4, 4, -4], [-4, -4, 4, 4]], dtype=float)
    # Clusters stretched along a direction shared by every column: correlated columns,
    # which a diagonal model explains as more clusters (7 on the coalescent's tree, 6 on
    # the diffusion tree's).
    factor = rng.normal(scale=3.0, size=120)[:, None] * np.full(4, 0.5)
    stretched = centres[y] + factor + 0.3 * rng.normal(size=(120, 4))
    est = make().fit(stretched)
    assert isinstance(est.cluster_model_, rt.NormalInverseWishart)
    record = est.cluster_model_selection_
    assert record["chosen"] == "NormalInverseWishart" and record["rule"] == "structure"
    scores = {type(c["model"]).__name__: c["score"] for c in record["candidates"]}
    assert scores["NormalInverseWishart"] > scores["NormalGamma"]
    assert adjusted_rand_score(y, est.labels_) == 1.0
    # The flat clusters and predictions are those of the chosen model, computed here anew.
    data = rows(est, stretched)
    nested = est.tree_.to_nested()
    chosen = rt.evaluate_tree(data, nested, model=rt.NormalInverseWishart(), mixing="dp")
    np.testing.assert_array_equal(est.labels_, chosen.cut(0.5))
    diagonal = rt.evaluate_tree(data, nested, model=rt.NormalGamma(), mixing="dp").cut(0.5)
    assert diagonal.max() + 1 > est.n_clusters_ == 3
    if family == "coalescent":
        assert est.cluster_tree_.log_evidence == pytest.approx(chosen.log_evidence, rel=1e-12)
        np.testing.assert_allclose(est.cluster_tree_.log_f, chosen.log_f, rtol=1e-10)
    np.testing.assert_array_equal(est.predict(stretched), est.labels_)
    # Rows added later are cut under the model the fit chose.
    grown = make().fit(stretched[::2]).partial_fit(stretched[1::2])
    assert isinstance(grown.cluster_model_, rt.NormalInverseWishart)
    assert grown.cluster_model_selection_["chosen"] == "NormalInverseWishart"
    # Round clusters: the diagonal model shows more structure, and is kept.
    round_ = centres[y] + rng.normal(size=(120, 4))
    est = make().fit(round_)
    assert isinstance(est.cluster_model_, rt.NormalGamma)
    assert adjusted_rand_score(y, est.labels_) == 1.0
