"""Hyperparameter learning (BRT §1.4.2): gradients against finite differences of the
evidence, and the coordinate ascent's guarantees."""

import numpy as np
import pytest
import rosetree as rt
from hypothesis import given
from hypothesis import strategies as st
from rosetree.testing import binary_data, rose_trees

MIXINGS = ["brt", "gamma", "dp"]


def central_difference(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def with_value(model, name, index, value):
    """A copy of ``model`` with one hyperparameter (entry ``index`` of ``name``) replaced."""
    if isinstance(model, rt.NormalInverseWishart):
        fields = {"mu0": model.mu0, "kappa0": model.kappa0, "nu0": model.nu0, "psi0": model.psi0}
        if name == "psi0_scale":
            fields["psi0"] = np.asarray(model.psi0) * value
        else:
            fields[name] = value
        return rt.NormalInverseWishart(**fields)
    fields = {
        k: np.array(getattr(model, k), dtype=float) for k in ("alpha", "beta") if hasattr(model, k)
    }
    fields[name][index] = value
    return type(model)(**fields)


def check_gradient(X, tree, model, mixing, gamma=0.4, dp_alpha=1.3):
    kw = dict(mixing=mixing, gamma=gamma, dp_alpha=dp_alpha)
    g = rt.evidence_gradient(X, tree, model=model, **kw)
    assert g.log_evidence == pytest.approx(rt.log_evidence(X, tree, model=model, **kw), abs=1e-10)
    for name, grad in g.model.items():
        for i, analytic in enumerate(grad):
            base = 1.0 if name == "psi0_scale" else np.atleast_1d(getattr(model, name))[i]
            h = 1e-6 * base

            def ev(v, name=name, i=i):
                return rt.log_evidence(X, tree, model=with_value(model, name, i, v), **kw)

            fd = central_difference(ev, base, h)
            assert analytic == pytest.approx(fd, rel=1e-5, abs=1e-6), (name, i)
    theta = dp_alpha if mixing == "dp" else gamma
    key = "dp_alpha" if mixing == "dp" else "gamma"

    def ev_mix(v):
        return rt.log_evidence(X, tree, model=model, **{**kw, key: v})

    fd = central_difference(ev_mix, theta, 1e-6 * theta)
    assert g.mixing == pytest.approx(fd, rel=1e-5, abs=1e-6)


@given(
    st.integers(2, 7).flatmap(
        lambda n: st.tuples(binary_data(n, 3, missing=True), rose_trees(range(n)))
    ),
    st.sampled_from(MIXINGS),
)
def test_beta_bernoulli_gradient_matches_finite_differences(case, mixing):
    X, tree = case
    model = rt.BetaBernoulli(alpha=[0.6, 1.4, 2.2], beta=[1.1, 0.4, 3.0])
    check_gradient(X, tree, model, mixing)


@pytest.mark.parametrize("mixing", MIXINGS)
def test_dirichlet_multinomial_gradient_matches_finite_differences(mixing):
    X = np.random.default_rng(3).integers(0, 6, size=(7, 4)).astype(float)
    tree = [[0, [1, 2]], [3, 4, 5], 6]
    check_gradient(X, tree, rt.DirichletMultinomial(alpha=[0.5, 1.0, 2.0, 0.7]), mixing)


@pytest.mark.parametrize("mixing", MIXINGS)
def test_normal_inverse_wishart_gradient_matches_finite_differences(mixing):
    X = np.random.default_rng(4).normal(size=(8, 2))
    tree = [[0, 1, 2], [[3, 4], 5], [6, 7]]
    model = rt.NormalInverseWishart(
        mu0=[0.2, -0.1], kappa0=0.3, nu0=4.0, psi0=[[1.5, 0.2], [0.2, 0.9]]
    )
    check_gradient(X, tree, model, mixing)


def clustered_binary(seed=0, n_per=12, d=10):
    rng = np.random.default_rng(seed)
    protos = rng.random((3, d)) < 0.5
    rows = [np.where(rng.random(d) < 0.1, ~p, p) for p in protos for _ in range(n_per)]
    return np.array(rows, dtype=float)


@pytest.mark.parametrize(("mixing", "binary"), [("brt", False), ("gamma", True), ("dp", True)])
def test_learning_never_loses_evidence_and_ends_at_a_stationary_point(mixing, binary):
    X = clustered_binary()
    # A start shared by all features, which the tied ascent keeps.
    model = rt.BetaBernoulli(alpha=1.0, beta=1.0)
    start = rt.BayesianRoseTree(model, mixing=mixing, binary=binary).fit(X)
    est = rt.BayesianRoseTree(
        model, mixing=mixing, binary=binary, learn_hyperparameters=True, tie_hyperparameters=True
    ).fit(X)
    trace = np.array(est.evidence_trace_)
    assert trace[0] == pytest.approx(start.log_evidence_)
    assert np.all(np.diff(trace) >= -1e-9)
    assert est.log_evidence_ == pytest.approx(trace[-1])
    assert est.log_evidence_ > start.log_evidence_ + 1.0
    # The learned hyperparameters are the ones of the fitted tree.
    again = rt.log_evidence(
        X, est.tree_, model=est.model_, mixing=mixing, gamma=est.gamma_, dp_alpha=est.dp_alpha_
    )
    assert again == pytest.approx(est.log_evidence_, rel=1e-12)
    # Tied: one alpha and one beta, at a zero of the gradient (summed over features).
    alpha, beta = np.atleast_1d(est.model_.alpha), np.atleast_1d(est.model_.beta)
    assert alpha.size == beta.size == 1
    g = rt.evidence_gradient(
        X, est.tree_, model=est.model_, mixing=mixing, gamma=est.gamma_, dp_alpha=est.dp_alpha_
    )
    assert alpha[0] * g.model["alpha"].sum() == pytest.approx(0.0, abs=1e-3)
    assert beta[0] * g.model["beta"].sum() == pytest.approx(0.0, abs=1e-3)
    theta = est.dp_alpha_ if mixing == "dp" else est.gamma_ * (1 - est.gamma_)
    assert theta * g.mixing == pytest.approx(0.0, abs=1e-3)


def test_per_feature_learning_and_restarts():
    X = clustered_binary(seed=1, n_per=8, d=6)
    one = rt.BayesianRoseTree(learn_hyperparameters=True).fit(X)
    assert np.atleast_1d(one.model_.alpha).shape == (6,)
    assert len(one.restart_log_evidences_) == 1
    more = rt.BayesianRoseTree(learn_hyperparameters=True, n_restarts=3, random_state=5).fit(X)
    assert len(more.restart_log_evidences_) == 4
    # The first start is the given hyperparameters, so restarts can only help.
    assert more.restart_log_evidences_[0] == pytest.approx(one.log_evidence_)
    assert more.log_evidence_ == pytest.approx(max(more.restart_log_evidences_))
    # Per-feature hyperparameters fit at least as well as tied ones.
    tied = rt.BayesianRoseTree(learn_hyperparameters=True, tie_hyperparameters=True).fit(X)
    assert one.log_evidence_ >= tied.log_evidence_ - 1e-6
    # Deterministic for a given random_state.
    same = rt.BayesianRoseTree(learn_hyperparameters=True, n_restarts=3, random_state=5).fit(X)
    assert same.log_evidence_ == more.log_evidence_
    assert same.tree_.to_nested() == more.tree_.to_nested()


@pytest.mark.parametrize(
    "model", [rt.BetaBernoulli(alpha=1.0, beta=1.0), rt.DirichletMultinomial()]
)
def test_per_feature_learning_starts_from_the_shared_optimum(model):
    X = clustered_binary(seed=3, n_per=8, d=6)
    tied = rt.learn_hyperparameters(X, model=model, tie=True)
    staged = rt.learn_hyperparameters(X, model=model)
    # Stage one is the tied ascent itself; stage two only climbs from its end.
    assert staged.trace[: len(tied.trace)] == tied.trace
    assert len(staged.trace) > len(tied.trace)
    assert np.all(np.diff(staged.trace) >= -1e-9)
    assert staged.log_evidence >= tied.log_evidence
    assert np.ptp(np.atleast_1d(staged.model.alpha)) > 0  # really per feature at the end
    # A start that already differs between features is ascended per feature directly.
    a0 = np.linspace(0.5, 2.0, 6)
    direct = rt.learn_hyperparameters(X, model=rt.BetaBernoulli(alpha=a0, beta=1.0))
    first = rt.BayesianRoseTree(model=rt.BetaBernoulli(alpha=a0, beta=1.0)).fit(X)
    assert direct.trace[0] == pytest.approx(first.log_evidence_)
    assert direct.trace[1] != pytest.approx(tied.trace[1])


def test_learning_gaussian_and_count_models():
    rng = np.random.default_rng(2)
    X = np.vstack([rng.normal(m, 0.3, size=(10, 2)) for m in (-2.0, 0.0, 2.0)])
    start = rt.BayesianRoseTree(model=rt.NormalInverseWishart()).fit(X)
    est = rt.BayesianRoseTree(model=rt.NormalInverseWishart(), learn_hyperparameters=True).fit(X)
    assert est.log_evidence_ > start.log_evidence_
    assert isinstance(est.model_, rt.NormalInverseWishart) and est.model_.nu0 > 1.0
    C = rng.poisson([[5, 1, 1]] * 8 + [[1, 1, 5]] * 8).astype(float)
    start = rt.BayesianRoseTree(model=rt.DirichletMultinomial()).fit(C)
    est = rt.BayesianRoseTree(model=rt.DirichletMultinomial(), learn_hyperparameters=True).fit(C)
    assert est.log_evidence_ > start.log_evidence_
    assert np.atleast_1d(est.model_.alpha).shape == (3,)


def test_learning_rejects_what_it_cannot_do():
    class Coin(rt.ClusterModel):
        def log_marginal(self, X):
            return 0.0

    X = clustered_binary(n_per=3)
    with pytest.raises(rt.InvalidParameterError, match="built-in model") as err:
        rt.BayesianRoseTree(model=Coin(), learn_hyperparameters=True).fit(X)
    assert err.value.parameter == "model"
    with pytest.raises(rt.InvalidParameterError) as err:
        rt.BayesianRoseTree(learn_hyperparameters=True, n_restarts=-1).fit(X)
    assert err.value.parameter == "n_restarts"
    with pytest.raises(rt.InvalidParameterError) as err:
        rt.evidence_gradient(X, [[0, 1], 2, 3, 4, 5, 6, 7, 8], model=Coin())
    assert err.value.parameter == "model"


def test_prediction_uses_the_learned_hyperparameters():
    from scipy.special import betaln, logsumexp

    X = clustered_binary(seed=3, n_per=6, d=5)
    est = rt.BayesianRoseTree(learn_hyperparameters=True).fit(X)
    a = np.broadcast_to(est.model_.alpha, 5)
    b = np.broadcast_to(est.model_.beta, 5)
    assert not np.allclose(a, 1.0)
    new = np.array([[1, 0, 1, 1, 0], [0, 0, 0, 1, 1]], dtype=float)
    log_w = est.tree_.log_cluster_weights()
    for x, got in zip(new, est.score_samples(new), strict=True):
        terms = []
        for node in range(est.tree_.n_nodes):
            rows = X[est.tree_.leaves(node)]
            k, n = rows.sum(axis=0), rows.shape[0]
            pred = betaln(a + k + x, b + n - k + 1 - x) - betaln(a + k, b + n - k)
            terms.append(log_w[node] + pred.sum())
        assert got == pytest.approx(logsumexp(terms), rel=1e-10)


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"gamma": 1.0}, "gamma"),
        ({"gamma": 0.0}, "gamma"),
        ({"gamma": float("nan")}, "gamma"),
        ({"mixing": "dp", "dp_alpha": -1.0}, "dp_alpha"),
        ({"mixing": "dp", "dp_alpha": float("inf")}, "dp_alpha"),
    ],
)
def test_a_learnt_mixing_parameter_must_start_in_its_domain(kw, name):
    X = (np.random.default_rng(0).random((8, 3)) > 0.5).astype(float)
    with pytest.raises(rt.InvalidParameterError) as err:
        rt.BayesianRoseTree(learn_hyperparameters=True, **kw).fit(X)
    assert err.value.parameter == name


def test_an_extreme_starting_gamma_is_kept_and_never_lost():
    # A start outside the search box exp(+-12) is searched from as given, not clipped to the
    # box (a clipped start is another prior, whose evidence may be lower).
    X = (np.random.default_rng(0).random((8, 3)) > 0.5).astype(float)
    start = rt.BayesianRoseTree(gamma=5e-324).fit(X).log_evidence_
    tiny = rt.BayesianRoseTree(learn_hyperparameters=True, gamma=5e-324).fit(X)
    assert tiny.log_evidence_ >= start
    assert 0 < tiny.gamma_ < 1
