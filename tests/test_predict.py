"""Prediction with a fitted rose tree (BRT §1.4.1, eqs 1.24–1.26).

The references are independent of the Rust core: cluster predictives from SciPy's ``betaln``
and ``gammaln`` and Student-t densities, weights from the Python-side
:meth:`RoseTree.log_cluster_weights`, eq 1.24 from re-evaluating the tree on completed data,
and normalisation checked by enumeration or numerical integration.
"""

import itertools
import pickle

import numpy as np
import pytest
import rosetree as rt
from hypothesis import given
from hypothesis import strategies as st
from rosetree.testing import binary_data
from scipy import integrate, sparse, special, stats

MIXINGS = ["brt", "gamma", "dp"]

BINARY = np.array(
    [
        [1, 1, 1, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 1],
        [0, 0, 0, 1, 1],
        [0, 0, 1, 1, 1],
        [0, 1, 0, 1, 1],
        [1, 0, 1, 0, 1],
    ],
    dtype=float,
)
#: Entries of BINARY removed to make partially observed training data.
HOLES = [(0, 2), (3, 0), (3, 4), (5, 1)]


def with_holes(X=BINARY, holes=HOLES):
    X = X.copy()
    for i, j in holes:
        X[i, j] = np.nan
    return X


def all_binary_rows(d):
    return np.array(list(itertools.product([0.0, 1.0], repeat=d)))


def bernoulli_log_f(rows, a, b):
    """ln f of a cluster of binary rows (NaN missing), straight from eq 1.19."""
    obs = ~np.isnan(rows)
    k = np.nansum(rows, axis=0)
    n = obs.sum(axis=0)
    return float(np.sum(special.betaln(a + k, b + n - k) - special.betaln(a, b)))


def reference_scores(est, X_train, X_new, log_f):
    """ln Σ_S w_S f(D_S ∪ {x}) / f(D_S) and the responsibilities, node by node in Python."""
    tree = est.tree_
    log_w = tree.log_cluster_weights()
    terms = np.empty((len(X_new), tree.n_nodes))
    for s in range(tree.n_nodes):
        cluster = X_train[tree.leaves(s)]
        base = log_f(cluster)
        for r, x in enumerate(X_new):
            terms[r, s] = log_w[s] + log_f(np.vstack([cluster, x])) - base
    log_p = special.logsumexp(terms, axis=1)
    return log_p, np.exp(terms - log_p[:, None])


class BernoulliInPython(rt.ClusterModel):
    """The beta-Bernoulli model written in Python (missing entries marginalised)."""

    def __init__(self, a=1.0, b=1.0):
        self.a, self.b = a, b

    def log_marginal(self, X):
        return bernoulli_log_f(np.asarray(X), self.a, self.b)


# ---------------------------------------------------------------------------- new rows


@pytest.mark.parametrize("mixing", MIXINGS)
@pytest.mark.parametrize("holes", [[], HOLES])
def test_scores_of_every_binary_row_sum_to_one(mixing, holes):
    X = with_holes(holes=holes)
    est = rt.BayesianRoseTree(rt.BetaBernoulli(alpha=0.7, beta=1.3), mixing=mixing).fit(X)
    log_p = est.score_samples(all_binary_rows(X.shape[1]))
    assert special.logsumexp(log_p) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("holes", [[], HOLES])
def test_bernoulli_scores_and_responsibilities_match_python_reference(holes):
    X = with_holes(holes=holes)
    a = np.array([0.5, 1.0, 2.0, 0.8, 1.2])
    est = rt.BayesianRoseTree(rt.BetaBernoulli(alpha=a, beta=1.5), mixing="dp").fit(X)
    new = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 1, 1], [1, np.nan, 1, np.nan, 0]])
    log_p, resp = reference_scores(est, X, new, lambda rows: bernoulli_log_f(rows, a, 1.5))
    np.testing.assert_allclose(est.score_samples(new), log_p, rtol=1e-12, atol=1e-12)
    got = est.predict_node_proba(new)
    assert got.shape == (3, est.tree_.n_nodes)
    np.testing.assert_allclose(got, resp, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-12)
    assert est.score(new) == pytest.approx(np.mean(log_p), rel=1e-12)


