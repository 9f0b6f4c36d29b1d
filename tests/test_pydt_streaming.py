"""PitmanYorDiffusionTree.partial_fit: rows added to a fitted diffusion tree, checked against
independent computations (the log joint from the closed-form prior and the covariance form of
Brownian motion, the law of one new row's position by quadrature over its join time)."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
import rosetree as rt
from hypothesis import given, settings
from hypothesis import strategies as st
from rosetree.exceptions import InvalidDataError, InvalidParameterError
from scipy import integrate


def blobs(n: int, k: int, d: int, seed: int, scale: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs with unit variance, means ``N(0, scale²)`` per coordinate, standardized."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=scale, size=(k, d))
    y = rng.integers(k, size=n)
    X = means[y] + rng.normal(size=(n, d))
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def covariance_log_likelihood(X: np.ndarray, tree: rt.Tree, sigma2: float) -> float:
    """Each column N(0, sigma2 C): C_ij the divergence time of the LCA of i and j, C_ii = 1."""
    n = tree.n_leaves
    h = np.asarray(tree.heights)
    ancestors = []
    for i in range(n):
        path, v = [i], i
        while tree.parent[v] >= 0:
            v = int(tree.parent[v])
            path.append(v)
        ancestors.append(path)
    C = np.array(
        [
            [h[next(v for v in ancestors[i] if v in ancestors[j])] for j in range(n)]
            for i in range(n)
        ]
    )
    cov = sigma2 * C
    _, logdet = np.linalg.slogdet(cov)
    quad = np.einsum("ik,ik->", X, np.linalg.solve(cov, X))
    return float(-0.5 * (X.shape[1] * (n * np.log(2 * np.pi) + logdet) + quad))


def assert_valid_diffusion_tree(tree: rt.Tree, n: int) -> None:
    """Leaves 0..n-1 at 1, branch points in (0, 1), each parent strictly before its children."""
    assert tree.n_leaves == n
    assert sorted(tree.leaves()) == list(range(n))
    h = np.asarray(tree.heights)
    assert (h[:n] == 1.0).all()
    for v in tree.internal_nodes:
        assert 0.0 < h[v] < 1.0
        kids = tree.children[v]
        assert len(kids) >= 2
        assert all(h[v] < h[c] for c in kids)
    assert tree.sizes[tree.root] == n


def assert_log_joint(est: rt.PitmanYorDiffusionTree, X: np.ndarray) -> None:
    """``log_joint_`` against the prior plus the likelihood in covariance form, of the rows
    as the model sees them (scaled as the first fit's ``center_`` and ``scale_`` say)."""
    X = (X - est.center_) / est.scale_
    tree = est.tree_
    prior = rt.pydt_log_prior(tree, alpha=est.alpha_, beta=est.beta_, c=est.c_)
    lik = covariance_log_likelihood(X, tree, est.sigma2_)
    assert est.log_joint_ == pytest.approx(prior + lik, rel=1e-9, abs=1e-8)
    assert lik == pytest.approx(rt.pydt_log_likelihood(X, tree, est.sigma2_), rel=1e-9)


def newick(est: rt.PitmanYorDiffusionTree) -> str:
    return est.tree_.to_newick()


def separated(n: int, k: int, seed: int, gap: float = 25.0) -> tuple[np.ndarray, np.ndarray]:
    """``k`` unit-variance blobs in ``k`` dimensions, ``gap`` apart on the axes, standardized."""
    rng = np.random.default_rng(seed)
    y = rng.integers(k, size=n)
    X = gap * np.eye(k)[y] + rng.normal(size=(n, k))
    return (X - X.mean(axis=0)) / X.std(axis=0), y


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streaming_separated_clusters_one_row_at_a_time_gives_purity_one(seed: int) -> None:
    X, y = separated(70, 3, seed)
    est = rt.PitmanYorDiffusionTree(n_iter=50, random_state=seed).fit(X[:10])
    for i in range(10, len(X)):
        est.partial_fit(X[i : i + 1])
    assert est.tree_.n_leaves == len(X)
    assert rt.metrics.dendrogram_purity(est.tree_, y) == 1.0
    assert_log_joint(est, X)


def test_log_joint_labels_and_predictions_follow_every_call() -> None:
    X, _ = blobs(30, 2, 3, seed=1)
    est = rt.PitmanYorDiffusionTree(n_iter=10, random_state=3).fit(X[:12])
    seen = 12
    for size in (1, 5, 2, 10):
        est.partial_fit(X[seen : seen + size])
        seen += size
        assert_valid_diffusion_tree(est.tree_, seen)
        assert_log_joint(est, X[:seen])
        assert est.samples_ == [est.tree_]
        assert est.sample_log_joint_.tolist() == [est.log_joint_]
        assert est.sample_hyperparameters_.tolist() == [
            [est.alpha_, est.beta_, est.c_, est.sigma2_]
        ]
        assert est.labels_.shape == (seen,)
        assert est.n_clusters_ == len(np.unique(est.labels_))
        assert len(est.trace_["log_joint"]) == est.partial_fit_sweeps
        assert est.trace_["log_joint"][-1] == pytest.approx(est.log_joint_)
        assert 0.0 <= est.acceptance_rate_ <= 1.0
        proba = est.predict_proba(X[:4])
        assert proba.shape == (4, est.n_clusters_)
        np.testing.assert_allclose(proba.sum(axis=1), 1.0)
        assert np.isfinite(est.score_samples(X[:4])).all()
    again = pickle.loads(pickle.dumps(est))
    assert newick(again) == newick(est)
    np.testing.assert_array_equal(again.score_samples(X[:5]), est.score_samples(X[:5]))
    np.testing.assert_array_equal(again.predict_proba(X[:5]), est.predict_proba(X[:5]))
    # The pickled estimator goes on exactly as the original.
    more = X[:3] + 0.1
    assert newick(again.partial_fit(more)) == newick(est.partial_fit(more))


def test_same_calls_same_tree_and_other_seeds_differ() -> None:
    X, _ = blobs(25, 2, 2, seed=2)

    def run(seed: int) -> rt.PitmanYorDiffusionTree:
        est = rt.PitmanYorDiffusionTree(n_iter=6, random_state=seed).fit(X[:10])
        for i in range(10, 25, 5):
            est.partial_fit(X[i : i + 5])
        return est

    a, b, c = run(5), run(5), run(6)
    assert newick(a) == newick(b)
    assert a.log_joint_ == b.log_joint_
    np.testing.assert_array_equal(a.tree_.heights, b.tree_.heights)
    assert newick(a) != newick(c)


def test_an_unfitted_estimator_fits_the_first_batch() -> None:
    X, _ = blobs(15, 2, 2, seed=3)
    a = rt.PitmanYorDiffusionTree(n_iter=5, random_state=1).partial_fit(X)
    b = rt.PitmanYorDiffusionTree(n_iter=5, random_state=1).fit(X)
    assert newick(a) == newick(b)
    assert a.log_joint_ == b.log_joint_
    with pytest.raises(InvalidDataError):
        rt.PitmanYorDiffusionTree().partial_fit(X[:1])


def test_no_sweeps_attaches_only_and_keeps_the_hyperparameters() -> None:
    X, _ = blobs(20, 2, 2, seed=5)
    est = rt.PitmanYorDiffusionTree(
        n_iter=6, partial_fit_sweeps=0, summary="best", random_state=0
    ).fit(X[:15])
    hyper = (est.alpha_, est.beta_, est.c_, est.sigma2_)
    before = {
        frozenset(est.tree_.leaves(v)): est.tree_.heights[v] for v in est.tree_.internal_nodes
    }
    est.partial_fit(X[15:])
    assert (est.alpha_, est.beta_, est.c_, est.sigma2_) == hyper
    assert len(est.trace_["log_joint"]) == 0 and est.acceptance_rate_ == 0.0
    # Every old branch point is still there, at its time, over its old rows.
    after: dict[frozenset[int], list[float]] = {}
    for v in est.tree_.internal_nodes:
        rows = frozenset(i for i in est.tree_.leaves(v) if i < 15)
        after.setdefault(rows, []).append(est.tree_.heights[v])
    for rows, t in before.items():
        assert t in after[rows]
    assert_log_joint(est, X)


def test_bad_input_is_named() -> None:
    X, _ = blobs(12, 2, 3, seed=6)
    est = rt.PitmanYorDiffusionTree(n_iter=4, random_state=0).fit(X[:10])
    with pytest.raises(InvalidDataError, match="3 features"):
        est.partial_fit(X[10:, :2])
    bad = X[10:].copy()
    bad[1, 2] = np.nan
    with pytest.raises(InvalidDataError) as info:
        est.partial_fit(bad)
    assert (info.value.row, info.value.column) == (1, 2)
    est.set_params(partial_fit_sweeps=-1)
    with pytest.raises(InvalidParameterError, match="partial_fit_sweeps"):
        est.partial_fit(X[10:])
    # A failed call leaves the fit as it was.
    assert est.tree_.n_leaves == 10
    B = (X > 0).astype(float)
    probit = rt.PitmanYorDiffusionTree(likelihood="probit", n_iter=4, random_state=0).fit(B[:10])
    with pytest.raises(InvalidDataError) as info:
        probit.partial_fit(np.array([[1.0, 0.5, 0.0]]))
    assert (info.value.row, info.value.column) == (0, 1)


def test_probit_rows_are_added_with_the_ep_log_joint() -> None:
    X, _ = blobs(16, 2, 4, seed=7)
    B = (X > 0).astype(float)
    B[3, 1] = np.nan
    est = rt.PitmanYorDiffusionTree(likelihood="probit", n_iter=6, random_state=0).fit(B[:12])
    est.partial_fit(B[12:])
    assert_valid_diffusion_tree(est.tree_, 16)
    _, _, log_marginal = rt._core.pydt_probit_ep(B, est.tree_._structure, sigma2=est.sigma2_)
    prior = rt.pydt_log_prior(est.tree_, alpha=est.alpha_, beta=est.beta_, c=est.c_)
    assert est.log_joint_ == pytest.approx(prior + log_marginal, rel=1e-9)
    assert est.predict_proba(B[:3]).shape[0] == 3


def test_greedy_em_attaches_without_sweeps() -> None:
    X, _ = blobs(14, 2, 2, seed=8)
    est = rt.PitmanYorDiffusionTree(inference="greedy-em", n_iter=3, random_state=0).fit(X[:10])
    trace = est.trace_["objective"].copy()
    hyper = (est.alpha_, est.beta_, est.c_, est.sigma2_)
    est.partial_fit(X[10:])
    assert_valid_diffusion_tree(est.tree_, 14)
    assert (est.alpha_, est.beta_, est.c_, est.sigma2_) == hyper
    np.testing.assert_array_equal(est.trace_["objective"], trace)
    assert est.acceptance_rate_ is None
    assert_log_joint(est, X)


@pytest.mark.filterwarnings("ignore::rosetree.exceptions.DataScaleWarning")
@settings(deadline=None)
@given(
    n=st.integers(4, 12),
    first=st.integers(2, 4),
    cuts=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
    sweeps=st.integers(0, 3),
)
def test_any_insertion_sequence_keeps_a_valid_tree(
    n: int, first: int, cuts: list[int], seed: int, sweeps: int
) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X = X[rng.permutation(n)]
    est = rt.PitmanYorDiffusionTree(n_iter=3, partial_fit_sweeps=sweeps, random_state=seed)
    est.fit(X[:first])
    seen = first
    for size in cuts:
        if seen >= n:
            break
        est.partial_fit(X[seen : seen + size])
        seen = min(n, seen + size)
        assert_valid_diffusion_tree(est.tree_, seen)
        assert_log_joint(est, X[:seen])


def test_one_new_row_joins_where_the_posterior_puts_it() -> None:
    """The law of the new leaf's position on a tree of two rows (no sweeps), against the
    posterior over every position by quadrature of p(X, T') over the join time, from
    ``pydt_log_prior`` and the covariance likelihood of the grown tree."""
    X = np.array([[0.2, -0.4], [1.4, 0.9]])
    row = np.array([[0.35, -0.1]])
    X3 = np.vstack([X, row])
    est = rt.PitmanYorDiffusionTree(
        n_iter=2,
        learn_hyperparameters=False,
        partial_fit_sweeps=0,
        alpha=0.8,
        beta=0.3,
        c=1.4,
        scale=None,
    )
    est.set_params(sigma2=0.5).fit(X)
    t_root = float(est.tree_.heights[est.tree_.root])

    def joint(tree: dict) -> float:
        t = rt.coalescent.tree_from_nested(tree, 3, leaf_time=1.0)
        prior = rt.pydt_log_prior(t, alpha=0.8, beta=0.3, c=1.4)
        return float(np.exp(prior + covariance_log_likelihood(X3, t, 0.5)))

    def on_leaf(leaf: int, s: float) -> float:
        return joint({"t": t_root, "children": [{"t": s, "children": [leaf, 2]}, 1 - leaf]})

    mass = {
        "b0": integrate.quad(lambda s: on_leaf(0, s), t_root, 1.0, limit=200)[0],
        "b1": integrate.quad(lambda s: on_leaf(1, s), t_root, 1.0, limit=200)[0],
        "above": integrate.quad(
            lambda s: joint({"t": s, "children": [{"t": t_root, "children": [0, 1]}, 2]}),
            0.0,
            t_root,
            limit=200,
        )[0],
        "root": joint({"t": t_root, "children": [0, 1, 2]}),
    }
    total = sum(mass.values())
    exact = {k: v / total for k, v in mass.items()}
    draws = 600
    counts = dict.fromkeys(exact, 0)
    for seed in range(draws):
        grown = copy.deepcopy(est).set_params(random_state=seed).partial_fit(row)
        tree = grown.tree_
        parent = int(tree.parent[2])
        kids = [k for k in tree.children[parent] if k != 2]
        if len(kids) == 2:
            counts["root"] += 1
        elif tree.sizes[kids[0]] == 2:
            counts["above"] += 1
        else:
            counts[f"b{kids[0]}"] += 1
    for k, p in exact.items():
        se = np.sqrt(p * (1 - p) / draws)
        assert abs(counts[k] / draws - p) < 4.5 * se + 1e-3, (counts, exact)
