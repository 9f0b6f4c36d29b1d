"""The rose tree's default model (``model="auto"``): the data's type, the choice among
real-valued models, and constant columns; the likelihood the coalescent's
``likelihood="auto"`` takes for each type of data."""

import warnings

import numpy as np
import pytest
import rosetree as rt
from scipy import sparse
from scipy.special import gammaln
from scipy.stats import invwishart


def _mixture(kind, n=150, d=4, k=3, seed=0):
    """Rows from k clusters: full random covariances ("niw"), independent features ("ng"),
    or one variance for all features of a cluster ("shared")."""
    rng = np.random.default_rng(seed)
    parts = []
    for _ in range(k):
        mu = rng.normal(0.0, 3.0, d)
        if kind == "niw":
            cov = invwishart.rvs(df=d + 4, scale=3.0 * np.eye(d), random_state=rng)
            parts.append(rng.multivariate_normal(mu, cov, n // k))
        elif kind == "shared":
            sd = 1.0 / np.sqrt(rng.gamma(5.0, 0.2))
            parts.append(mu + sd * rng.normal(size=(n // k, d)))
        else:
            sd = 1.0 / np.sqrt(rng.gamma(2.0, 0.5, d))
            parts.append(mu + sd * rng.normal(size=(n // k, d)))
    return np.vstack(parts)


def _ng_log_marginal(X):
    """ln f(D) of one Normal-Gamma cluster with the documented data-driven defaults (Murphy
    2007, eq 95), written out here from the formula."""
    n = X.shape[0]
    m0, var = X.mean(axis=0), X.var(axis=0, ddof=1)
    kappa0, a0 = 1.0, 5.0
    b0 = 0.2 * a0 * (var + 1e-6 * var.mean())
    xbar = X.mean(axis=0)
    kn, an = kappa0 + n, a0 + n / 2
    bn = b0 + 0.5 * ((X - xbar) ** 2).sum(axis=0) + kappa0 * n * (xbar - m0) ** 2 / (2 * kn)
    per = (
        gammaln(an)
        - gammaln(a0)
        + a0 * np.log(b0)
        - an * np.log(bn)
        + 0.5 * np.log(kappa0 / kn)
        - n / 2 * np.log(2 * np.pi)
    )
    return float(per.sum())


def test_binary_data_get_the_beta_bernoulli_model():
    X = (np.random.default_rng(0).random((30, 5)) < 0.4).astype(float)
    X[3, 2] = np.nan
    est = rt.BayesianRoseTree().fit(X)
    assert isinstance(est.model_, rt.BetaBernoulli)
    assert est.model_selection_ == {
        "data": "binary",
        "rule": "structure",
        "chosen": "BetaBernoulli",
    }
    assert est.log_evidence_ == pytest.approx(
        rt.log_evidence(X, est.tree_, model=rt.BetaBernoulli()), rel=1e-12
    )


def test_counts_get_the_dirichlet_multinomial_model():
    X = np.random.default_rng(1).poisson(3.0, size=(25, 6)).astype(float)
    est = rt.BayesianRoseTree().fit(X)
    assert isinstance(est.model_, rt.DirichletMultinomial)
    assert est.model_selection_["data"] == "counts"


def test_positive_integers_are_measurements_and_zeros_make_them_counts():
    # Three groups measured in whole millimetres (no zero anywhere): a Gaussian model, as
    # for the same lengths in centimetres; one zero anywhere makes the table counts.
    rng = np.random.default_rng(3)
    mm = np.vstack([rng.normal(c, 4.0, size=(20, 3)) for c in (40.0, 60.0, 80.0)]).round()
    est = rt.BayesianRoseTree().fit(mm)
    assert est.model_selection_["data"] == "real"
    assert isinstance(est.model_, (rt.NormalGamma, rt.NormalInverseWishart))
    cm = rt.BayesianRoseTree().fit(mm / 10.0)
    assert type(cm.model_) is type(est.model_)
    assert rt.dendrogram_purity(est.tree_, np.repeat([0, 1, 2], 20)) > 0.9
    for table in (mm.astype(np.uint8), mm.astype(np.float32)):
        assert rt.BayesianRoseTree().fit(table).model_selection_["data"] == "real"
    with_zero = mm.copy()
    with_zero[5, 1] = 0.0
    for table in (with_zero, with_zero.astype(np.uint8), sparse.csr_matrix(with_zero)):
        est = rt.BayesianRoseTree().fit(table)
        assert est.model_selection_["data"] == "counts"
        assert isinstance(est.model_, rt.DirichletMultinomial)
    # A sparse table's implicit entries are zeros.
    assert rt.BayesianRoseTree().fit(sparse.csr_matrix(mm)).model_selection_["data"] == "real"
    gaps = sparse.csr_matrix(mm)
    gaps[0, 0] = 0.0
    gaps.eliminate_zeros()
    assert rt.BayesianRoseTree().fit(gaps).model_selection_["data"] == "counts"


def test_sparse_counts_and_sparse_real_data_stay_sparse_models():
    counts = sparse.random(40, 8, density=0.3, random_state=2, format="csr")
    counts.data = np.ceil(counts.data * 5)
    assert isinstance(rt.BayesianRoseTree().fit(counts).model_, rt.DirichletMultinomial)
    real = sparse.random(40, 8, density=0.5, random_state=2, format="csr")
    real.data -= 0.5
    est = rt.BayesianRoseTree().fit(real)
    # The full-covariance model needs dense rows, the shared precision ten columns.
    assert [c["model"] for c in est.model_selection_["candidates"]] == [rt.NormalGamma()]


@pytest.mark.parametrize("kind", ["ng", "niw", "shared"])
@pytest.mark.parametrize("seed", range(4))
def test_evidence_rule_picks_the_generating_model(kind, seed):
    # With 10 features (the fewest for which the shared precision is a candidate) the
    # evidence tells the three apart on every seed; with 4 it takes the full covariance for
    # independent features on some.
    X = _mixture(kind, d=10, seed=seed)
    est = rt.BayesianRoseTree(model=rt.AutoModel(rule="evidence")).fit(X)
    want = {
        "ng": rt.NormalGamma(),
        "niw": rt.NormalInverseWishart(),
        "shared": rt.NormalGamma(shared_precision=True),
    }[kind]
    assert est.model_ == want


def _three_groups(d, seed):
    """bench_many_columns.py's set: three groups of 20 rows in d standard normal columns, a
    tenth of them shifted by 3 for the second group and the next tenth for the third."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), 20)
    shift = np.zeros((3, d))
    tenth = max(d // 10, 1)
    shift[1, :tenth] = shift[2, tenth : 2 * tenth] = 3.0
    return shift[y] + rng.normal(size=(60, d)), y


@pytest.mark.parametrize("seed", range(3))
def test_structure_rule_takes_the_shared_precision_for_many_columns_in_one_unit(seed):
    # In 200 columns of 60 rows (the full covariance is no candidate) the per-feature
    # model's tree is impure and its flat clusters many; the shared precision's are right.
    X, y = _three_groups(200, seed)
    est = rt.BayesianRoseTree().fit(X)
    record = est.model_selection_
    assert [c["model"] for c in record["candidates"]] == [
        rt.NormalGamma(),
        rt.NormalGamma(shared_precision=True),
    ]
    assert est.model_ == rt.NormalGamma(shared_precision=True)
    assert rt.dendrogram_purity(est.tree_, y) == 1.0
    assert len(np.unique(est.labels_)) == 3
    per_feature = rt.BayesianRoseTree(rt.NormalGamma()).fit(X)
    assert rt.dendrogram_purity(per_feature.tree_, y) < 0.9


@pytest.mark.parametrize("seed", range(4))
def test_structure_rule_picks_the_diagonal_model_on_its_own_data(seed):
    X = _mixture("ng", seed=seed)
    assert isinstance(rt.BayesianRoseTree().fit(X).model_, rt.NormalGamma)


def test_structure_rule_prefers_the_diagonal_model_on_correlated_clusters():
    # The documented limit of the default rule: a diagonal model splits correlated
    # clusters into pieces and so finds more structure in them than the full covariance.
    X = _mixture("niw", d=4, seed=0)
    assert isinstance(rt.BayesianRoseTree().fit(X).model_, rt.NormalGamma)


def test_recorded_scores_are_each_models_tree_against_one_cluster():
    X = _mixture("niw", seed=5)
    est = rt.BayesianRoseTree(gamma=0.4).fit(X)
    record = est.model_selection_
    assert record["data"] == "real" and record["rows"] == X.shape[0]
    for entry in record["candidates"]:
        model = entry["model"]
        alone = rt.BayesianRoseTree(model=model, gamma=0.4).fit(X)
        assert entry["log_evidence"] == pytest.approx(alone.log_evidence_, rel=1e-12)
        assert entry["log_marginal_one_cluster"] == pytest.approx(model.log_marginal(X), rel=1e-12)
        assert entry["score"] == pytest.approx(
            entry["log_evidence"] - entry["log_marginal_one_cluster"]
        )
    ng = next(e for e in record["candidates"] if isinstance(e["model"], rt.NormalGamma))
    assert ng["log_marginal_one_cluster"] == pytest.approx(_ng_log_marginal(X), rel=1e-10)
    best = max(record["candidates"], key=lambda e: e["score"])
    assert type(est.model_) is type(best["model"])
    assert record["chosen"] == type(best["model"]).__name__


def test_missing_values_leave_the_full_covariance_out():
    X = _mixture("ng", seed=3)
    X[4, 1] = np.nan
    est = rt.BayesianRoseTree().fit(X)
    assert [c["model"] for c in est.model_selection_["candidates"]] == [rt.NormalGamma()]
    assert np.isfinite(est.score_samples(X[:5])).all()


def test_large_data_are_chosen_on_a_seeded_sample():
    X = _mixture("ng", n=300, seed=6)
    auto = rt.AutoModel(sample=100)
    a = rt.BayesianRoseTree(model=auto, random_state=3).fit(X)
    b = rt.BayesianRoseTree(model=auto, random_state=3).fit(X)
    assert a.model_selection_["rows"] == 100
    assert [c["score"] for c in a.model_selection_["candidates"]] == [
        c["score"] for c in b.model_selection_["candidates"]
    ]
    assert a.tree_.to_nested() == b.tree_.to_nested()


def test_candidates_can_be_given():
    X = _mixture("niw", seed=1)
    auto = rt.AutoModel(real=(rt.NormalInverseWishart(kappa0=1.0),))
    est = rt.BayesianRoseTree(model=auto).fit(X)
    assert est.model_ == rt.NormalInverseWishart(kappa0=1.0)


@pytest.mark.parametrize(
    ("auto", "name"),
    [
        (rt.AutoModel(rule="bic"), "rule"),
        (rt.AutoModel(rule=["evidence"]), "rule"),
        (rt.AutoModel(sample=1), "sample"),
        (rt.AutoModel(sample=2.5), "sample"),
        (rt.AutoModel(real=()), "real"),
        (rt.AutoModel(real=("ng",)), "model"),
    ],
)
def test_bad_auto_model_parameters_are_named(auto, name):
    with pytest.raises(rt.InvalidParameterError) as err:
        rt.BayesianRoseTree(model=auto).fit(_mixture("ng"))
    assert err.value.parameter == name


def _wine():
    datasets = pytest.importorskip("sklearn.datasets")
    X = datasets.load_wine().data
    return (X - X.mean(axis=0)) / X.std(axis=0)


@pytest.mark.parametrize("model", ["auto", rt.NormalInverseWishart(), rt.NormalGamma()])
def test_constant_columns_are_left_out_with_a_warning(model):
    X = _wine()
    padded = np.column_stack([X[:, :5], np.zeros(len(X)), X[:, 5:], np.full(len(X), 3.0)])
    plain = rt.BayesianRoseTree(model=model).fit(X)
    with pytest.warns(rt.DegenerateModelWarning, match=r"2 constant column\(s\) \(5, 14\)"):
        est = rt.BayesianRoseTree(model=model).fit(padded)
    assert est.constant_features_.tolist() == [5, 14]
    assert est.n_features_in_ == 15
    assert est.tree_.to_nested() == plain.tree_.to_nested()
    np.testing.assert_array_equal(est.labels_, plain.labels_)
    assert est.log_evidence_ == pytest.approx(
        rt.log_evidence(np.delete(padded, [5, 14], axis=1), est.tree_, model=est.model_),
        rel=1e-12,
    )
    # Evaluating a tree with the constant columns under a data-driven prior says so.
    with pytest.warns(rt.DegenerateModelWarning, match=r"2 constant column\(s\) \[5, 14\]"):
        rt.log_evidence(padded, est.tree_, model=type(est.model_)())
    np.testing.assert_allclose(est.score_samples(padded[:7]), plain.score_samples(X[:7]))
    with pytest.raises(rt.InvalidDataError, match="15 features"):
        est.score_samples(X[:3])


def test_constant_columns_stay_with_a_prior_the_user_gave():
    X = np.column_stack([_wine()[:, :4], np.zeros(178)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = rt.BayesianRoseTree(model=rt.NormalGamma(b0=1.0)).fit(X)
    assert est.constant_features_.size == 0


def test_constant_binary_columns_are_data():
    X = (np.random.default_rng(0).random((20, 4)) < 0.5).astype(float)
    X[:, 2] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = rt.BayesianRoseTree().fit(X)
    assert est.constant_features_.size == 0 and isinstance(est.model_, rt.BetaBernoulli)


def test_data_errors_name_the_column_of_a_data_frame():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": [0.0, 1.0, 1.0], "b": [1.0, 0.5, 0.0]})
    with pytest.raises(rt.InvalidDataError, match=r"Gaussian cluster model.*\(column 'b'\)") as e:
        rt.BayesianRoseTree(model=rt.BetaBernoulli()).fit(frame)
    assert (e.value.row, e.value.column) == (1, 1)


def test_data_errors_after_constant_columns_name_the_data_column():
    # Values beyond about 1e154 overflow the squares of the default prior's variances.
    X = np.column_stack([np.zeros(5), np.arange(5.0), [1.0, 2.0, 3e200, 4.0, 5.0]])
    with (
        pytest.warns(rt.DegenerateModelWarning),
        pytest.raises(rt.InvalidDataError, match="column 1 of the 2 fitted is X's column 2") as e,
    ):
        rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
    assert e.value.column == 2


def test_the_chosen_model_is_not_fitted_twice(monkeypatch):
    X = _mixture("ng", seed=2)
    calls = []
    original = rt.BayesianRoseTree._fit_core

    def counting(self, data, model, *args, **kwargs):
        calls.append((type(model).__name__, data.shape[0]))
        return original(self, data, model, *args, **kwargs)

    monkeypatch.setattr(rt.BayesianRoseTree, "_fit_core", counting)
    est = rt.BayesianRoseTree().fit(X)
    assert calls == [("NormalGamma", 150), ("NormalInverseWishart", 150)]
    alone = original(est, X, est.model_, 0.5, 1.0, **_plain_options())
    assert est.tree_.to_nested() == rt.RoseTree(alone.tree()).to_nested()


def _plain_options():
    return {
        "binary": False,
        "merge_rule": "likelihood_ratio",
        "contract": False,
        "n_jobs": None,
        "approx": None,
    }


def _bits(n=40, d=6, seed=5):
    """0/1 rows from two prototypes with a fifth of the bits flipped, a few entries missing."""
    rng = np.random.default_rng(seed)
    proto = rng.random((2, d)) < 0.5
    X = (proto[rng.integers(0, 2, n)] ^ (rng.random((n, d)) < 0.2)).astype(float)
    X[rng.random(X.shape) < 0.05] = np.nan
    return X


def test_coalescent_auto_takes_the_mutation_model_for_binary_rows():
    X = _bits()
    est = rt.KingmanCoalescent().fit(X)
    want = rt.KingmanCoalescent(likelihood="multinomial").fit(X)
    assert est.likelihood_ == "multinomial" and est.noise_ == 0.0
    assert est.tree_.to_nested() == want.tree_.to_nested()
    assert est.log_joint_ == want.log_joint_
    # ln p(x, pi) of the mutation model, computed apart from the fit.
    assert est.log_joint_ == pytest.approx(
        rt.coalescent_log_joint(X, est.tree_, likelihood="multinomial", Lambda=1.0), rel=1e-12
    )


@pytest.mark.parametrize(
    "options", [dict(noise=0.2), dict(root=1.0), dict(inference="smc-postpost", n_particles=3)]
)
def test_coalescent_auto_keeps_brownian_diffusion_where_an_option_needs_it(options):
    X = np.nan_to_num(_bits(n=12))
    assert rt.KingmanCoalescent(**options).fit(X).likelihood_ == "brownian"


def test_coalescent_auto_takes_brownian_diffusion_for_real_values_and_counts():
    rng = np.random.default_rng(1)
    assert rt.KingmanCoalescent().fit(rng.normal(size=(10, 3))).likelihood_ == "brownian"
    counts = rng.integers(0, 5, (10, 3)).astype(float)
    assert rt.KingmanCoalescent().fit(counts).likelihood_ == "brownian"


def test_the_shared_precision_is_a_candidate_only_for_columns_in_one_unit():
    # Three groups in ten columns, then a column of noise in units 1000 times smaller
    # (grams for kilograms, say): one precision for every column would let it decide.
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(3), 20)
    X = np.zeros((60, 10))
    X[:, 0], X[:, 1] = 3.0 * y, -2.0 * y
    X += rng.normal(size=(60, 10))
    names = lambda est: [c["model"] for c in est.model_selection_["candidates"]]  # noqa: E731
    assert rt.NormalGamma(shared_precision=True) in names(rt.BayesianRoseTree().fit(X))
    # Fewer than ten columns are taken to be measurements in units of their own.
    assert rt.NormalGamma(shared_precision=True) not in names(rt.BayesianRoseTree().fit(X[:, :9]))
    X[:, 5] *= 1000.0
    est = rt.BayesianRoseTree().fit(X)
    assert names(est) == [rt.NormalGamma(), rt.NormalInverseWishart()]  # 60 rows, 10 columns
    shared = rt.BayesianRoseTree(rt.NormalGamma(shared_precision=True)).fit(X)
    assert rt.dendrogram_purity(shared.tree_, y) < rt.dendrogram_purity(est.tree_, y)
    # Sparse rows: the ranges count the implicit zeros.
    S = sparse.csr_array(np.where(np.abs(X) > 0.5, X, 0.0))
    assert rt.NormalGamma(shared_precision=True) not in names(rt.BayesianRoseTree().fit(S))


def test_learning_under_auto_chooses_among_the_learnable_candidates():
    # Where the shared precision would be chosen, learning keeps to the models it can
    # learn, rather than failing on the one it cannot.
    X, _ = _three_groups(200, 0)
    assert rt.BayesianRoseTree().fit(X).model_ == rt.NormalGamma(shared_precision=True)
    est = rt.BayesianRoseTree(learn_hyperparameters=True).fit(X)
    assert [c["model"] for c in est.model_selection_["candidates"]] == [rt.NormalGamma()]
    assert isinstance(est.model_, rt.NormalGamma) and not est.model_.shared_precision
    assert np.isfinite(est.log_evidence_)
