"""The coalescent's defaults: observation noise, the columns' variances as Lambda, and flat
clusters by Bayesian model comparison."""

import numpy as np
import pytest
import rosetree as rt
from scipy.stats import multivariate_normal


def _lca_times(tree):
    """Time of the lowest common ancestor of every pair of leaves (a leaf's own: 0)."""
    n = tree.n_leaves
    h = np.asarray(tree.heights)
    out = np.zeros((n, n))
    for v in tree.internal_nodes:
        kids = [tree.leaves(c) for c in tree.children[v]]
        for a in kids[0]:
            for b in kids[1]:
                out[a, b] = out[b, a] = h[v]
    return out


def _dense_log_likelihood(X, tree, lam, s0, noise):
    """ln p(x | tree) as one Gaussian per feature: the root's value ~ N(0, s0 λ), Brownian
    motion down to the leaves (covariance λ times the shared time below the root), and the
    noise ε λ on each row."""
    h = np.asarray(tree.heights)
    t_root = h[tree.root]
    shared = _lca_times(tree) - t_root
    np.fill_diagonal(shared, -t_root)
    cov = s0 + shared + noise * np.eye(len(X))
    return sum(
        multivariate_normal(np.zeros(len(X)), rate * cov).logpdf(X[:, f])
        for f, rate in enumerate(lam)
    )


@pytest.mark.parametrize("seed", range(3))
def test_noisy_leaves_match_the_dense_gaussian(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(7, 2))
    tree = rt.KingmanCoalescent(noise=0.0, Lambda=1.0).fit(X).tree_
    lam, s0 = np.array([0.7, 1.9]), 1.5
    # The prior term is the same at every noise level: differences are the likelihood's.
    joint = {e: rt.coalescent_log_joint(X, tree, Lambda=lam, root=s0, noise=e) for e in (0, 0.3, 2)}
    dense = {e: _dense_log_likelihood(X, tree, lam, s0, e) for e in (0, 0.3, 2)}
    for e in (0.3, 2):
        assert joint[e] - joint[0] == pytest.approx(dense[e] - dense[0], rel=1e-10, abs=1e-9)


def test_the_noisy_predictive_density_integrates_to_one():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(6, 1))
    est = rt.KingmanCoalescent().fit(X)
    grid = np.linspace(-25, 25, 20001)[:, None]
    density = np.exp(est.score_samples(grid))
    assert np.trapezoid(density, grid[:, 0]) == pytest.approx(1.0, abs=1e-4)


def test_equal_rows_fit_under_every_inference():
    X = np.repeat(np.random.default_rng(5).normal(size=(6, 3)), 2, axis=0)
    for inference in ("greedy-rate1", "greedy-maxprob", "smc-priorpost", "smc-postpost"):
        est = rt.KingmanCoalescent(inference=inference, n_particles=6, random_state=0).fit(X)
        assert np.isfinite(est.log_joint_), inference
        assert np.isfinite(est.score_samples(X[:4])).all(), inference
        # The reported value is the log joint of the returned tree under the same model.
        value = rt.coalescent_log_joint(X, est.tree_, Lambda=est.Lambda_, noise=est.noise)
        assert value == pytest.approx(est.log_joint_, rel=1e-9), inference


def test_learning_lambda_with_noise_never_lowers_the_objective():
    X = np.random.default_rng(6).normal(size=(30, 2)) * [1.0, 5.0]
    est = rt.KingmanCoalescent(learn_hyperparameters=True).fit(X)
    trace = est.hyper_trace_
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[:-1]))


def test_the_default_does_not_depend_on_the_scale():
    rng = np.random.default_rng(7)
    X = np.vstack([rng.normal(0, 1, (15, 3)), rng.normal(4, 1, (15, 3))]) * [1.0, 2.0, 0.5]
    scaled = X * 250.0 + [7.0, -2.0, 1e4]
    a, b = rt.KingmanCoalescent().fit(X), rt.KingmanCoalescent().fit(scaled)
    assert a.tree_.to_nested() == b.tree_.to_nested()
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert b.Lambda_ == pytest.approx(a.Lambda_ * 250.0**2, rel=1e-9)
    assert a.Lambda_ == pytest.approx(np.mean(np.var(X, axis=0)), rel=1e-12)


def test_columns_on_very_different_scales_are_warned_about():
    X = np.random.default_rng(8).normal(size=(20, 3)) * [1.0, 1.0, 1e3]
    with pytest.warns(rt.DataScaleWarning, match="Standardize the columns") as seen:
        rt.KingmanCoalescent().fit(X)
    assert seen[0].filename == __file__
    rt.KingmanCoalescent(Lambda=[1.0, 1.0, 1e6]).fit(X)  # a given Lambda: no warning


def test_default_flat_clusters_find_separated_groups():
    rng = np.random.default_rng(8)
    truth = np.repeat([0, 1, 2], 20)
    centres = np.array([[0.0, 0.0], [8.0, 0.0], [0.0, 8.0]])
    X = centres[truth] + rng.normal(size=(60, 2))
    est = rt.KingmanCoalescent().fit(X)
    # Numbered by first row, as the truth is.
    np.testing.assert_array_equal(est.labels_, truth)
    # The paper's rule on the same tree splits much further.
    llr = rt.KingmanCoalescent(flat_clusters="llr").fit(X)
    assert llr.n_clusters_ > 3


def test_dp_labels_are_the_rose_tree_cut_of_the_coalescent_tree():
    X = np.random.default_rng(9).normal(size=(25, 3))
    est = rt.KingmanCoalescent().fit(X)
    rose = rt.evaluate_tree(X, est.tree_, model=rt.NormalGamma(), mixing="dp", dp_alpha=1.0)
    np.testing.assert_array_equal(est.labels_, rose.cut(0.5))


def test_categorical_flat_clusters_use_one_hot_columns():
    X = np.array([[0, 1], [0, 1], [0, 1], [2, 0], [2, 0], [2, np.nan]], dtype=float)
    est = rt.KingmanCoalescent("multinomial").fit(X)
    np.testing.assert_array_equal(est.labels_, [0, 0, 0, 1, 1, 1])


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"noise": -1.0}, "noise"),
        ({"noise": np.inf}, "noise"),
        ({"noise": "lots"}, "noise"),
        ({"noise": True}, "noise"),
        ({"flat_clusters": "cut"}, "flat_clusters"),
        ({"Lambda": "automatic"}, "Lambda"),
    ],
)
def test_bad_new_parameters_are_named(kwargs, name):
    with pytest.raises(rt.InvalidParameterError) as err:
        rt.KingmanCoalescent(**kwargs).fit(np.random.default_rng(0).normal(size=(5, 2)))
    assert err.value.parameter == name
