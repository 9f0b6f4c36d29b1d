"""Regressions from fuzzing (fuzz/): each call once raised an undocumented exception type,
returned a NaN, crashed or hung; now each is a documented rosetree exception."""

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
    est = rt.PitmanYorDiffusionTree(random_state=0)
    try:  # two equal points: the learnt sigma2 collapses
        est.fit(zeros)
    except rt.NumericalError:
        return
    with pytest.raises(rt.NumericalError, match="row 0"):
        est.score_samples(zeros[:1])
