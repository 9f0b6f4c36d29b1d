"""Regressions from fuzzing (fuzz/): each call once raised an undocumented exception type,
returned a NaN, crashed or hung; now each is a documented rosetree exception."""

import math

import numpy as np
import pytest
import rosetree as rt

BIG = np.full((4, 1), 1e300)
TREE = rt.Tree(3, [[0, 1], [3, 2]], [1.0, 1.0, 1.0, 0.6, 0.3])


class Returns(rt.ClusterModel):
    def __init__(self, value):
        self.value = value

    def log_marginal(self, X):
        return self.value


class Bare(rt.ClusterModel):
    pass


CASES = {
    "excess_bits of text": (
        lambda: rt.excess_bits([""], [1.0], 1),
        rt.InvalidParameterError,
        "log_evidence_optimal",
    ),
    "excess_bits of a dict": (
        lambda: rt.excess_bits({}, [], 1),
        rt.InvalidParameterError,
        "log_evidence_optimal",
    ),
    "excess_bits of NaN": (
        lambda: rt.excess_bits([np.nan], [1.0], 1),
        rt.InvalidParameterError,
        "finite",
    ),
    "a model without log_marginal": (
        lambda: rt.log_evidence(np.zeros((2, 1)), [0, 1], model=Bare()),
        rt.InvalidParameterError,
        "must implement log_marginal",
    ),
    "log_marginal returning None": (
        lambda: rt.optimal_tree(BIG, model=Returns(None)),
        rt.InvalidParameterError,
        "log_marginal must return a real number, got a NoneType",
    ),
    "log_marginal returning an array": (
        lambda: rt.BayesianRoseTree(model=Returns(np.zeros(2))).fit(BIG),
        rt.InvalidParameterError,
        "got a ndarray",
    ),
    "Tree with a string for internal": (
        lambda: rt.Tree(1, "a"),
        rt.InvalidTreeError,
        "list of lists",
    ),
    "Tree with True for internal": (
        lambda: rt.Tree(0, True),
        rt.InvalidTreeError,
        "list of lists",
    ),
    "Tree with a negative id": (
        lambda: rt.Tree(2, [[-5, 1]]),
        rt.InvalidTreeError,
        "non-negative",
    ),
    "Tree with scalar heights": (
        lambda: rt.Tree(2, [[0, 1]], 0.5),
        rt.InvalidTreeError,
        "1-D",
    ),
    "from_newick with scalar labels": (
        lambda: rt.Tree.from_newick("(a,b);", labels=np.longdouble(0.5)),
        rt.InvalidParameterError,
        "labels",
    ),
    "to_newick with a label twice": (
        lambda: TREE.to_newick(labels=["", "", "x"]),
        rt.InvalidParameterError,
        "twice",
    ),
    "to_json with a float indent": (
        lambda: TREE.to_json(indent=7.5),
        rt.InvalidParameterError,
        "indent",
    ),
    "clusters_at_height of an array": (
        lambda: TREE.clusters_at_height(np.array([0.1, 0.2])),
        rt.InvalidParameterError,
        "height",
    ),
    "an array for likelihood": (
        lambda: rt.PitmanYorDiffusionTree(likelihood=np.array([])).fit(np.zeros((3, 1))),
        rt.InvalidParameterError,
        "likelihood",
    ),
    "an array for flat_clusters": (
        lambda: rt.BayesianRoseTree(flat_clusters=np.array(["dp", "cut"])).fit(np.eye(3)),
        rt.InvalidParameterError,
        "flat_clusters",
    ),
    "a linkage matrix with NaN": (
        lambda: rt.dendrogram_purity(np.array([[np.nan, 1.0, 1.0, 2.0]]), [0, 1]),
        rt.InvalidTreeError,
        "NaN",
    ),
    "GP experts beyond double precision": (
        lambda: rt.GPExperts(kappa0=1e-3).log_marginal(
            np.array([[-2e200, -2.2e200], [-2e200, -3e200], [-2e200, 1e200]])
        ),
        rt.NumericalError,
        "double precision",
    ),
    "GP queries of text": (
        lambda: rt.GPExperts().posterior_mean(np.array([[0.0, 1.0], [1.0, 2.0]]), ["a"]),
        rt.InvalidDataTypeError,
        "numeric",
    ),
    "Dirichlet-multinomial with alpha near the float range": (
        lambda: rt.log_evidence(
            np.array([[1e300, 2.0], [2.0, 5.0], [3.0, 1.0]]),
            [[0, 1], 2],
            model=rt.DirichletMultinomial(alpha=np.array([1.7976931348623157e308, 1e-12])),
        ),
        rt.NumericalError,
        "NaN",
    ),
    "pydt_log_likelihood with sigma2 at the smallest float": (
        lambda: rt.pydt_log_likelihood(np.full((3, 1), 1e300), TREE, sigma2=5e-324),
        rt.NumericalError,
        "double precision",
    ),
    "pydt_log_prior with c near the float range": (
        lambda: rt.pydt_log_prior(
            rt.sample_pydt(7, 1, alpha=2.748, beta=0.2, c=1.0, random_state=0)[1],
            alpha=2.21,
            c=1.7976931348623157e308,
        ),
        rt.NumericalError,
        "double precision",
    ),
    "coalescent_log_joint with a tiny Lambda": (
        lambda: rt.coalescent_log_joint(
            np.full((3, 1), 1e300),
            rt.Tree(3, [[0, 1], [3, 2]], [0.0, 0.0, 0.0, -0.5, -1.0]),
            Lambda=3.4e-300,
        ),
        rt.NumericalError,
        "NaN",
    ),
    "Tree with far more leaves than its nodes hold": (
        lambda: rt.Tree(2**40, [[0, 1]]),
        rt.InvalidTreeError,
        "children in all",
    ),
    "partitions with a negative limit": (
        lambda: rt.evaluate_tree(np.ones((3, 1)), [0, [1, 2]]).partitions(-1),
        rt.InvalidParameterError,
        "limit",
    ),
    "format with a fractional max_leaves": (
        lambda: TREE.format(max_leaves=1.5),
        rt.InvalidParameterError,
        "max_leaves",
    ),
    "n_partitions with an array flag": (
        lambda: TREE.n_partitions(log10=np.array([1.0, 2.0])),
        rt.InvalidParameterError,
        "log10",
    ),
    "multinomial_coefficient as an array": (
        lambda: rt.DirichletMultinomial(multinomial_coefficient=np.array([])).log_marginal(
            np.ones((2, 2))
        ),
        rt.InvalidParameterError,
        "multinomial_coefficient",
    ),
    "psi0 as text": (
        lambda: rt.NormalInverseWishart(psi0="a").log_marginal(np.eye(3)),
        rt.InvalidParameterError,
        "psi0",
    ),
    "fit_kernel with empty bounds": (
        lambda: rt.GPExperts().fit_kernel(np.array([[0.0, 0.0], [1.0, 1.0]]), bounds=[]),
        rt.InvalidParameterError,
        "bounds",
    ),
    "learn_hyperparameters with an unhashable name": (
        lambda: rt.PitmanYorDiffusionTree(learn_hyperparameters=[[1.0]]).fit(np.eye(3)),
        rt.InvalidParameterError,
        "learn_hyperparameters",
    ),
    "learning with a fractional random_state": (
        lambda: rt.learn_hyperparameters(np.array([[0.0], [1.0], [1.0]]), random_state=1.5),
        rt.InvalidParameterError,
        "random_state",
    ),
    "an evidence gradient beyond double precision": (
        lambda: rt.evidence_gradient(np.ones((3, 1)), [0, 1, 2], gamma=5e-324),
        rt.NumericalError,
        "gradient",
    ),
    "excess bits beyond double precision": (
        lambda: rt.excess_bits([0.0], [1.7976931348623157e308], 1),
        rt.NumericalError,
        "overflow",
    ),
    "plot heights beyond the axis range": (
        lambda: rt.plot.dendrogram_layout(TREE, heights=[0.0, 0.0, 0.0, 1.0, 1.7e308]),
        rt.InvalidParameterError,
        "heights",
    ),
    "a linkage matrix with an id out of range": (
        lambda: rt.dendrogram_purity(np.array([[5.0, 1.0, 7.1, 2.0]]), [0, 1]),
        rt.InvalidTreeError,
        "ids",
    ),
    "a Dirichlet-multinomial ln f of NaN": (
        lambda: rt.DirichletMultinomial(
            alpha=np.array([1e12, 0.5, 1.7976931348623157e308])
        ).log_marginal(
            np.array(
                [
                    [9007199254740992.0, 5.0, 1.0],
                    [3.0, 3.0, 5.0],
                    [1e6, 5.0, 1e6],
                    [0.0, 1e300, 1.0],
                ]
            )
        ),
        rt.NumericalError,
        "ln f",
    ),
}


