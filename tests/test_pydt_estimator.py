"""The contract of ``rosetree.PitmanYorDiffusionTree``: attributes that mean what they say,
determinism, and a named exception for every bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import rosetree as rt
from sklearn.metrics import adjusted_rand_score

X, _ = rt.sample_pydt(25, 3, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=7)


def _mcmc(**kw: object) -> rt.PitmanYorDiffusionTree:
    args: dict[str, object] = dict(inference="mcmc", n_iter=30, random_state=0)
    args.update(kw)
    return rt.PitmanYorDiffusionTree(**args).fit(X)


def test_mcmc_attributes_are_consistent():
    est = _mcmc(thin=3)
    heights = np.asarray(est.tree_.heights)
    assert est.tree_.n_leaves == 25
    np.testing.assert_array_equal(heights[:25], 1.0)
    assert np.all((heights[25:] > 0) & (heights[25:] < 1))
    # The log joint of tree_ under its own hyperparameters, from the density functions,
    # of the rows as the model sees them: each column centred, all divided by one scale.
    Z = (X - X.mean(axis=0)) / np.sqrt(X.var(axis=0).mean())
    np.testing.assert_allclose(est.center_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(est.scale_, np.sqrt(X.var(axis=0).mean()), rtol=1e-12)
    expected = rt.pydt_log_prior(
        est.tree_, alpha=est.alpha_, beta=est.beta_, c=est.c_
    ) + rt.pydt_log_likelihood(Z, est.tree_, sigma2=est.sigma2_)
    assert est.log_joint_ == pytest.approx(expected, rel=1e-10)
    assert len(est.samples_) == 5  # sweeps 15, 18, ..., 27
    assert est.sample_hyperparameters_.shape == (5, 4)
    best = _mcmc(thin=3, summary="best")
    assert best.log_joint_ == est.sample_log_joint_.max()
    top = int(np.argmax(est.sample_log_joint_))
    assert best.tree_.to_nested() == est.samples_[top].to_nested()
    for tree, (a, b, c, s2), lj in zip(
        est.samples_, est.sample_hyperparameters_, est.sample_log_joint_, strict=True
    ):
        assert rt.pydt_log_prior(tree, alpha=a, beta=b, c=c) + rt.pydt_log_likelihood(
            Z, tree, sigma2=s2
        ) == pytest.approx(lj, rel=1e-10)
    assert set(est.trace_) == {
        "log_joint",
        "log_likelihood",
        "alpha",
        "beta",
        "c",
        "sigma2",
        "acceptance",
    }
    assert all(v.shape == (30,) for v in est.trace_.values())
    assert 0.0 < est.acceptance_rate_ < 1.0
    assert np.all((est.trace_["acceptance"] >= 0) & (est.trace_["acceptance"] <= 1))
    assert est.n_features_in_ == 3


def test_fixed_hyperparameters_stay_fixed():
    est = _mcmc(alpha=0.3, beta=0.1, c=2.0, sigma2=0.5, learn_hyperparameters=False)
    np.testing.assert_array_equal(est.sample_hyperparameters_, [[0.3, 0.1, 2.0, 0.5]] * 15)
    only_c = _mcmc(learn_hyperparameters={"c"})
    hyper = only_c.sample_hyperparameters_
    np.testing.assert_array_equal(hyper[:, [0, 1, 3]], [[0.5, 0.2, 1.0]] * 15)
    assert np.unique(hyper[:, 2]).size > 1


def test_the_dirichlet_diffusion_tree_stays_binary():
    est = _mcmc(alpha=0.0, beta=0.0, n_iter=20)
    np.testing.assert_array_equal(est.sample_hyperparameters_[:, :2], 0.0)
    for tree in est.samples_:
        assert all(len(ch) == 2 for ch in (tree.children[b] for b in tree.internal_nodes))


def test_results_depend_on_the_seed_alone():
    a, b, c = _mcmc(random_state=3), _mcmc(random_state=3), _mcmc(random_state=4)
    assert a.tree_.to_nested() == b.tree_.to_nested()
    np.testing.assert_array_equal(a.trace_["log_joint"], b.trace_["log_joint"])
    assert not np.array_equal(a.trace_["log_joint"], c.trace_["log_joint"])


def test_params_protocol_and_pickle():
    est = rt.PitmanYorDiffusionTree(c=2.0)
    assert est.get_params()["c"] == 2.0
    assert est.set_params(inference="mcmc", n_iter=10).inference == "mcmc"
    fitted = est.fit(X)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_allclose(again.score_samples(X[:4]), fitted.score_samples(X[:4]))


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"likelihood": "poisson"}, "likelihood"),
        ({"inference": "gibbs"}, "inference"),
        ({"alpha": -1.0}, "alpha"),
        ({"beta": 1.0}, "beta"),
        ({"c": 0.0}, "c"),
        ({"sigma2": -1.0}, "sigma2"),
        ({"alpha": "1"}, "alpha"),
        ({"n_iter": 0}, "n_iter"),
        ({"burn_in": 30}, "burn_in"),
        ({"burn_in": -1}, "burn_in"),
        ({"thin": 0}, "thin"),
        ({"learn_hyperparameters": {"gamma"}}, "learn_hyperparameters"),
        ({"learn_hyperparameters": "c"}, "learn_hyperparameters"),
        ({"learn_hyperparameters": np.array(1.0)}, "learn_hyperparameters"),
        ({"learn_hyperparameters": 3}, "learn_hyperparameters"),
        ({"learn_hyperparameters": ["alpha"], "alpha": 0.0}, "alpha"),
        ({"priors": {"c": (1.0, -1.0)}}, "priors"),
        ({"priors": {"delta": (1.0, 1.0)}}, "priors"),
        ({"priors": [1, 1]}, "priors"),
        ({"n_predictive_points": 0}, "n_predictive_points"),
        ({"verbose": 1}, "verbose"),
        ({"random_state": -1}, "random_state"),
        ({"subtree_move": "slice"}, "subtree_move"),
    ],
)
def test_bad_parameters_are_named(kw, name):
    with pytest.raises(rt.InvalidParameterError) as info:
        _mcmc(**kw)
    assert info.value.parameter == name


def test_bad_data_is_named():
    bad = X.copy()
    bad[4, 1] = np.nan
    with pytest.raises(rt.InvalidDataError):
        rt.PitmanYorDiffusionTree(inference="mcmc").fit(bad)
    binary = (X > 0).astype(float)
    binary[2, 0] = 0.5
    with pytest.raises(rt.InvalidDataError) as info:
        rt.PitmanYorDiffusionTree(likelihood="probit", inference="mcmc").fit(binary)
    assert (info.value.row, info.value.column) == (2, 0)
    with pytest.raises(rt.InvalidDataError):
        rt.PitmanYorDiffusionTree(inference="mcmc").fit(X[:1])


def test_prediction_needs_a_fit_and_matching_columns():
    est = rt.PitmanYorDiffusionTree(inference="mcmc", n_iter=10)
    with pytest.raises(rt.NotFittedError):
        est.score_samples(X)
    est.fit(X)
    with pytest.raises(rt.InvalidDataError):
        est.score_samples(X[:, :2])
    with pytest.raises(rt.InvalidDataError):
        est.score_samples(np.full((1, 3), np.inf))


def test_progress_goes_to_python_stderr(capsys):
    rt.PitmanYorDiffusionTree(inference="mcmc", n_iter=10, verbose=True).fit(X)
    err = capsys.readouterr().err
    assert "pydt mcmc: sweep 10/10" in err
    rt.PitmanYorDiffusionTree(inference="mcmc", n_iter=10).fit(X)
    assert capsys.readouterr().err == ""


def test_probit_mcmc_finds_the_insects_of_the_animals_data():
    animals = rt.datasets.load_animals()
    est = rt.PitmanYorDiffusionTree(
        likelihood="probit", inference="mcmc", n_iter=200, random_state=0
    ).fit(animals.data)
    assert est.sigma2_ == 1.0  # fixed under the probit likelihood
    insects = set(np.flatnonzero(animals.target == "insect"))
    tree = est.tree_
    assert any(set(tree.leaves(v)) == insects for v in tree.internal_nodes)
    # log_joint_ is ln p(X, T, t) of the binary rows, with EP for ln p(X | T, t).
    _, _, log_marginal = rt._core.pydt_probit_ep(animals.data, tree._structure)
    prior = rt.pydt_log_prior(tree, alpha=est.alpha_, beta=est.beta_, c=est.c_)
    assert est.log_joint_ == pytest.approx(prior + log_marginal, rel=1e-12)
    with pytest.raises(rt.InvalidParameterError):
        est.score_samples(animals.data)


def test_probit_greedy_em_separates_classes_and_reports_the_ep_log_joint():
    animals = rt.datasets.load_animals()
    rows = np.flatnonzero(np.isin(animals.target, ["insect", "bird", "fish"]))
    X, target = animals.data[rows], animals.target[rows]
    est = rt.PitmanYorDiffusionTree(
        likelihood="probit", inference="greedy-em", n_iter=2, random_state=0
    ).fit(X)
    assert est.sigma2_ == 1.0
    tree = est.tree_
    for cls in ("insect", "bird"):
        members = set(np.flatnonzero(target == cls))
        assert any(set(tree.leaves(v)) == members for v in tree.internal_nodes), cls
    _, _, log_marginal = rt._core.pydt_probit_ep(X, tree._structure)
    prior = rt.pydt_log_prior(tree, alpha=est.alpha_, beta=est.beta_, c=est.c_)
    assert est.log_joint_ == pytest.approx(prior + log_marginal, rel=1e-12)
    assert np.all(np.diff(est.trace_["objective"]) >= 0)
    with pytest.raises(rt.InvalidParameterError) as info:
        rt.PitmanYorDiffusionTree(likelihood="probit", learn_hyperparameters=["sigma2"]).fit(X)
    assert info.value.parameter == "learn_hyperparameters"


def _ln_time_jacobian(tree: rt.Tree) -> float:
    heights = np.asarray(tree.heights)
    t = heights[list(tree.internal_nodes)]
    return float(np.sum(np.log(t) + np.log1p(-t)))


def test_greedy_em_attributes_are_consistent():
    est = rt.PitmanYorDiffusionTree(
        inference="greedy-em", learn_hyperparameters=True, random_state=0
    ).fit(X)
    assert est.inference == "greedy-em" and est.acceptance_rate_ is None
    heights = np.asarray(est.tree_.heights)
    np.testing.assert_array_equal(heights[:25], 1.0)
    assert np.all((heights[25:] > 0) & (heights[25:] < 1))
    assert 1 < len(est.samples_) <= 10
    assert len({str(t.to_nested()) for t in est.samples_}) == len(est.samples_)
    assert est.tree_ is est.samples_[0]
    Z = (X - est.center_) / est.scale_
    for tree, (a, b, c, s2), lj in zip(
        est.samples_, est.sample_hyperparameters_, est.sample_log_joint_, strict=True
    ):
        assert rt.pydt_log_prior(tree, alpha=a, beta=b, c=c) + rt.pydt_log_likelihood(
            Z, tree, sigma2=s2
        ) == pytest.approx(lj, rel=1e-10)
    assert est.log_joint_ == est.sample_log_joint_[0]
    assert set(est.trace_) == {"objective"}
    objective = est.trace_["objective"]
    assert np.all(np.diff(objective) >= 0)
    # The objective of tree_ is its log joint in s = logit t plus the log hyperprior
    # densities of the learnt alpha, beta, c and 1/sigma2 (Gamma(1, 1) or Beta(1, 1) by
    # default: -alpha - c - 1/sigma2). It is the best seen: at least the final state's (a
    # candidate that gained less than the search's tolerance of 1e-6 may beat it).
    best = est.log_joint_ + _ln_time_jacobian(est.tree_)
    best += -est.alpha_ - est.c_ - 1.0 / est.sigma2_
    assert objective[-1] - 1e-9 <= best <= objective[-1] + 1e-5


def test_greedy_em_default_learns_sigma2_alone_and_mcmc_learns_all():
    est = rt.PitmanYorDiffusionTree(
        alpha=0.7, beta=0.3, c=1.5, sigma2=2.0, inference="greedy-em", random_state=0
    ).fit(X)
    hyper = est.sample_hyperparameters_
    np.testing.assert_array_equal(
        hyper[:, :3], np.broadcast_to([0.7, 0.3, 1.5], hyper[:, :3].shape)
    )
    assert np.all(hyper[:, 3] != 2.0)
    # The objective adds the log density of 1/sigma2 alone (Gamma(1, 1): -1/sigma2).
    best = est.log_joint_ + _ln_time_jacobian(est.tree_) - 1.0 / est.sigma2_
    assert est.trace_["objective"][-1] - 1e-9 <= best <= est.trace_["objective"][-1] + 1e-5
    chain = _mcmc(alpha=0.7, beta=0.3, c=1.5, sigma2=2.0)
    for name in ("alpha", "beta", "c", "sigma2"):
        assert np.ptp(chain.trace_[name]) > 0, name


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_greedy_em_default_is_not_much_flatter_than_the_generating_tree(seed):
    # Data from a PYDT with beta = 0.2 (50 points, 10 dimensions): the default tree has at
    # least 55 % of the generating tree's branch points (measured: 21/31, 20/29, 21/28,
    # 19/31). With alpha, beta and c learnt by EM the maximum runs towards beta -> 1 and
    # keeps 16, 12, 13, 12 (52, 41, 46, 39 %): fewer, wider branch points.
    x, truth = rt.sample_pydt(50, 10, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=seed)
    est = rt.PitmanYorDiffusionTree(inference="greedy-em", random_state=0).fit(x)
    n_true, n_fit = len(truth.internal_nodes), len(est.tree_.internal_nodes)
    assert 0.55 * n_true <= n_fit <= n_true
    again = rt.PitmanYorDiffusionTree(inference="greedy-em", random_state=0).fit(x)
    assert again.tree_.to_nested() == est.tree_.to_nested()


def test_greedy_em_beats_the_generating_tree():
    # With the generating hyperparameters fixed, the search's objective for the best tree
    # is at least that of the tree the data were drawn from.
    x, truth = rt.sample_pydt(30, 2, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=3)
    est = rt.PitmanYorDiffusionTree(
        inference="greedy-em", learn_hyperparameters=False, random_state=0
    ).fit(x)
    true_objective = rt.pydt_log_prior(truth, alpha=0.5, beta=0.2, c=1.0)
    true_objective += rt.pydt_log_likelihood(x, truth, sigma2=1.0) + _ln_time_jacobian(truth)
    assert est.trace_["objective"][-1] >= true_objective


def test_greedy_em_keeps_the_dirichlet_diffusion_tree_binary_and_is_deterministic():
    a = rt.PitmanYorDiffusionTree(inference="greedy-em", alpha=0.0, beta=0.0, random_state=2).fit(X)
    np.testing.assert_array_equal(a.sample_hyperparameters_[:, :2], 0.0)
    for tree in a.samples_:
        assert all(len(tree.children[b]) == 2 for b in tree.internal_nodes)
    b = rt.PitmanYorDiffusionTree(inference="greedy-em", alpha=0.0, beta=0.0, random_state=2).fit(X)
    assert a.tree_.to_nested() == b.tree_.to_nested()
    np.testing.assert_array_equal(a.trace_["objective"], b.trace_["objective"])


def test_greedy_em_progress_goes_to_python_stderr(capsys):
    rt.PitmanYorDiffusionTree(inference="greedy-em", n_iter=2, verbose=True).fit(X)
    assert "pydt greedy EM: pass 1/2" in capsys.readouterr().err


@pytest.mark.parametrize("inference", ["greedy-em", "mcmc"])
def test_data_at_the_edge_of_the_floats_is_an_error_not_a_crash(inference):
    X = np.arange(6.0)[:, None] * np.full((6, 2), 1e300)
    with pytest.raises(rt.NumericalError):
        rt.PitmanYorDiffusionTree(inference=inference, n_iter=3, random_state=0).fit(X)


def test_extreme_hyperparameters_end_in_a_numerical_error_not_a_hang_or_panic():
    # c near the largest float: every divergence time rounds onto its branch's top, and
    # the subtree move's exact draw used to retry for ever.
    huge = dict(alpha=0.1, beta=0.1, c=1.7976931348623157e308, inference="mcmc")
    tiny = np.array([[-1e-08], [-3.3e-240]])
    est = rt.PitmanYorDiffusionTree(subtree_move="prior", **huge)
    with pytest.raises(rt.NumericalError, match="double precision"):
        est.fit(tiny)
    # The Gibbs move (the default at two rows) rejects a time that rounds onto its
    # branch's top, and the learnt c leaves the float range's edge after one sweep.
    gibbs = rt.PitmanYorDiffusionTree(**huge).fit(tiny)
    assert np.isfinite(gibbs.log_joint_) and gibbs.c_ < 1e3
    # sigma2 near the largest float: 2 sigma2 overflowed in the probit pseudo-data, and the
    # Ward dendrogram of the initial trees panicked on the NaN distances.
    probit = rt.PitmanYorDiffusionTree(
        alpha=0.0,
        sigma2=1.7976931348623157e308,
        likelihood="probit",
        learn_hyperparameters=False,
        random_state=10,
    )
    with pytest.raises(rt.NumericalError):
        probit.fit(np.zeros((3, 2)))


def test_the_default_mcmc_starts_from_average_linkage():
    from rosetree.pydt import _linkage_start
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import pdist

    rng = np.random.default_rng(11)
    X = np.vstack([rng.normal(-3, 1, (10, 3)), rng.normal(3, 1, (10, 3))])
    start = rt.Tree.__new__(rt.Tree)
    start._set_structure(_linkage_start(X))
    # Average linkage's topology, and times from its heights: 1 - h^2 / (2 d s), each node
    # kept earlier than its children.
    Z = linkage(pdist(X), "average")
    n, s = 20, np.mean(np.var(X, axis=0))
    members = [{i} for i in range(n)]
    expected = np.ones(2 * n - 1)
    for k, (a, b, h, _) in enumerate(Z):
        a, b = int(a), int(b)
        members.append(members[a] | members[b])
        t = min(max(1 - h**2 / (2 * 3 * s), 1e-3), 1 - 1e-6)
        expected[n + k] = min(t, min(expected[a], expected[b]) * (1 - 1e-6))
    got = {frozenset(start.leaves(v)): start.heights[v] for v in start.internal_nodes}
    want = {frozenset(members[n + k]): expected[n + k] for k in range(n - 1)}
    assert set(got) == set(want)
    assert all(got[key] == pytest.approx(want[key], rel=1e-12) for key in want)
    # The default fit is MCMC from that tree, and separates the two groups.
    est = rt.PitmanYorDiffusionTree(random_state=0).fit(X)
    assert est.inference == "mcmc" and est.acceptance_rate_ is not None
    top = est.tree_.children[est.tree_.root]
    assert sorted(sorted(est.tree_.leaves(c)) for c in top) == [
        list(range(10)),
        list(range(10, 20)),
    ]
    prior = rt.PitmanYorDiffusionTree(init="prior", random_state=0).fit(X)
    assert prior.log_joint_ != est.log_joint_
    with pytest.raises(rt.InvalidParameterError, match="init"):
        rt.PitmanYorDiffusionTree(init="ward").fit(X)


def test_the_tree_does_not_depend_on_the_columns_units_or_origins():
    rng = np.random.default_rng(12)
    X = rng.normal(size=(15, 3)) * [1.0, 1.0, 1e3]  # ranges 10^3 apart: other units
    est = rt.PitmanYorDiffusionTree(n_iter=20, random_state=0).fit(X)
    np.testing.assert_allclose(est.center_, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(est.scale_, X.std(axis=0), rtol=1e-12)
    # Each column in other units and from another origin: the same chain and tree.
    factors, shift = np.array([4.0, 1e-3, 50.0]), np.array([100.0, -7.0, 3e4])
    moved = rt.PitmanYorDiffusionTree(n_iter=20, random_state=0).fit(X * factors + shift)
    assert moved.tree_.to_nested() == est.tree_.to_nested()
    np.testing.assert_allclose(moved.tree_.heights, est.tree_.heights, rtol=1e-9)
    assert moved.log_joint_ == pytest.approx(est.log_joint_, rel=1e-9)
    # Densities in the units of X: they change by the Jacobian of the change of units.
    np.testing.assert_allclose(
        moved.score_samples(X[:3] * factors + shift),
        est.score_samples(X[:3]) - np.log(factors).sum(),
        rtol=1e-9,
    )
    np.testing.assert_allclose(
        moved.predict_proba(X[:3] * factors + shift), est.predict_proba(X[:3]), rtol=1e-9
    )


def test_scale_choices():
    rng = np.random.default_rng(14)
    X = rng.normal(size=(12, 3)) * [1.0, 2.0, 5.0] + 10.0  # one unit: a common scale
    auto = rt.PitmanYorDiffusionTree(n_iter=5, random_state=0).fit(X)
    np.testing.assert_allclose(auto.scale_, np.sqrt(X.var(axis=0).mean()), rtol=1e-12)
    columns = rt.PitmanYorDiffusionTree(scale="columns", n_iter=5, random_state=0).fit(X)
    np.testing.assert_allclose(columns.scale_, X.std(axis=0), rtol=1e-12)
    given = rt.PitmanYorDiffusionTree(scale=None, n_iter=5, random_state=0).fit(X)
    np.testing.assert_array_equal(given.center_, 0.0)
    np.testing.assert_array_equal(given.scale_, 1.0)
    assert given.log_joint_ == pytest.approx(
        rt.pydt_log_prior(given.tree_, alpha=given.alpha_, beta=given.beta_, c=given.c_)
        + rt.pydt_log_likelihood(X, given.tree_, sigma2=given.sigma2_),
        rel=1e-10,
    )
    with pytest.raises(rt.InvalidParameterError, match="scale") as info:
        rt.PitmanYorDiffusionTree(scale="robust").fit(X)
    assert info.value.parameter == "scale"


def test_rows_as_given_on_very_different_scales_are_warned_about():
    X = np.random.default_rng(12).normal(size=(15, 3)) * [1.0, 1.0, 1e3]
    with pytest.warns(rt.DataScaleWarning, match="Standardize the columns") as seen:
        rt.PitmanYorDiffusionTree(scale=None, n_iter=5, random_state=0).fit(X)
    assert seen[0].filename == __file__


def test_an_estimator_pickled_before_scale_existed_loads_as_it_was_fitted():
    X = np.random.default_rng(15).normal(size=(10, 2))
    est = rt.PitmanYorDiffusionTree(scale=None, n_iter=5, random_state=0).fit(X)
    state = dict(est.__dict__)
    for name in ("scale", "center_", "scale_", "partial_fit_sweeps"):
        del state[name]
    # The chain's settings as then stored: flags in (alpha, beta, c, sigma2) order and the
    # priors' eight numbers.
    options = dict(state["_chain_options"])
    learned = options["learn"]
    options["learn"] = tuple(n in learned for n in ("alpha", "beta", "c", "sigma2"))
    options["priors"] = [v for pair in options["priors"].values() for v in pair]
    state["_chain_options"] = options
    old = rt.PitmanYorDiffusionTree.__new__(rt.PitmanYorDiffusionTree)
    old.__setstate__(state)
    assert old.scale is None and old.partial_fit_sweeps == 10
    assert old._chain_options["learn"] == learned
    assert old._chain_options["priors"] == est._chain_options["priors"]
    np.testing.assert_array_equal(old.score_samples(X[:3]), est.score_samples(X[:3]))
    old.partial_fit(X[:2] + 0.5)
    assert old.tree_.n_leaves == 12


def test_flat_clusters_are_the_dp_cut_of_the_tree():
    rng = np.random.default_rng(13)
    truth = np.repeat([0, 1, 2], 12)
    centres = np.array([[0.0, 0.0], [9.0, 0.0], [0.0, 9.0]])
    X = centres[truth] + rng.normal(size=(36, 2))
    X = np.column_stack([X, np.ones(36)])  # a constant column says nothing
    est = rt.PitmanYorDiffusionTree(random_state=0).fit(X)
    # The chain may leave a row of a cluster diverging early, as its own cluster.
    assert adjusted_rand_score(truth, est.labels_) > 0.9
    assert est.n_clusters_ == est.labels_.max() + 1 <= 4
    Z = (X - est.center_) / est.scale_
    rose = rt.evaluate_tree(Z[:, :2], est.tree_, model=rt.NormalGamma(), mixing="dp")
    np.testing.assert_array_equal(est.labels_, rose.cut(0.5))


def test_binary_rows_under_the_gaussian_likelihood_keep_the_diagonal_cluster_model():
    # The structure rule took the full covariance on two binary benchmark sets (digits024,
    # spambase), with lower adjusted Rand indices: binary rows are not offered the choice.
    X = rt.datasets.load_toy().data
    est = rt.PitmanYorDiffusionTree(random_state=0, n_iter=20).fit(X)
    assert est.cluster_model_selection_ == {"data": "binary", "chosen": "NormalGamma"}
    Z = (X - est.center_) / est.scale_
    Z = Z[:, np.ptp(Z, axis=0) > 0]
    rose = rt.evaluate_tree(Z, est.tree_, model=rt.NormalGamma(), mixing="dp")
    np.testing.assert_array_equal(est.labels_, rose.cut(0.5))


def test_predict_proba_is_the_normal_gamma_cluster_posterior_of_labels():
    """P(c | x) ∝ n_c Π_j t(x_j | D_c), the Student-t predictives of the Normal-Gamma
    clusters that chose labels_ (prior from the training columns that vary), computed
    here feature by feature; a constant column is left out."""
    from scipy import special, stats

    rng = np.random.default_rng(3)
    centres = np.array([[0.0, 0.0], [5.0, 5.0], [0.0, 6.0]])
    y = np.repeat([0, 1, 2], 8)
    X = np.hstack([centres[y] + rng.normal(scale=0.5, size=(24, 2)), np.full((24, 1), 2.0)])
    est = rt.PitmanYorDiffusionTree(random_state=0).fit(X)
    new = np.array([[0.2, -0.1, 2.0], [4.8, 5.3, 9.0], [0.1, 5.5, 2.0], [2.5, 3.0, 2.0]])
    proba = est.predict_proba(new)
    assert proba.shape == (4, est.n_clusters_)
    Xv = X[:, :2]
    var = Xv.var(axis=0, ddof=1)
    m0, kappa0, a0 = Xv.mean(axis=0), 1.0, 5.0
    b0 = 0.2 * a0 * (var + 1e-6 * var.mean())
    terms = np.empty((4, est.n_clusters_))
    for k in range(est.n_clusters_):
        D = Xv[est.labels_ == k]
        n = len(D)
        kn, an = kappa0 + n, a0 + n / 2
        mean = D.mean(axis=0)
        mun = (kappa0 * m0 + n * mean) / kn
        bn = b0 + ((D - mean) ** 2).sum(axis=0) / 2 + kappa0 * n * (mean - m0) ** 2 / (2 * kn)
        scale = np.sqrt(bn * (kn + 1) / (an * kn))
        terms[:, k] = np.log(n) + stats.t.logpdf(new[:, :2], 2 * an, mun, scale).sum(axis=1)
    expected = np.exp(terms - special.logsumexp(terms, axis=1, keepdims=True))
    np.testing.assert_allclose(proba, expected, rtol=1e-9, atol=1e-300)
    np.testing.assert_array_equal(est.predict(new), np.argmax(expected, axis=1))
    # Training rows mostly go back to their own cluster.
    assert np.mean(est.predict(X) == est.labels_) >= 0.9


def test_predict_with_constant_data_and_after_pickling():
    X = np.full((5, 2), 1.5)
    est = rt.PitmanYorDiffusionTree(random_state=0).fit(X)
    np.testing.assert_array_equal(est.predict_proba(X[:2]), np.ones((2, 1)))
    Y = np.random.default_rng(0).normal(size=(20, 3))
    est = rt.PitmanYorDiffusionTree(random_state=0).fit(Y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict_proba(Y), est.predict_proba(Y))
    with pytest.raises(rt.NotFittedError):
        rt.PitmanYorDiffusionTree().predict(Y)
    with pytest.raises(rt.InvalidDataError):
        est.predict(Y[:, :2])


def test_both_subtree_moves_sample_and_the_gibbs_move_is_accepted_almost_always():
    # Fixed hyperparameters at the generating values: the Gibbs re-attachment move draws
    # from the conditional over every position (acceptance near 1), the prior move proposes
    # from the generative process (accepted far less often); both are deterministic.
    kw = dict(alpha=0.5, beta=0.2, c=1.0, learn_hyperparameters=False, n_iter=40)
    gibbs = _mcmc(**kw)  # "auto": the Gibbs move at 25 rows
    prior = _mcmc(subtree_move="prior", **kw)
    assert gibbs.subtree_move == "auto"
    explicit = _mcmc(subtree_move="gibbs", **kw)
    np.testing.assert_array_equal(explicit.trace_["log_joint"], gibbs.trace_["log_joint"])
    assert gibbs.acceptance_rate_ is not None and prior.acceptance_rate_ is not None
    assert gibbs.acceptance_rate_ > 0.9
    assert prior.acceptance_rate_ < 0.5
    assert gibbs.log_joint_ != prior.log_joint_
    again = _mcmc(**kw)
    np.testing.assert_array_equal(again.trace_["log_joint"], gibbs.trace_["log_joint"])
    # Both chains sit at comparable log joints after the burn-in (the same posterior).
    late_g = gibbs.trace_["log_joint"][20:].mean()
    late_p = prior.trace_["log_joint"][20:].mean()
    assert abs(late_g - late_p) < 15.0


def test_auto_takes_the_prior_move_beyond_250_rows():
    big, _ = rt.sample_pydt(260, 2, alpha=0.5, beta=0.2, c=1.0, sigma2=1.0, random_state=3)
    kw = dict(n_iter=3, learn_hyperparameters=False, random_state=0)
    auto = rt.PitmanYorDiffusionTree(**kw).fit(big)
    prior = rt.PitmanYorDiffusionTree(subtree_move="prior", **kw).fit(big)
    np.testing.assert_array_equal(auto.trace_["log_joint"], prior.trace_["log_joint"])
    assert auto.acceptance_rate_ is not None and auto.acceptance_rate_ < 0.5


def _mutation_log_likelihood(X: np.ndarray, tree: rt.Tree, rate: float) -> float:
    """ln p(X | T, t) under independent-sites mutation, by summing over the states of the
    origin and of every internal node, with the transition matrices expm(δ Q),
    Q = rate (1 qᵀ − I), q the categories' frequencies smoothed by one."""
    from scipy.linalg import expm

    children = tree._structure.children()
    heights = np.asarray(tree.heights)
    n, m = X.shape[0], len(children)
    parent = [-1] * m
    for v, kids in enumerate(children):
        for k in kids:
            parent[k] = v
    total = 0.0
    for j in range(X.shape[1]):
        col = X[:, j]
        k = max(int(np.nanmax(col)) + 1, 2)
        counts = np.array([np.sum(col == s) for s in range(k)], dtype=float)
        q = (counts + 1.0) / (counts.sum() + k)
        gen = rate * (np.outer(np.ones(k), q) - np.eye(k))
        trans = [
            expm(gen * (heights[v] - (heights[parent[v]] if parent[v] >= 0 else 0.0)))
            for v in range(m)
        ]
        s = 0.0
        for states in np.ndindex(*([k] * (m - n + 1))):
            origin, inner = states[0], states[1:]
            state = [0] * n + list(inner)
            term = q[origin]
            for v in range(m):
                above = state[parent[v]] if parent[v] >= 0 else origin
                if v < n:
                    if not np.isnan(col[v]):
                        term *= trans[v][above, int(col[v])]
                else:
                    term *= trans[v][above, state[v]]
            s += term
        total += np.log(s)
    return float(total)


