"""KingmanCoalescent.partial_fit: rows added to a fitted coalescent tree, checked against
independent computations (the log joint in the covariance form of Brownian motion with
Kingman's prior written out, the old tree's clusters and times kept)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import rosetree as rt
from hypothesis import given, settings
from hypothesis import strategies as st
from rosetree.exceptions import InvalidDataError, InvalidParameterError


def blobs(n: int, k: int, d: int, seed: int, scale: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs with unit variance, means ``N(0, scale²)`` per coordinate."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=scale, size=(k, d))
    y = rng.integers(k, size=n)
    return means[y] + rng.normal(size=(n, d)), y


def leaf_sets(tree: rt.Tree) -> dict[int, frozenset[int]]:
    return {v: frozenset(tree.leaves(v)) for v in tree.internal_nodes}


def assert_valid_coalescent_tree(tree: rt.Tree, n: int) -> None:
    """Binary, leaves 0..n-1 at time 0, internal times <= 0, parents no later than children."""
    assert tree.n_leaves == n
    assert tree.leaves() == list(range(n))
    h = np.asarray(tree.heights)
    assert (h[:n] == 0).all()
    for v in tree.internal_nodes:
        kids = tree.children[v]
        assert len(kids) == 2
        assert all(c < v for c in kids)
        assert all(h[v] <= h[c] for c in kids)
        assert np.isfinite(h[v]) and h[v] <= 0
    assert tree.sizes[tree.root] == n


def assert_old_tree_kept(old: rt.Tree, new: rt.Tree) -> None:
    """Every node of ``old`` is a node of ``new`` with the same time and the same old rows."""
    n0 = old.n_leaves
    old_h, new_h = np.asarray(old.heights), np.asarray(new.heights)
    restricted = {}
    for v in new.internal_nodes:
        rows = frozenset(i for i in new.leaves(v) if i < n0)
        restricted.setdefault(rows, []).append(new_h[v])
    for v, rows in leaf_sets(old).items():
        assert any(t == old_h[v] for t in restricted.get(rows, [])), f"old node {v} is gone"


def covariance_log_joint(
    X: np.ndarray, tree: rt.Tree, lam: float, s0: float, noise: float
) -> float:
    """ln p(x, tree) written out: each column is N(0, lam (s0 + C + noise I)) with C the
    path lengths that two leaves share below the root node, and Kingman's prior is minus
    the time each pair of lineages coexists."""
    n = tree.n_leaves
    h = np.asarray(tree.heights)
    root = tree.root
    ancestors = []
    for i in range(n):
        path, v = [i], i
        while tree.parent[v] >= 0:
            v = int(tree.parent[v])
            path.append(v)
        ancestors.append(path)
    C = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            lca = next(v for v in ancestors[i] if v in ancestors[j])
            C[i, j] = h[lca] - h[root]
    cov = lam * (s0 + C + noise * np.eye(n))
    _, logdet = np.linalg.slogdet(cov)
    quad = np.einsum("ik,ik->", X, np.linalg.solve(cov, X))
    ll = -0.5 * (X.shape[1] * (n * np.log(2 * np.pi) + logdet) + quad)
    spans = [(h[int(tree.parent[v])], h[v]) for v in range(tree.n_nodes) if tree.parent[v] >= 0]
    coexist = sum(
        max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
        for k, a in enumerate(spans)
        for b in spans[k + 1 :]
    )
    return float(ll - coexist)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("defaults", [False, True])
def test_streaming_separated_clusters_gives_purity_one(seed, defaults):
    X, y = blobs(80, 4, 5, seed)
    order = np.random.default_rng(seed + 100).permutation(len(X))
    X, y = X[order], y[order]
    # Lambda="auto" takes the column variances of the first call: give it 20 rows.
    first = 20 if defaults else 2
    est = rt.KingmanCoalescent(Lambda="auto" if defaults else 100.0).partial_fit(X[:first])
    for i in range(first, len(X)):
        est.partial_fit(X[i : i + 1])
    assert_valid_coalescent_tree(est.tree_, len(X))
    assert rt.metrics.dendrogram_purity(est.tree_, y) == 1.0


@pytest.mark.parametrize(("rule", "repair"), [("density", True), ("mass", False)])
def test_other_placements_give_purity_one_and_the_same_tree_again(rule, repair):
    X, y = blobs(80, 4, 5, 1)
    order = np.random.default_rng(101).permutation(len(X))
    X, y = X[order], y[order]
    trees = []
    for _ in range(2):
        est = rt.KingmanCoalescent(Lambda=100.0).fit(X[:2])
        est._join_rule, est._repair = rule, repair
        for lo in range(2, len(X), 7):
            est.partial_fit(X[lo : lo + 7])
        assert_valid_coalescent_tree(est.tree_, len(X))
        assert rt.metrics.dendrogram_purity(est.tree_, y) == 1.0
        assert est.log_joint_ == pytest.approx(
            rt.coalescent_log_joint(X, est.tree_, Lambda=100.0, noise=est.noise_), rel=1e-12
        )
        trees.append(est.tree_)
    np.testing.assert_array_equal(trees[0].parent, trees[1].parent)
    np.testing.assert_array_equal(trees[0].heights, trees[1].heights)


def test_rows_joining_at_one_time_grow_a_balanced_subtree_of_the_same_log_joint():
    """Copies of a row within the noise join at t = 0, one after another: anywhere in the
    block of that time is as good (same ln p); balanced (the default) they grow a subtree
    of ⌈log₂ 61⌉ = 6 levels, stacked (``_balance = False``) a chain of 60."""
    X, _ = blobs(20, 2, 3, 17)
    copies = X[0] + 1e-3 * np.random.default_rng(18).normal(size=(60, 3))
    X_all = np.vstack([X, copies])
    depth_before = rt.KingmanCoalescent(Lambda=1.0).fit(X).tree_.depth()
    runs = {}
    for balance in (True, False):
        est = rt.KingmanCoalescent(Lambda=1.0).fit(X)
        est._balance = balance
        est.partial_fit(copies[:25]).partial_fit(copies[25:])
        assert_valid_coalescent_tree(est.tree_, 80)
        assert est.log_joint_ == pytest.approx(
            rt.coalescent_log_joint(X_all, est.tree_, Lambda=1.0, noise=est.noise_), rel=1e-12
        )
        h = np.asarray(est.tree_.heights)
        assert (h[[int(est.tree_.parent[i]) for i in range(20, 80)]] == 0).all()
        runs[balance] = est
    assert runs[True].log_joint_ == pytest.approx(runs[False].log_joint_, rel=1e-12)
    assert runs[False].tree_.depth() >= 60
    assert runs[True].tree_.depth() <= depth_before + 6


@pytest.mark.parametrize("likelihood", ["brownian", "multinomial"])
@pytest.mark.parametrize("moves", [("_retime",), ("_rotate",), ("_retime", "_rotate")])
def test_moves_on_the_path_keep_the_invariants(likelihood, moves):
    """With ``_retime`` the nodes on each new row's path move to better times, with
    ``_rotate`` the best rotation at each is made: the tree stays a valid coalescent tree,
    its ln p is that of the tree over all rows (written out in covariance form for
    Brownian motion), and on these rows it is above the tree grown without the moves.
    Re-timing alone keeps the old tree's clusters (not their times)."""
    if likelihood == "brownian":
        X, _ = blobs(40, 3, 3, 19, scale=3.0)
    else:
        X = np.random.default_rng(19).integers(3, size=(40, 5)).astype(float)
    options = {"likelihood": likelihood, "Lambda": 1.5}
    if likelihood == "brownian":
        options["root"] = 2.0
    runs = {}
    for on in (False, True):
        est = rt.KingmanCoalescent(**options).fit(X[:15])
        old = leaf_sets(est.tree_)
        for move in moves:
            setattr(est, move, on)
        est.partial_fit(X[15:28]).partial_fit(X[28:])
        assert_valid_coalescent_tree(est.tree_, 40)
        if moves == ("_retime",):
            grown = {frozenset(i for i in s if i < 15) for s in leaf_sets(est.tree_).values()}
            assert set(old.values()) <= grown
        kwargs = {**options, "noise": est.noise_}
        assert est.log_joint_ == pytest.approx(rt.coalescent_log_joint(X, est.tree_, **kwargs))
        if likelihood == "brownian":
            expected = covariance_log_joint(X, est.tree_, 1.5, 2.0, est.noise_)
            assert est.log_joint_ == pytest.approx(expected, rel=1e-9)
        runs[on] = est.log_joint_
    assert runs[True] > runs[False]