@pytest.mark.filterwarnings("ignore::rosetree.DegenerateModelWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_fuzzing_finds_raise_documented_errors(name):
    call, error, match = CASES[name]
    with pytest.raises(error, match=match):
        call()


def test_coalescent_cells_out_of_range_are_named():
    X = np.array([[0.0], [1.0], [3.0], [7.0]])
    est = rt.KingmanCoalescent(inference="smc-priorprior", n_particles=3).fit(X)
    with pytest.raises(rt.InvalidParameterError, match="columns"):
        est.log_predictive_missing(X, [0], [3])
    with pytest.raises(rt.InvalidParameterError, match="rows"):
        est.log_predictive_missing(X, ["a"], [0])


def test_diffusion_tree_densities_are_never_nan():
    zeros = np.zeros((2, 2))
    # Greedy EM's default (sigma2 alone learnt) fits two equal points and scores them.
    em = rt.PitmanYorDiffusionTree(inference="greedy-em", random_state=0).fit(zeros)
    assert np.all(np.isfinite(em.score_samples(np.vstack([zeros[:1], np.ones((1, 2))]))))
    est = rt.PitmanYorDiffusionTree(
        inference="greedy-em", learn_hyperparameters=True, random_state=0
    )
    try:  # two equal points: the learnt c collapses, the divergence is close to t = 1
        est.fit(zeros)
    except rt.NumericalError:
        return
    # The new point's divergence times keep their distance to 1 (1 - t = exp(-tau)), so its
    # density is large at the data and finite; where it is not, the error names the row.
    out, error = None, ""
    try:
        out = est.score_samples(np.vstack([zeros[:1], np.ones((1, 2))]))
    except rt.NumericalError as err:
        error = str(err)
    if out is None:
        assert "row 0" in error
    else:
        assert np.all(np.isfinite(out)) and out[0] > out[1]


def test_integers_beyond_a_machine_word_mean_no_limit():
    assert TREE.max_clusters(2**64).tolist() == [0, 1, 2]
    est = rt.KingmanCoalescent().fit(np.array([[0.0], [1.0], [3.0]]))
    assert est.cluster_labels(2**64).tolist() == [0, 0, 0]


def test_newick_quotes_names_with_white_space_and_control_characters():
    names = ["a\x0bb", "c\x1fd", "e\u00a0f"]
    text = TREE.to_newick(labels=names)
    back = rt.Tree.from_newick(text, labels=names, lengths=False)
    assert back.to_nested() == TREE.to_nested()


def test_learning_alpha_from_the_smallest_float_ends():
    # ln(5e-324) lies below the slice sampler's bounds: its shrinkage looped for ever.
    est = rt.PitmanYorDiffusionTree(
        alpha=5e-324, beta=0.0, c=0.001, likelihood="probit", inference="mcmc", n_iter=2
    )
    est.fit(np.array([[np.nan], [np.nan]]))
    assert est.alpha_ <= 1e-300


def test_greedy_em_on_data_beyond_double_precision_ends():
    # The M-step's L-BFGS line search never ended on infinite costs.
    est = rt.PitmanYorDiffusionTree(inference="greedy-em", n_iter=1, learn_hyperparameters=False)
    with pytest.raises(rt.NumericalError):
        est.fit(np.array([[1e154], [-1e154]]))


@pytest.mark.parametrize("kappa0", [1e300, 1e10, 1.0])
@pytest.mark.parametrize("seed", range(6))
def test_niw_fit_evidence_equals_re_evaluation_far_from_the_origin(seed, kappa0):
    """Issue 29 item 6: rows offset by 1e6 with a near-improper (or ordinary) kappa0 under
    the constant mixing rule; the fit's incremental statistics and a fresh evaluation of its
    tree give the same ln p(D | T)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(12, 3)) * rng.uniform(0.01, 10.0) + 1e6
    model = rt.NormalInverseWishart(kappa0=kappa0)
    est = rt.BayesianRoseTree(model, mixing="gamma").fit(X)
    again = rt.log_evidence(X, est.tree_, model=model, mixing="gamma")
    assert est.log_evidence_ == pytest.approx(again, rel=1e-12, abs=1e-9)


def test_normal_gamma_evidence_equals_re_evaluation_at_the_spacing_of_doubles():
    """Fuzz finding 0:77333: rows near 1e8 that differ in their last digits (the spacing of
    doubles there is 1.5e-8), Normal-Gamma with a vanishing b0. The statistics held the
    rows' means at 1e8, whose rounding was as large as the spread, so the fit's merges and
    a fresh evaluation of its tree disagreed by 1.2 nats; measured from m0 they are exact."""
    X = np.array(
        [
            [100000000.00000004, 100000000.00000003, 100000000.00000004, 99999999.99999999],
            [100000000.0, 99999999.99999997, 100000000.00000004, 100000000.00000001],
            [99999999.99999999, 100000000.00000003, 100000000.00000004, 100000000.00000004],
            [100000000.0, 100000000.00000003, 100000000.00000004, 100000000.0],
            [100000000.00000004, 100000000.00000001, 100000000.00000004, 100000000.0],
            [99999999.99999999, 100000000.0, 100000000.00000004, 99999999.99999997],
            [99999999.99999997, 100000000.0, 100000000.00000004, 99999999.99999999],
            [99999999.99999999, 99999999.99999999, 100000000.00000004, 100000000.0],
            [100000000.00000001, 99999999.99999996, 100000000.00000004, 100000000.00000001],
            [99999999.99999999, 99999999.99999999, 100000000.00000004, 100000000.00000004],
            [100000000.0, 100000000.00000001, 100000000.00000004, 100000000.0],
            [100000000.00000004, 99999999.99999997, 100000000.00000004, 100000000.00000001],
        ]
    )
    model = rt.NormalGamma(b0=5e-324)
    est = rt.BayesianRoseTree(
        model, mixing="dp", binary=True, merge_rule="posterior", contract=True, n_jobs=1
    ).fit(X)
    again = rt.log_evidence(X, est.tree_, model=est.model_, mixing="dp")
    assert est.log_evidence_ == pytest.approx(again, rel=1e-12)
    # The model is invariant under a shift of both the data and m0: the same rows moved to
    # the origin (exactly, as they lie within a factor of two of 1e8) give the same tree.
    fits = [
        rt.BayesianRoseTree(rt.NormalGamma(m0=m0, b0=5e-324), binary=True).fit(rows)
        for m0, rows in ((1e8, X), (0.0, X - 1e8))
    ]
    assert fits[0].log_evidence_ == pytest.approx(fits[1].log_evidence_, rel=1e-12)
    assert fits[0].tree_.to_newick() == fits[1].tree_.to_newick()


def test_gp_prior_with_a_vanishing_nu0_is_a_numerical_error():
    """Fuzz finding 0:3566: nu0 = 5e-324 passes nu0 > d - 1 for one input column, but
    nu0 / 2 underflows to 0, where ln Γ has a pole: a NumericalError naming nu0, not
    math's plain ValueError."""
    X = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 0.5]])
    with pytest.raises(rt.NumericalError, match="nu0"):
        rt.BayesianRoseTree(rt.GPExperts.from_data(X, nu0=5e-324)).fit(X)