def test_the_multinomial_likelihood_scores_categories():
    rng = np.random.default_rng(3)
    Xc = np.vstack([rng.integers(0, 2, (3, 3)), rng.integers(1, 3, (3, 3))]).astype(float)
    Xc[2, 1] = np.nan
    est = rt.PitmanYorDiffusionTree(
        likelihood="multinomial", sigma2=0.8, n_iter=20, random_state=1
    ).fit(Xc)
    # The log joint of the kept tree: its prior plus the enumerated likelihood.
    want = rt.pydt_log_prior(est.tree_, est.alpha_, est.beta_, est.c_)
    want += _mutation_log_likelihood(Xc, est.tree_, 0.8)
    assert est.log_joint_ == pytest.approx(want, rel=1e-10)
    assert est.sigma2_ == 0.8
    np.testing.assert_array_equal(est.trace_["sigma2"], 0.8)
    assert est.labels_.shape == (6,)
    # Log probabilities of every row of categories sum to one; a missing entry is summed out.
    grid = np.array(np.meshgrid(*[range(3)] * 3, indexing="ij")).reshape(3, -1).T.astype(float)
    p = np.exp(est.score_samples(grid))
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    missing = est.score_samples(np.array([[1.0, np.nan, 0.0]]))[0]
    on_grid = p[(grid[:, 0] == 1) & (grid[:, 2] == 0)].sum()
    assert np.exp(missing) == pytest.approx(on_grid, rel=1e-12)
    proba = est.predict_proba(Xc)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)