def test_streaming_categories_gives_purity_one():
    rng = np.random.default_rng(4)
    protos = rng.integers(4, size=(3, 24))
    y = rng.integers(3, size=60)
    X = np.where(rng.random((60, 24)) < 0.1, rng.integers(4, size=(60, 24)), protos[y])
    est = rt.KingmanCoalescent(likelihood="multinomial").fit(X[:10].astype(float))
    for i in range(10, 60):
        est.partial_fit(X[i : i + 1].astype(float))
    assert rt.metrics.dendrogram_purity(est.tree_, y) == 1.0
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X, est.tree_, likelihood="multinomial", Lambda=est.Lambda_),
        rel=1e-12,
    )


@pytest.mark.parametrize(("s0", "noise"), [(1.0, 0.1), (0.5, 0.0), (3.0, 0.4)])
def test_log_joint_is_that_of_the_tree_over_all_rows(s0, noise):
    X, _ = blobs(30, 3, 3, 5, scale=3.0)
    est = rt.KingmanCoalescent(Lambda=2.0, root=s0, noise=noise).fit(X[:12])
    est.partial_fit(X[12:20]).partial_fit(X[20:])
    expected = covariance_log_joint(X, est.tree_, 2.0, s0, noise)
    assert est.log_joint_ == pytest.approx(expected, rel=1e-9)
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X, est.tree_, Lambda=2.0, root=s0, noise=noise), rel=1e-12
    )
    # split_llr_ is that of the grown tree, as a fit on the same tree would compute it.
    model = rt._core.CoalescentModel(X, **est._model_options)
    evidence = model.subtree_evidence(X, est.tree_._structure)
    for v in est.tree_.internal_nodes:
        kids = est.tree_.children[v]
        assert est.split_llr_[v] == pytest.approx(
            sum(evidence[c] for c in kids) - evidence[v], rel=1e-12, abs=1e-9
        )