def test_nan_in_a_new_row_is_marginalised():
    est = rt.BayesianRoseTree().fit(BINARY)
    completions = np.array([[1, b, 0, 1, c] for b in (0, 1) for c in (0, 1)], dtype=float)
    partial = np.array([[1, np.nan, 0, 1, np.nan], [np.nan] * 5])
    got = est.score_samples(partial)
    assert got[0] == pytest.approx(special.logsumexp(est.score_samples(completions)), rel=1e-12)
    assert got[1] == pytest.approx(0.0, abs=1e-12)


def niw_predictive_1d(cluster, x, mu0, kappa0, nu0, psi0):
    """Student-t posterior predictive of a 1-D Normal-inverse-gamma cluster (Murphy 2007)."""
    n = len(cluster)
    mean = cluster.mean() if n else 0.0
    kn, nun = kappa0 + n, nu0 + n
    mun = (kappa0 * mu0 + n * mean) / kn
    psin = psi0 + np.sum((cluster - mean) ** 2) + kappa0 * n / kn * (mean - mu0) ** 2
    scale = np.sqrt(psin * (kn + 1) / (kn * nun))
    return stats.t.logpdf(x, df=nun, loc=mun, scale=scale)


def test_gaussian_density_integrates_to_one_and_matches_student_t():
    X = np.array([[-2.1], [-1.8], [-2.4], [1.1], [1.3], [0.7], [4.0]])
    prior = dict(mu0=0.0, kappa0=0.5, nu0=3.0, psi0=1.0)
    model = rt.NormalInverseWishart(mu0=[0.0], kappa0=0.5, nu0=3.0, psi0=[[1.0]])
    est = rt.BayesianRoseTree(model).fit(X)
    total, _ = integrate.quad(lambda x: np.exp(est.score_samples([[x]])[0]), -np.inf, np.inf)
    assert total == pytest.approx(1.0, abs=1e-7)
    xs = np.array([-3.0, -2.0, 0.0, 1.0, 5.0])
    log_w = est.tree_.log_cluster_weights()
    terms = np.array(
        [
            [
                log_w[s] + niw_predictive_1d(X[est.tree_.leaves(s), 0], x, **prior)
                for s in range(est.tree_.n_nodes)
            ]
            for x in xs
        ]
    )
    np.testing.assert_allclose(est.score_samples(xs[:, None]), special.logsumexp(terms, axis=1))
    np.testing.assert_allclose(est.predict_node_proba(xs[:, None]).sum(axis=1), 1.0, rtol=1e-12)


def dm_log_f(rows, alpha, coefficient):
    """ln f of a Dirichlet-multinomial cluster from its definition."""
    c = rows.sum(axis=0)
    out = (
        special.gammaln(alpha.sum())
        - special.gammaln(alpha.sum() + c.sum())
        + np.sum(special.gammaln(alpha + c) - special.gammaln(alpha))
    )
    if coefficient:
        out += np.sum(special.gammaln(rows.sum(axis=1) + 1)) - np.sum(special.gammaln(rows + 1))
    return float(out)


