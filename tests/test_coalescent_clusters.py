"""Flat clusters of a coalescent tree by the log-likelihood-ratio rule (Teh et al. §5): the
split ratios against SciPy's multivariate normal on each subtree, and the cut itself."""

from __future__ import annotations

import numpy as np
import pytest
import rosetree as rt
from scipy import stats


def subtree_log_evidence(X, tree, v, s0, lam):
    """ln p(x_v) of the rows below node v with the root N(0, s0*lam) on v: the leaves are
    jointly normal with covariance lam * (s0 + time from v down to their common ancestor)."""
    rows = tree.leaves(v)
    h = tree.heights
    parent = tree.parent

    def ancestors(leaf):
        out = [leaf]
        while out[-1] != v:
            out.append(int(parent[out[-1]]))
        return out

    paths = {i: ancestors(i) for i in rows}
    c = np.empty((len(rows), len(rows)))
    for a, i in enumerate(rows):
        for b, j in enumerate(rows):
            lca = next(u for u in paths[i] if u in set(paths[j]))
            c[a, b] = s0 + h[lca] - h[v]
    return sum(
        stats.multivariate_normal(np.zeros(len(rows)), lam * c).logpdf(X[rows, k])
        for k in range(X.shape[1])
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_split_llr_is_the_ratio_of_subtree_evidences(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(9, 2)) + np.repeat([[0.0, 0.0], [3.0, 0.0], [0.0, 3.0]], 3, axis=0)
    s0, lam = 2.5, 0.7
    est = rt.KingmanCoalescent(noise=0.0, flat_clusters="llr", Lambda=lam, root=s0).fit(X)
    tree = est.tree_
    evidence = {v: subtree_log_evidence(X, tree, v, s0, lam) for v in range(tree.n_nodes)}
    for v in tree.internal_nodes:
        left, right = tree.children[v]
        expected = evidence[left] + evidence[right] - evidence[v]
        assert est.split_llr_[v] == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert np.all(est.split_llr_[: tree.n_leaves] == -np.inf)
    # At the root the evidence is the likelihood part of ln p(x, pi).
    assert evidence[tree.root] == pytest.approx(est.log_joint_ - log_kingman_prior(tree), rel=1e-10)


def log_kingman_prior(tree):
    """ln p(pi) of eq 2: waiting times exponential with rate C(m, 2), m lineages alive."""
    times = np.sort(tree.heights[tree.n_leaves :])[::-1]
    m = np.arange(tree.n_leaves, 1, -1)
    waits = -np.diff(np.concatenate([[0.0], times]))
    return float(-(m * (m - 1) / 2 * waits).sum())


def test_multinomial_split_llr_is_minus_the_merge_log_z():
    # Two leaves merging at time t: Z = sum_y q(y) P_t(y -> a) P_t(y -> b) / (q(a) q(b)),
    # with P_t(y -> x) = e^{-lam t} [y = x] + (1 - e^{-lam t}) q(x) (messages normalised so
    # that q . M = 1, so a leaf's message is [y = x] / q(x)).
    X = np.array([[0.0], [0.0], [1.0], [1.0], [1.0], [0.0]])
    est = rt.KingmanCoalescent(
        noise=0.0, flat_clusters="llr", likelihood="multinomial", Lambda=0.8
    ).fit(X)
    tree = est.tree_
    q = np.array([4.0, 4.0]) / 8.0  # observed frequencies, smoothed by one count per state
    checked = 0
    for v in tree.internal_nodes:
        a, b = tree.children[v]
        if a < tree.n_leaves and b < tree.n_leaves:
            t = -tree.heights[v]
            e = np.exp(-0.8 * t)
            xa, xb = int(X[a, 0]), int(X[b, 0])
            move = e * np.eye(2) + (1 - e) * q[None, :]  # move[y, x] = P_t(y -> x)
            z = sum(q[y] * move[y, xa] * move[y, xb] for y in range(2)) / (q[xa] * q[xb])
            assert est.split_llr_[v] == pytest.approx(-np.log(z), rel=1e-12)
            checked += 1
    assert checked >= 2


def test_labels_recover_separated_clusters_and_follow_the_threshold():
    rng = np.random.default_rng(3)
    centres = rng.integers(0, 3, size=(3, 30))
    X = np.vstack(
        [np.where(rng.random((10, 30)) < 0.9, c, rng.integers(0, 3, 30)) for c in centres]
    )
    truth = np.repeat([0, 1, 2], 10)
    est = rt.KingmanCoalescent(
        noise=0.0, flat_clusters="llr", likelihood="multinomial", Lambda=0.5
    ).fit(X.astype(float))
    assert est.n_clusters_ == 3
    assert np.array_equal(est.labels_, truth)
    # More clusters as the threshold falls; every leaf alone below the smallest ratio.
    counts = [len(set(est.cluster_labels(t))) for t in (np.inf, 50.0, 0.0, -5.0, -np.inf)]
    assert counts == sorted(counts) and counts[0] == 1 and counts[-1] == 30
    assert np.array_equal(est.cluster_labels(np.inf), np.zeros(30, dtype=int))
    strict = rt.KingmanCoalescent(
        flat_clusters="llr", noise=0.0, likelihood="multinomial", Lambda=0.5, llr_threshold=np.inf
    )
    assert strict.fit(X.astype(float)).n_clusters_ == 1


def test_labels_are_numbered_by_first_row():
    X = np.array([[5.0], [0.0], [5.1], [0.1]])
    est = rt.KingmanCoalescent(
        noise=0.0, flat_clusters="llr", Lambda=1.0, root=10.0, llr_threshold=-np.inf
    ).fit(X)
    assert list(est.labels_) == [0, 1, 2, 3]
    labels = est.cluster_labels(0.0)
    assert labels[0] == 0 and labels[0] == labels[2] and labels[1] == labels[3] == 1


@pytest.mark.parametrize("bad", [np.nan, "0", None, True, [0.0]])
def test_bad_thresholds_are_rejected(bad):
    X = np.random.default_rng(0).normal(size=(5, 2))
    est = rt.KingmanCoalescent(noise=0.0, flat_clusters="llr").fit(X)
    if bad is None:  # None means the estimator's own threshold
        assert np.array_equal(est.cluster_labels(None), est.labels_)
        return
    with pytest.raises(rt.InvalidParameterError, match="llr_threshold"):
        est.cluster_labels(bad)
    with pytest.raises(rt.InvalidParameterError, match="llr_threshold"):
        rt.KingmanCoalescent(noise=0.0, flat_clusters="llr", llr_threshold=bad).fit(X)


def test_cluster_labels_needs_a_fit():
    with pytest.raises(rt.NotFittedError):
        rt.KingmanCoalescent(noise=0.0, flat_clusters="llr").cluster_labels()


def test_estimator_protocol_and_fit_predict():
    est = rt.KingmanCoalescent(noise=0.0, flat_clusters="llr", Lambda=2.0, llr_threshold=1.5)
    params = est.get_params()
    assert params["Lambda"] == 2.0 and params["llr_threshold"] == 1.5
    copy = type(est)(**params)
    assert copy.get_params() == params
    assert est.set_params(inference="smc-priorpost") is est and est.inference == "smc-priorpost"
    with pytest.raises(rt.InvalidParameterError, match="no parameter"):
        est.set_params(lam=1.0)
    X = np.random.default_rng(2).normal(size=(8, 2))
    labels = rt.KingmanCoalescent(noise=0.0, flat_clusters="llr").fit_predict(X)
    assert np.array_equal(
        labels, rt.KingmanCoalescent(noise=0.0, flat_clusters="llr").fit(X).labels_
    )
    assert repr(copy).startswith("KingmanCoalescent(likelihood='auto', Lambda=2.0")