def test_the_multinomial_likelihood_refuses_what_it_lacks():
    Xc = np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 2.0], [1.0, 0.0]])

    def fit(**kw: object) -> rt.PitmanYorDiffusionTree:
        args: dict[str, object] = dict(likelihood="multinomial", n_iter=4, random_state=0)
        args.update(kw)
        return rt.PitmanYorDiffusionTree(**args).fit(Xc)

    with pytest.raises(rt.InvalidParameterError) as err:
        fit(inference="greedy-em")
    assert err.value.parameter == "inference"
    with pytest.raises(rt.InvalidParameterError) as err:
        fit(learn_hyperparameters={"sigma2"})
    assert err.value.parameter == "learn_hyperparameters"
    with pytest.raises(rt.InvalidParameterError) as err:
        fit(subtree_move="gibbs")
    assert err.value.parameter == "subtree_move"
    with pytest.raises(rt.InvalidDataError):
        rt.PitmanYorDiffusionTree(likelihood="multinomial").fit(Xc + 0.5)
    est = fit()
    with pytest.raises(rt.InvalidParameterError) as err:
        est.partial_fit(Xc[:1])
    assert err.value.parameter == "likelihood"
    with pytest.raises(rt.InvalidDataError):
        est.score_samples(np.array([[0.0, 0.5]]))