def test_flat_root_log_joint_and_the_old_tree():
    X, _ = blobs(50, 3, 4, 6)
    est = rt.KingmanCoalescent().fit(X[:30])
    old = est.tree_
    est.partial_fit(X[30:])
    assert_valid_coalescent_tree(est.tree_, 50)
    assert_old_tree_kept(old, est.tree_)
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X, est.tree_, Lambda=est.Lambda_, noise=est.noise_), rel=1e-12
    )


@settings(max_examples=25, deadline=None)
@given(
    data=st.data(),
    n0=st.integers(2, 10),
    likelihood=st.sampled_from(["brownian", "multinomial"]),
)
def test_random_insertion_sequences_keep_the_invariants(data, n0, likelihood):
    n = data.draw(st.integers(n0 + 1, 24))
    seed = data.draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    if likelihood == "brownian":
        X = rng.normal(size=(n, 3)) + 4.0 * rng.integers(3, size=(n, 1))
    else:
        X = rng.integers(3, size=(n, 5)).astype(float)
    order = np.asarray(data.draw(st.permutations(range(n))))
    cuts = sorted(data.draw(st.lists(st.integers(n0, n), max_size=3)))
    X = X[order]
    est = rt.KingmanCoalescent(likelihood=likelihood, Lambda=1.0).fit(X[:n0])
    for lo, hi in zip([n0, *cuts], [*cuts, n], strict=True):
        if hi > lo:
            old = est.tree_
            est.partial_fit(X[lo:hi])
            assert_valid_coalescent_tree(est.tree_, hi)
            assert_old_tree_kept(old, est.tree_)
    assert est.labels_.shape == (n,)
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X, est.tree_, likelihood=likelihood, Lambda=1.0, noise=est.noise_),
        rel=1e-10,
    )


def test_order_changes_the_tree_but_not_the_invariants():
    X, _ = blobs(30, 3, 2, 9, scale=2.0)
    shapes = set()
    for seed in range(4):
        order = np.random.default_rng(seed).permutation(30)
        est = rt.KingmanCoalescent(Lambda=1.0).fit(X[order[:5]])
        est.partial_fit(X[order[5:]])
        assert_valid_coalescent_tree(est.tree_, 30)
        shapes.add(
            frozenset(frozenset(int(order[i]) for i in s) for s in leaf_sets(est.tree_).values())
        )
    assert len(shapes) > 1


def test_fit_then_partial_fit_is_deterministic_and_unfitted_is_fit():
    X, _ = blobs(60, 3, 4, 11)
    runs = []
    for _ in range(2):
        est = rt.KingmanCoalescent(random_state=5).fit(X[:30])
        est.partial_fit(X[30:45]).partial_fit(X[45:])
        runs.append((est.tree_.to_nested(), est.log_joint_, est.labels_.tolist()))
    assert runs[0] == runs[1]
    a = rt.KingmanCoalescent().partial_fit(X[:20])
    b = rt.KingmanCoalescent().fit(X[:20])
    assert a.tree_.to_nested() == b.tree_.to_nested()
    assert a.log_joint_ == b.log_joint_