@pytest.mark.parametrize("coefficient", [False, True])
def test_dirichlet_multinomial_scores_and_responsibilities(coefficient):
    X = np.array([[3, 0, 1], [2, 1, 0], [0, 4, 1], [0, 3, 2], [1, 1, 1]], dtype=float)
    alpha = np.array([0.7, 1.0, 1.6])
    model = rt.DirichletMultinomial(alpha=alpha, multinomial_coefficient=coefficient)
    est = rt.BayesianRoseTree(model).fit(X)
    new = np.array([[2, 0, 0], [0, 2, 3], [1, 1, 1], [0, 0, 0]], dtype=float)
    log_p, resp = reference_scores(est, X, new, lambda r: dm_log_f(r, alpha, coefficient))
    np.testing.assert_allclose(est.score_samples(new), log_p, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(est.predict_node_proba(new), resp, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(est.predict_node_proba(new).sum(axis=1), 1.0, rtol=1e-12)
    if coefficient:
        # The probabilities of all count vectors with 4 draws sum to one.
        rows = np.array([c for c in itertools.product(range(5), repeat=3) if sum(c) == 4])
        assert special.logsumexp(est.score_samples(rows)) == pytest.approx(0.0, abs=1e-12)


def test_python_model_agrees_with_the_built_in_one():
    X = with_holes()
    built_in = rt.BayesianRoseTree(rt.BetaBernoulli(alpha=0.8, beta=1.2)).fit(X)
    python = rt.BayesianRoseTree(BernoulliInPython(0.8, 1.2)).fit(X)
    # The same clusters (children may be listed in another order, and node ids differ).
    clusters = [tuple(python.tree_.leaves(s)) for s in range(python.tree_.n_nodes)]
    ids = {tuple(built_in.tree_.leaves(s)): s for s in range(built_in.tree_.n_nodes)}
    assert sorted(clusters) == sorted(ids)
    order = [ids[c] for c in clusters]
    new = np.array([[1, 0, 1, 1, 0], [0, 0, np.nan, 1, 1]])
    np.testing.assert_allclose(python.score_samples(new), built_in.score_samples(new), rtol=1e-12)
    np.testing.assert_allclose(
        python.predict_node_proba(new),
        built_in.predict_node_proba(new)[:, order],
        rtol=1e-9,
        atol=1e-15,
    )
    full = BINARY.copy()
    full[3, 0] = 1.0
    assert python.log_predictive_missing(full) == pytest.approx(
        built_in.log_predictive_missing(full), rel=1e-12
    )
    with pytest.raises(rt.InvalidParameterError) as info:
        python.predict_missing_proba()
    assert info.value.parameter == "model"


def test_results_do_not_depend_on_n_jobs():
    rng = np.random.default_rng(4)
    protos = rng.random((3, 8)) < 0.5
    X = (protos[rng.integers(0, 3, 120)] ^ (rng.random((120, 8)) < 0.1)).astype(float)
    X[rng.random(X.shape) < 0.05] = np.nan
    new = (rng.random((40, 8)) < 0.5).astype(float)
    out = []
    for n_jobs in (1, 3):
        est = rt.BayesianRoseTree(n_jobs=n_jobs).fit(X)
        full = np.where(np.isnan(X), 1.0, X)
        out.append(
            (
                est.score_samples(new),
                est.predict_node_proba(new),
                est.predict_missing_proba(),
                est.log_predictive_missing(full),
            )
        )
    for a, b in zip(*out, strict=True):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------- missing entries


@pytest.mark.parametrize("mixing", MIXINGS)
def test_completions_of_the_missing_entries_sum_to_one(mixing):
    X = with_holes()
    est = rt.BayesianRoseTree(rt.BetaBernoulli(alpha=0.6, beta=1.1), mixing=mixing).fit(X)
    log_probs = []
    for bits in itertools.product([0.0, 1.0], repeat=len(HOLES)):
        full = X.copy()
        for (i, j), v in zip(HOLES, bits, strict=True):
            full[i, j] = v
        lp = est.log_predictive_missing(full)
        # eq 1.24 directly: the same tree evaluated on the completed data.
        direct = rt.log_evidence(
            full,
            est.tree_.to_nested(),
            model=rt.BetaBernoulli(alpha=0.6, beta=1.1),
            mixing=mixing,
        )
        assert lp == pytest.approx(direct - est.log_evidence_, abs=1e-10)
        log_probs.append(lp)
    assert special.logsumexp(log_probs) == pytest.approx(0.0, abs=1e-12)
    # Filling some of the entries: the completions of those sum to one as well.
    partial = [
        est.log_predictive_missing(np.where(np.isnan(X) & (np.arange(5) == 4), v, X))
        for v in (0.0, 1.0)
    ]
    assert special.logsumexp(partial) == pytest.approx(0.0, abs=1e-12)
    assert est.log_predictive_missing(X) == 0.0


def test_missing_probabilities_equal_single_entry_completions():
    X = with_holes()
    est = rt.BayesianRoseTree(rt.BetaBernoulli(alpha=0.9, beta=1.4), mixing="gamma").fit(X)
    imputed = est.predict_missing_proba()
    observed = ~np.isnan(X)
    np.testing.assert_array_equal(imputed[observed], X[observed])
    for i, j in HOLES:
        full = X.copy()
        full[i, j] = 1.0
        assert imputed[i, j] == pytest.approx(np.exp(est.log_predictive_missing(full)), rel=1e-12)
        assert 0.0 < imputed[i, j] < 1.0
    # A row like the rows of its cluster is imputed like them: row 3 (0 ? 0 1 1 with
    # column 0 missing) sits with rows that have 0 there.
    assert imputed[3, 0] < 0.5


def test_sparse_training_data_give_the_same_predictions():
    X = with_holes()
    dense = rt.BayesianRoseTree().fit(X)
    csr = sparse.csr_matrix(np.nan_to_num(X, nan=7.0))
    csr.data[csr.data == 7.0] = np.nan
    sparse_est = rt.BayesianRoseTree().fit(csr)
    assert sparse_est.tree_.to_nested() == dense.tree_.to_nested()
    new = all_binary_rows(5)
    np.testing.assert_array_equal(sparse_est.score_samples(new), dense.score_samples(new))
    imputed = sparse_est.predict_missing_proba()
    assert sparse.issparse(imputed)
    np.testing.assert_allclose(imputed.toarray(), dense.predict_missing_proba(), rtol=1e-15)
    full = np.where(np.isnan(X), 0.0, X)
    assert sparse_est.log_predictive_missing(full) == dense.log_predictive_missing(full)
    full[2, 2] = 0.0
    with pytest.raises(rt.InvalidDataError) as info:
        sparse_est.log_predictive_missing(full)
    assert (info.value.row, info.value.column) == (2, 2)


def test_fitted_estimator_survives_pickling_and_ignores_later_changes_to_the_data():
    X = with_holes()
    est = rt.BayesianRoseTree().fit(X)
    new = all_binary_rows(5)
    before = est.score_samples(new)
    X[:] = 0.0
    np.testing.assert_array_equal(est.score_samples(new), before)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.score_samples(new), before)
    np.testing.assert_array_equal(again.predict_missing_proba(), est.predict_missing_proba())


class _Coin(rt.ClusterModel):
    """A Python cluster model: independent Beta(1, 1)-Bernoulli features."""

    def log_marginal(self, X):
        from scipy.special import betaln

        k, n = X.sum(axis=0), X.shape[0]
        return float(np.sum(betaln(1 + k, 1 + n - k)))


@pytest.mark.parametrize(
    ("model", "as_sparse"),
    [
        (rt.BetaBernoulli(), False),
        (rt.BetaBernoulli(), True),
        (rt.NormalGamma(), True),
        (rt.NormalInverseWishart(), False),
        (rt.DirichletMultinomial(), False),
        (_Coin(), False),
    ],
)
def test_the_fit_keeps_its_own_state_whatever_happens_to_the_training_data(model, as_sparse):
    rng = np.random.default_rng(4)
    X = (rng.random((30, 5)) < 0.4).astype(float)
    given = sparse.csr_array(X) if as_sparse else X
    est = rt.BayesianRoseTree(model=model).fit(given)
    new = (rng.random((6, 5)) < 0.4).astype(float)
    before = (est.score_samples(new), est.predict_proba(new), est.predict_node_proba(new))
    # The caller's arrays change in place (dense, or the CSR parts).
    if as_sparse:
        given.data[:] = 7.0
    else:
        X[:] = 7.0
    after = (est.score_samples(new), est.predict_proba(new), est.predict_node_proba(new))
    for b, a in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)
    assert est.log_predictive_missing(np.asarray(est._fit.training_rows(0, 30))) == 0.0