def _lca_times(tree: rt.Tree) -> np.ndarray:
    """Each pair of leaves' divergence time: the height of their lowest common ancestor."""
    n = tree.n_leaves
    out = np.ones((n, n))
    for v in tree.internal_nodes:
        groups = [np.asarray(tree.leaves(c)) for c in tree.children[v]]
        for i, a in enumerate(groups):
            for b in groups[i + 1 :]:
                out[np.ix_(a, b)] = out[np.ix_(b, a)] = tree.heights[v]
    return out


def _scipy_summary(samples: list[rt.Tree]) -> tuple[set[frozenset[int]], dict[frozenset, float]]:
    """The summary by SciPy: its cophenetic distances and average linkage, merges within
    1e-12 of their child's time joined; each branch point's leaves and time."""
    from scipy.cluster.hierarchy import cophenet, linkage

    n = samples[0].n_leaves
    distance = np.mean([cophenet(t.to_linkage()) for t in samples], axis=0)
    Z = linkage(distance, "average")
    times = 1.0 - Z[:, 2]
    leaves: dict[int, frozenset[int]] = {i: frozenset([i]) for i in range(n)}
    joined: set[int] = set()
    for k, (a, b) in enumerate(Z[:, :2].astype(int)):
        leaves[n + k] = leaves[a] | leaves[b]
        joined |= {c for c in (a, b) if c >= n and times[c - n] - times[k] <= 1e-12}
    kept = [k for k in range(n - 1) if n + k not in joined]
    return {leaves[n + k] for k in kept}, {leaves[n + k]: times[k] for k in kept}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_mean_summary_is_scipys_average_linkage(seed):
    # The core's summary (kodama's average linkage on its own parting distances) against
    # SciPy's cophenetic distances and average linkage: the same branch points and times.
    samples = _mcmc(n_iter=40, random_state=seed).samples_
    stars = [  # samples with multi-way branch points, whose merges tie
        rt.Tree(25, [list(range(10)), list(range(10, 25)), [25, 26]], [1.0] * 25 + [0.6, 0.5, 0.2]),
        rt.Tree(25, [list(range(25))], [1.0] * 25 + [0.4]),
    ]
    for chain in (samples, stars, samples + stars):
        summary = rt.pydt._wrap(rt.pydt._mean_divergence_tree(chain))
        expected, times = _scipy_summary(chain)
        got = {frozenset(summary.leaves(v)) for v in summary.internal_nodes}
        assert got == expected
        for v in summary.internal_nodes:
            expected_time = times[frozenset(summary.leaves(v))]
            assert summary.heights[v] == pytest.approx(expected_time, abs=1e-12)