def test_labels_prediction_and_pickling_follow_the_grown_tree():
    X, y = blobs(90, 3, 6, 12)
    est = rt.KingmanCoalescent().fit(X[:40])
    est.partial_fit(X[40:])
    assert est.labels_.shape == (90,)
    assert est.n_clusters_ == 3
    # The flat clusters are the blobs.
    same = est.labels_[:, None] == est.labels_[None, :]
    np.testing.assert_array_equal(same, y[:, None] == y[None, :])
    # cluster_nodes_ are nodes of cluster_tree_, the grown tree evaluated as a rose tree.
    assert est.cluster_tree_.n_leaves == 90
    for k, v in enumerate(est.cluster_nodes_):
        assert set(np.flatnonzero(est.labels_ == k)) == set(est.cluster_tree_.leaves(v))
    new, _ = blobs(10, 3, 6, 12)
    assert est.attach_proba(new).shape == (10, est.tree_.n_nodes)
    np.testing.assert_allclose(est.predict_proba(new).sum(axis=1), 1.0)
    copy = pickle.loads(pickle.dumps(est))
    assert copy.tree_.to_nested() == est.tree_.to_nested()
    np.testing.assert_array_equal(copy.labels_, est.labels_)
    np.testing.assert_allclose(copy.score_samples(new), est.score_samples(new), rtol=1e-12)
    more, _ = blobs(15, 3, 6, 13)
    est.partial_fit(more)
    copy.partial_fit(more)
    assert copy.tree_.to_nested() == est.tree_.to_nested()
    assert copy.log_joint_ == est.log_joint_


def test_hyperparameters_stay_those_of_the_first_fit():
    X, _ = blobs(40, 2, 3, 14)
    est = rt.KingmanCoalescent(learn_hyperparameters=True, hyper_iter=3).fit(X[:25])
    lam, trace = est.Lambda_, est.hyper_trace_
    est.partial_fit(X[25:] * 3.0)
    assert est.Lambda_ == lam
    assert est.hyper_trace_ is trace
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(
            np.vstack([X[:25], X[25:] * 3.0]), est.tree_, Lambda=lam, noise=est.noise_
        ),
        rel=1e-12,
    )


def test_missing_entries_in_new_rows():
    X, y = blobs(40, 2, 3, 15)
    est = rt.KingmanCoalescent(Lambda=50.0).fit(X[:20])
    new = X[20:].copy()
    new[::3, 1] = np.nan
    est.partial_fit(new)
    X_all = np.vstack([X[:20], new])
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X_all, est.tree_, Lambda=50.0, noise=est.noise_), rel=1e-12
    )
    assert rt.metrics.dendrogram_purity(est.tree_, y) == 1.0


class TestRefusals:
    @pytest.fixture
    def fitted(self):
        X, _ = blobs(20, 2, 3, 0)
        return rt.KingmanCoalescent().fit(X)

    def test_smc(self):
        X, _ = blobs(12, 2, 2, 1)
        est = rt.KingmanCoalescent(inference="smc-priorprior", n_particles=4).fit(X)
        with pytest.raises(InvalidParameterError, match="SMC particles") as info:
            est.partial_fit(X[:2])
        assert info.value.parameter == "inference"

    def test_wrong_number_of_columns(self, fitted):
        with pytest.raises(InvalidDataError, match="X has 2 features"):
            fitted.partial_fit(np.zeros((2, 2)))
        assert fitted.tree_.n_leaves == 20

    def test_infinite_value(self, fitted):
        new = np.zeros((2, 3))
        new[1, 2] = np.inf
        with pytest.raises(InvalidDataError, match="row 1, column 2"):
            fitted.partial_fit(new)
        assert fitted.tree_.n_leaves == 20 and fitted._X.shape == (20, 3)

    def test_not_a_category(self):
        X = np.random.default_rng(0).integers(3, size=(10, 4)).astype(float)
        est = rt.KingmanCoalescent(likelihood="multinomial").fit(X)
        new = X[:3].copy()
        new[2, 1] = 1.5
        with pytest.raises(InvalidDataError, match="row 2, column 1") as info:
            est.partial_fit(new)
        assert (info.value.row, info.value.column) == (2, 1)
        assert est.tree_.n_leaves == 10

    def test_missing_with_full_lambda(self):
        X, _ = blobs(10, 2, 2, 3)
        est = rt.KingmanCoalescent(Lambda=np.eye(2)).fit(X)
        new = X[:1].copy()
        new[0, 0] = np.nan
        with pytest.raises(InvalidParameterError):
            est.partial_fit(new)
        assert est.tree_.n_leaves == 10


@pytest.mark.parametrize(
    "options",
    [
        {"inference": "greedy-maxprob"},
        {"approximate": True, "exact_below": 20, "approx_sample": 15},
    ],
)
def test_other_greedy_fits_grow_too(options):
    X, _ = blobs(60, 3, 6, 16)
    est = rt.KingmanCoalescent(random_state=0, **options).fit(X[:40])
    old = est.tree_
    est.partial_fit(X[40:])
    assert_valid_coalescent_tree(est.tree_, 60)
    assert_old_tree_kept(old, est.tree_)
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X, est.tree_, Lambda=est.Lambda_, noise=est.noise_), rel=1e-12
    )