def test_ctrl_c_interrupts_a_long_prediction(ctrl_c):
    rng = np.random.default_rng(2)
    est = rt.BayesianRoseTree(n_jobs=2).fit((rng.random((400, 128)) < 0.5).astype(float))
    new = (rng.random((4000, 128)) < 0.5).astype(float)
    # Ctrl-C at the prediction's first look for it (before its first block of rows), which
    # then waits until the calling thread has seen it.
    ctrl_c.at_poll(1)
    # "interrupted" is the core's own error: it noticed the signal mid-run (Python's
    # handler, run only after the call returned, would raise a bare KeyboardInterrupt).
    with pytest.raises(KeyboardInterrupt, match=r"^interrupted$"):
        est.score_samples(new)


# ---------------------------------------------------------------------------- bad input


def test_methods_need_a_fitted_estimator():
    est = rt.BayesianRoseTree()
    for call in (
        lambda: est.score_samples(BINARY),
        lambda: est.score(BINARY),
        lambda: est.predict_node_proba(BINARY),
        lambda: est.log_predictive_missing(BINARY),
        est.predict_missing_proba,
    ):
        with pytest.raises(rt.NotFittedError, match="not fitted"):
            call()
    assert issubclass(rt.NotFittedError, ValueError)
    assert issubclass(rt.NotFittedError, AttributeError)