class _RowZeroImpossible(rt.ClusterModel):
    """ln f = -inf for every cluster holding row 0 (its first value is above 5)."""

    def log_marginal(self, X):
        X = np.asarray(X)
        return -math.inf if np.any(X[:, 0] > 5) else float(-0.5 * np.sum(X**2))


def test_cluster_weights_sum_to_one_where_a_node_is_impossible_either_way():
    """Fuzz finding 0:30593: a node whose one-cluster and split terms are both -inf (its
    rows impossible under the model) has no posterior merge probability; its (r, 1 - r)
    is the prior's (pi, 1 - pi), not (1, 1), so the weights of eq 1.25 still sum to one."""
    X = np.array([[9.0], [0.1], [0.2], [-0.3]])
    tree = rt.evaluate_tree(X, [[[0, 1], 2], 3], model=_RowZeroImpossible(), mixing="gamma")
    log_w = np.asarray(tree.log_cluster_weights())
    assert abs(np.logaddexp.reduce(log_w)) < 1e-12


def test_coalescent_missing_entries_score_under_a_full_lambda():
    """Fuzz finding 0:2816: with a full (d, d) Lambda, each held-out cell's observation
    variance is noise * Lambda_jj, the diagonal, not a broadcast of the matrix (ValueError).
    Under a diagonal matrix the result equals that of the same rates given as a vector."""
    X = np.array([[-3.0, 0.5], [2.0, 2.0], [1.5, -1.0], [0.0, 0.2]])
    rates = np.array([1.5, 0.5])
    full = rt.KingmanCoalescent(Lambda=np.diag(rates), noise=0.1).fit(X)
    vector = rt.KingmanCoalescent(Lambda=rates, noise=0.1).fit(X)
    got = full.log_predictive_missing(X)
    assert np.isfinite(got)
    assert got == pytest.approx(vector.log_predictive_missing(X), rel=1e-12)


def test_multinomial_missing_cells_outside_the_fitted_categories_are_refused():
    # `python3 -m fuzz --replay 5:4837`: the true values 2 and 3 of a fit on 0/1 data were
    # looked up in a table of two categories (an IndexError), and 1.5 would have been read
    # as 1.
    X = np.array([[1, 1, 1], [0, 0, 1], [1, 1, 1], [1, 0, 1], [1, 1, 0], [0, 1, 1.0]])
    est = rt.KingmanCoalescent(likelihood="multinomial").fit(X)
    for value in (2.0, -1.0, 0.5):
        truth = X.copy()
        truth[4, 1] = value
        with pytest.raises(rt.InvalidDataError, match=r"row 4, column 1.*categories are 0 \.\. 1"):
            est.log_predictive_missing(truth, [5, 4], [0, 1])
    p = est.predict_proba_missing()
    assert est.log_predictive_missing(X, [5, 4], [0, 1]) == pytest.approx(
        np.log(p[5, 0, 0]) + np.log(p[4, 1, 1]), rel=1e-12
    )