def test_the_mean_summary_is_average_linkage_on_the_mean_divergence_times():
    est = _mcmc(n_iter=40)
    assert est.summary == "mean" and len(est.samples_) == 20
    # The samples' mean distance 1 - t, from their lowest common ancestors.
    distance = np.mean([1.0 - _lca_times(t) for t in est.samples_], axis=0)
    tree, heights = est.tree_, np.asarray(est.tree_.heights)
    assert np.all((heights[25:] > 0) & (heights[25:] < 1))
    for v in tree.internal_nodes:
        kids = tree.children[v]
        # UPGMA: a node lies at one minus the mean distance between the rows of any two of
        # its children, and before every branch point below it.
        for i, a in enumerate(kids):
            assert v == tree.root or heights[v] > heights[tree.parent[v]]
            for b in kids[i + 1 :]:
                mean = distance[np.ix_(tree.leaves(a), tree.leaves(b))].mean()
                assert heights[v] == pytest.approx(1.0 - mean, abs=1e-12)
    # Its log joint under the best sample's hyperparameters, which it reports.
    top = int(np.argmax(est.sample_log_joint_))
    assert (est.alpha_, est.beta_, est.c_, est.sigma2_) == tuple(est.sample_hyperparameters_[top])
    Z = (X - X.mean(axis=0)) / np.sqrt(X.var(axis=0).mean())
    expected = rt.pydt_log_prior(
        tree, alpha=est.alpha_, beta=est.beta_, c=est.c_
    ) + rt.pydt_log_likelihood(Z, tree, sigma2=est.sigma2_)
    assert est.log_joint_ == pytest.approx(expected, rel=1e-10)
    # partial_fit goes on from the chain's best sample, not from the summary.
    before = est.samples_[top].n_leaves
    est.partial_fit(X[:2])
    assert est.tree_.n_leaves == before + 2 and len(est.samples_) == 1
    with pytest.raises(rt.InvalidParameterError, match="summary"):
        rt.PitmanYorDiffusionTree(summary="median").fit(X)