def test_bad_input_names_the_problem():
    est = rt.BayesianRoseTree().fit(with_holes())
    with pytest.raises(rt.InvalidDataError, match="X has 4 features"):
        est.score_samples(np.ones((2, 4)))
    with pytest.raises(rt.InvalidDataError, match="X has 6 features"):
        est.predict_node_proba(np.ones((2, 6)))
    with pytest.raises(rt.InvalidDataError) as info:
        est.score_samples([[0, 1, 2, 0, 1]])
    assert (info.value.row, info.value.column) == (0, 2)
    with pytest.raises(rt.InvalidDataError, match="infinite"):
        est.score_samples([[0, 1, np.inf, 0, 1]])
    with pytest.raises(rt.InvalidDataError, match="shape"):
        est.log_predictive_missing(BINARY[:5])
    # A value that contradicts an observed training entry, and a NaN where one was observed.
    for i, j, v in [(1, 3, 1.0), (6, 0, np.nan)]:
        full = np.where(np.isnan(with_holes()), 0.0, BINARY)
        full[i, j] = v
        with pytest.raises(rt.InvalidDataError, match="differs") as info:
            est.log_predictive_missing(full)
        assert (info.value.row, info.value.column) == (i, j)
    full = np.where(np.isnan(with_holes()), 0.5, BINARY)
    with pytest.raises(rt.InvalidDataError) as info:
        est.log_predictive_missing(full)
    assert info.value.row == 0
    gauss = rt.BayesianRoseTree(rt.NormalInverseWishart()).fit(np.arange(12.0).reshape(6, 2))
    with pytest.raises(rt.InvalidDataError) as info:
        gauss.score_samples([[0.0, 1.0], [np.nan, 2.0]])
    assert (info.value.row, info.value.column) == (1, 0)
    with pytest.raises(rt.InvalidParameterError) as info:
        gauss.predict_missing_proba()
    assert info.value.parameter == "model"
    assert gauss.log_predictive_missing(np.arange(12.0).reshape(6, 2)) == 0.0


# ------------------------------------------------------------------------------ property


@given(
    data=st.data(),
    n=st.integers(2, 7),
    d=st.integers(1, 3),
    mixing=st.sampled_from(MIXINGS),
    binary=st.booleans(),
)
def test_property_predictive_and_imputation_are_normalised(data, n, d, mixing, binary):
    X = data.draw(binary_data(n, d, missing=True))
    est = rt.BayesianRoseTree(mixing=mixing, binary=binary).fit(X)
    rows = all_binary_rows(X.shape[1])
    assert special.logsumexp(est.score_samples(rows)) == pytest.approx(0.0, abs=1e-10)
    resp = est.predict_node_proba(rows)
    np.testing.assert_allclose(resp.sum(axis=1), 1.0, rtol=1e-12)
    imputed = est.predict_missing_proba()
    for i, j in zip(*np.nonzero(np.isnan(X)), strict=True):
        ones = X.copy()
        ones[i, j] = 1.0
        zeros = X.copy()
        zeros[i, j] = 0.0
        p1 = np.exp(est.log_predictive_missing(ones))
        p0 = np.exp(est.log_predictive_missing(zeros))
        assert p0 + p1 == pytest.approx(1.0, abs=1e-12)
        assert imputed[i, j] == pytest.approx(p1, rel=1e-10)
