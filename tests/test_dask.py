"""rosetree.dask on a LocalCluster of two worker processes."""

import pickle
import threading

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import dask  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
import rosetree as rt  # noqa: E402
import rosetree.dask as rtd  # noqa: E402
from rosetree.exceptions import (  # noqa: E402
    InvalidDataError,
    InvalidDataTypeError,
    InvalidParameterError,
)


@pytest.fixture(scope="module")
def client():
    # Worker processes inherit the environment, so they import the same rosetree.
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


def hierarchical(n, d=24, seed=0):
    """Binary rows from 3 super-prototypes → 9 prototypes, 8 % of the bits flipped."""
    rng = np.random.default_rng(seed)
    supers = rng.random((3, d)) < 0.5
    protos = supers[np.arange(9) % 3] ^ (rng.random((9, d)) < 0.2)
    return (protos[rng.integers(9, size=n)] ^ (rng.random((n, d)) < 0.08)).astype(float)


#: Small parts, so that a few thousand rows are split over many tasks and levels.
SMALL = dict(sample_size=300, part_rows=400, exact_below=200)


def test_stitched_evidence_is_the_evidence_of_the_tree(client):
    X = hierarchical(2400)
    model = rt.BetaBernoulli(alpha=0.6, beta=1.2)
    est = rtd.BayesianRoseTree(model=model, chunk_rows=500, random_state=3, **SMALL).fit(X)
    assert est.n_parts_ > 5
    assert est.tree_.n_leaves == len(X)
    direct = rt.log_evidence(X, est.tree_, model=est.model_)
    assert est.log_evidence_ == pytest.approx(direct, rel=1e-10, abs=0)
    # The model was given in full, so it is the one fitted.
    assert est.model_ == model


def noisy(X, scale=0.3):
    return X + np.random.default_rng(1).normal(scale=scale, size=X.shape)


@pytest.mark.parametrize(
    ("model", "mixing", "make"),
    [
        (rt.NormalGamma(), "brt", lambda X: noisy(X * 3)),
        (rt.NormalInverseWishart(), "dp", lambda X: noisy(X[:, :6] * 2)),
        (rt.DirichletMultinomial(alpha=0.5), "gamma", lambda X: X * 2 + X[:, ::-1]),
        (rt.BetaBernoulli(), "dp", lambda X: X),
    ],
)
def test_stitched_evidence_for_every_conjugate_model(client, model, mixing, make):
    X = make(hierarchical(1500, d=12, seed=4))
    est = rtd.BayesianRoseTree(model=model, mixing=mixing, chunk_rows=400, **SMALL).fit(X)
    assert est.n_parts_ > 1
    direct = rt.log_evidence(X, est.tree_, model=est.model_, mixing=mixing)
    assert est.log_evidence_ == pytest.approx(direct, rel=1e-9, abs=0)
    # Data-driven defaults were resolved once, from the sample, for every part.
    assert all(getattr(est.model_, f) is not None for f in est.model_.__dataclass_fields__)


def test_one_part_is_the_single_machine_fit(client):
    X = hierarchical(700, seed=2)
    local = rt.BayesianRoseTree(approximate=True, exact_below=250, random_state=9).fit(X)
    est = rtd.BayesianRoseTree(exact_below=250, random_state=9).fit(da.from_array(X))
    assert est.n_parts_ == 1
    assert est.tree_.children == local.tree_.children
    assert est.log_evidence_ == local.log_evidence_
    np.testing.assert_array_equal(est.labels_.compute(), local.labels_)
    np.testing.assert_array_equal(est.cluster_nodes_, local.cluster_nodes_)
    # Prediction as the single-machine estimator's.
    new = hierarchical(50, seed=7)
    np.testing.assert_allclose(est.predict_proba(new).compute(), local.predict_proba(new))
    np.testing.assert_array_equal(est.predict(new).compute(), local.predict(new))


def test_n_clusters_union_clusters_predict_as_the_single_machine_fit(client):
    # The toy tree's classes are multi-way nodes: 5 clusters need a union of siblings.
    X = rt.datasets.load_toy().data
    kw = dict(model=rt.BetaBernoulli(alpha=0.7, beta=0.9), n_clusters=5, random_state=1)
    local = rt.BayesianRoseTree(approximate=True, **kw).fit(X)
    est = rtd.BayesianRoseTree(**kw).fit(X)
    assert est.tree_.children == local.tree_.children
    assert -1 in est.cluster_nodes_
    np.testing.assert_array_equal(est.cluster_nodes_, local.cluster_nodes_)
    for a, b in zip(est.cluster_members_, local.cluster_members_, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(est.labels_.compute(), local.labels_)
    new = np.vstack([X[::7], 1 - X[:3]])
    np.testing.assert_allclose(est.predict_proba(new).compute(), local.predict_proba(new))
    np.testing.assert_array_equal(est.predict(new).compute(), local.predict(new))


def test_score_samples_is_the_flat_clusters_predictive(client):
    X = hierarchical(1200, seed=5)
    est = rtd.BayesianRoseTree(model=rt.BetaBernoulli(), chunk_rows=300, **SMALL).fit(X)
    new = hierarchical(6, seed=8)
    got = est.score_samples(da.from_array(new, chunks=4))
    assert isinstance(got, da.Array)
    got = got.compute()
    # Independently: ln Σ_c (n_c / n) f(D_c ∪ {x}) / f(D_c) from the clusters' rows.
    labels = est.labels_.compute()
    for x, value in zip(new, got, strict=True):
        terms = []
        for k in range(len(est.cluster_nodes_)):
            rows = X[labels == k]
            ratio = est.model_.log_marginal(np.vstack([rows, x])) - est.model_.log_marginal(rows)
            terms.append(np.log(len(rows) / len(X)) + ratio)
        assert value == pytest.approx(np.logaddexp.reduce(terms), rel=1e-9)
    assert est.score(new) == pytest.approx(np.mean(got), rel=1e-12)


def test_same_seed_same_tree_for_any_chunking_and_workers(client):
    X = hierarchical(2000, seed=6)
    kw = dict(model=rt.BetaBernoulli(), random_state=11, **SMALL)
    ref = rtd.BayesianRoseTree(chunk_rows=2000, **kw).fit(X)
    ragged = da.concatenate([da.from_array(X[:123]), da.from_array(X[123:], chunks=(611, 24))])
    for data in (da.from_array(X, chunks=(333, 24)), ragged):
        assert rtd.BayesianRoseTree(**kw).fit(data).tree_.children == ref.tree_.children
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    assert rtd.BayesianRoseTree(**kw).fit(frame).tree_.children == ref.tree_.children
    # One worker thread in this process instead of two processes.
    with (
        distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as one,
        distributed.Client(one, set_as_default=False) as other,
    ):
        alone = rtd.BayesianRoseTree(**kw).fit(da.from_array(X, chunks=700), client=other)
    assert alone.tree_.children == ref.tree_.children
    assert alone.log_evidence_ == ref.log_evidence_
    # Another seed gives another sample, and here another tree.
    kw["random_state"] = 12
    assert rtd.BayesianRoseTree(**kw).fit(X).tree_.children != ref.tree_.children


def test_bool_rows_stay_bool_on_the_workers_and_give_the_same_tree(client):
    X = hierarchical(2000, seed=6)
    kw = dict(model=rt.BetaBernoulli(), random_state=11, chunk_rows=500, **SMALL)
    ref = rtd.BayesianRoseTree(**kw).fit(X)
    packed = rtd.BayesianRoseTree(**kw).fit(X.astype(bool))
    assert packed.n_parts_ > 1
    assert packed.tree_.children == ref.tree_.children
    assert packed.log_evidence_ == pytest.approx(ref.log_evidence_, rel=1e-12)
    rows = da.from_array(X[:300].astype(bool), chunks=100)
    np.testing.assert_array_equal(packed.predict(rows).compute(), ref.predict(X[:300]).compute())
    # The rows a worker keeps for its parts: a byte an entry, not eight.
    _, kept = rtd._piece(X[:10].astype(bool), 0, 0, 24, np.dtype(bool), False, None, True)
    assert kept.dtype == np.bool_
    np.testing.assert_array_equal(kept, X[:10])


def test_workers_restarted_mid_fit_do_not_change_the_tree(client, monkeypatch):
    X = hierarchical(1600, seed=3)
    kw = dict(model=rt.BetaBernoulli(), chunk_rows=400, random_state=2, **SMALL)
    ref = rtd.BayesianRoseTree(**kw).fit(X)
    submit_part = rtd.BayesianRoseTree._submit_part
    restarts = []

    def restart_then_submit(self, client, *args):
        # The rows routed to the groups are in the workers' memory now: lose them, once.
        if not restarts:
            workers = list(client.scheduler_info()["workers"])
            client.restart_workers(workers)
            restarts.append(workers)
        return submit_part(self, client, *args)

    monkeypatch.setattr(rtd.BayesianRoseTree, "_submit_part", restart_then_submit)
    again = rtd.BayesianRoseTree(**kw).fit(X)
    assert restarts
    assert again.tree_.children == ref.tree_.children
    assert again.log_evidence_ == ref.log_evidence_


def _fit_killing_a_worker(client, fit):
    """``fit()`` run while a worker fitting a part is restarted (again until one is seen)."""
    killed = None
    # A part may finish before it is seen running: fit again until one is killed.
    for _ in range(5):
        result = {}

        def run(into=result):
            into["est"] = fit()

        thread = threading.Thread(target=run)
        thread.start()
        while thread.is_alive() and killed is None:
            for worker, keys in client.processing().items():
                if any(str(k).startswith("rosetree-part") for k in keys):
                    # On a loaded machine the new worker may take long to come up; the
                    # fit goes on with the other one either way.
                    client.restart_workers([worker], timeout=300, raise_for_error=False)
                    killed = worker
                    break
            else:
                threading.Event().wait(0.005)
        thread.join()
        if killed is not None:
            break
    assert killed is not None, "no part was seen running"
    return result["est"]


def test_worker_killed_while_a_part_is_fitted(client):
    X = hierarchical(3000, d=32, seed=9)
    kw = dict(model=rt.BetaBernoulli(), chunk_rows=1000, random_state=4, sample_size=500)
    kw.update(part_rows=1500, exact_below=1500)
    ref = rtd.BayesianRoseTree(**kw).fit(X)
    est = _fit_killing_a_worker(client, lambda: rtd.BayesianRoseTree(**kw).fit(X))
    assert est.tree_.children == ref.tree_.children
    assert est.log_evidence_ == ref.log_evidence_


def test_the_client_never_holds_the_data(client, monkeypatch):
    n, d, size = 30000, 32, 300

    def rows(block_id=None):
        rng = np.random.default_rng(block_id[0])
        return (rng.random((3000, d)) < np.where(rng.random(d) < 0.5, 0.8, 0.1)).astype(float)

    X = da.map_blocks(rows, chunks=((3000,) * 10, (d,)), dtype=np.float64)
    largest = [0]

    def check(value):
        if isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype == np.float64:
            largest[0] = max(largest[0], value.shape[0])
        elif isinstance(value, (list, tuple)):
            for v in value:
                check(v)
        return value

    gather, result = distributed.Client.gather, distributed.Future.result
    monkeypatch.setattr(distributed.Client, "gather", lambda *a, **k: check(gather(*a, **k)))
    monkeypatch.setattr(distributed.Future, "result", lambda *a, **k: check(result(*a, **k)))

    def refuse(*args, **kwargs):
        raise AssertionError("the whole array was computed on the client")

    monkeypatch.setattr(da.Array, "compute", refuse)
    monkeypatch.setattr(da.Array, "__array__", refuse)
    est = rtd.BayesianRoseTree(
        model=rt.BetaBernoulli(), sample_size=size, part_rows=4000, exact_below=1000
    ).fit(X)
    assert est.tree_.n_leaves == n
    assert 0 < largest[0] <= size
    monkeypatch.undo()
    # Prediction is lazy, and stays on the workers until asked for.
    labels = est.predict(X)
    assert isinstance(labels, da.Array)
    assert labels.shape == (n,)


def test_pickles_small_and_predicts_after(client):
    X = hierarchical(2000, d=64, seed=12)
    est = rtd.BayesianRoseTree(model=rt.BetaBernoulli(), chunk_rows=500, **SMALL).fit(X)
    blob = pickle.dumps(est)
    assert len(blob) < X.nbytes / 3
    back = pickle.loads(blob)
    assert back.tree_.to_newick() == est.tree_.to_newick()
    np.testing.assert_array_equal(back.tree_.to_linkage(), est.tree_.to_linkage())
    assert back.log_evidence_ == est.log_evidence_
    np.testing.assert_array_equal(back.labels_.compute(), est.labels_.compute())
    new = X[:300]
    np.testing.assert_array_equal(back.predict(new).compute(), est.predict(new).compute())
    # Rows of a training cluster are mostly predicted into it.
    assert np.mean(back.predict(new).compute() == est.labels_.compute()[:300]) > 0.9


def test_a_chunk_with_nan_is_named(client):
    X = hierarchical(900)
    X[650, 3] = np.nan
    with pytest.raises(InvalidDataError, match=r"chunk 3 \(rows 600\.\.800\).*row 650, column 3"):
        rtd.BayesianRoseTree(model=rt.NormalInverseWishart(), chunk_rows=200).fit(X)
    # A value the beta-Bernoulli model does not take, found on a worker by the core.
    X[650, 3] = 0.5
    with pytest.raises(InvalidDataError, match=r"chunk 3 \(rows 600\.\.800\), row 650"):
        rtd.BayesianRoseTree(model=rt.BetaBernoulli(), chunk_rows=200, **SMALL).fit(X)
    with pytest.raises(InvalidDataError, match=r"chunk 3 \(rows 600\.\.800\), row 650"):
        rtd.BayesianRoseTree(model=rt.BetaBernoulli(), chunk_rows=200).fit(X)


def test_a_chunk_of_another_dtype_is_named(client):
    X = hierarchical(600)

    def block(k):
        rows = X[k * 200 : (k + 1) * 200]
        return rows.astype(np.int64) if k == 2 else rows

    parts = [
        da.from_delayed(dask.delayed(block)(k), shape=(200, 24), dtype=np.float64) for k in range(3)
    ]
    with pytest.raises(InvalidDataTypeError, match=r"chunk 2 \(rows 400\.\.600\) has dtype int64"):
        rtd.BayesianRoseTree(model=rt.BetaBernoulli()).fit(da.concatenate(parts))


def test_unknown_chunk_lengths_are_refused(client):
    frame = dd.from_pandas(pd.DataFrame(hierarchical(300)), npartitions=3)
    with pytest.raises(InvalidDataError, match=r"unknown length \(chunk 0 first\)"):
        rtd.BayesianRoseTree().fit(frame.to_dask_array())
    with pytest.raises(InvalidDataTypeError, match="column 'a'"):
        rtd.BayesianRoseTree().fit(dd.from_pandas(pd.DataFrame({"a": ["x", "y"]}), 1))


def test_a_closed_client_is_refused(client):
    closed = distributed.Client(client.scheduler.address, set_as_default=False)
    closed.close()
    with pytest.raises(InvalidParameterError, match="client is closed") as info:
        rtd.BayesianRoseTree().fit(hierarchical(100), client=closed)
    assert info.value.parameter == "client"


def test_models_without_statistics_and_bad_options_are_refused(client):
    class Coin(rt.ClusterModel):
        def log_marginal(self, X):
            return -float(np.sum(X))

    with pytest.raises(InvalidParameterError, match="conjugate cluster model"):
        rtd.BayesianRoseTree(model=Coin()).fit(hierarchical(50))
    with pytest.raises(InvalidParameterError, match="part_rows"):
        rtd.BayesianRoseTree(part_rows=1).fit(hierarchical(50))
    with pytest.raises(rt.NotFittedError):
        rtd.BayesianRoseTree().predict(hierarchical(5))


def test_constant_columns_are_left_out_as_on_one_machine(client):
    X = hierarchical(1200, d=8, seed=13) * 2 + np.random.default_rng(2).normal(size=(1200, 8))
    X[:, 5] = 3.0
    with pytest.warns(rt.DegenerateModelWarning, match="constant column"):
        est = rtd.BayesianRoseTree(model=rt.NormalGamma(), chunk_rows=300, **SMALL).fit(X)
    np.testing.assert_array_equal(est.constant_features_, [5])
    assert est.n_parts_ > 1
    kept = np.delete(X, 5, axis=1)
    assert est.log_evidence_ == pytest.approx(
        rt.log_evidence(kept, est.tree_, model=est.model_), rel=1e-9, abs=0
    )
    # Prediction takes rows with every column, as fitted.
    predicted = est.predict(X[:200]).compute()
    assert np.mean(predicted == est.labels_[:200].compute()) > 0.9


def test_whole_unit_measurements_get_the_model_they_get_on_one_machine(client):
    # Positive integers (lengths in millimetres) are measurements, not counts, on the
    # sample the client chooses from as on one machine.
    rng = np.random.default_rng(5)
    mm = np.vstack([rng.normal(c, 4.0, size=(100, 3)) for c in (40.0, 60.0, 80.0)]).round()
    est = rtd.BayesianRoseTree(random_state=0).fit(da.from_array(mm, chunks=100))
    local = rt.BayesianRoseTree(approximate=True, random_state=0).fit(mm)
    assert local.model_selection_["data"] == "real"
    assert type(est.model_) is type(local.model_) is not rt.DirichletMultinomial
    assert est.log_evidence_ == local.log_evidence_


def test_many_columns_in_one_unit_get_the_shared_precision_as_on_one_machine(client):
    # Three groups apart in 2 of 30 columns: the shared precision, resolved on the sample
    # (its one rate b0 a number), fits every part as on one machine.
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(3), 100)
    X = rng.normal(size=(300, 30))
    X[:, 0] += 4.0 * (y == 1)
    X[:, 1] += 4.0 * (y == 2)
    est = rtd.BayesianRoseTree(random_state=0).fit(da.from_array(X, chunks=100))
    local = rt.BayesianRoseTree(approximate=True, random_state=0).fit(X)
    assert local.model_ == rt.NormalGamma(shared_precision=True)
    assert est.model_.shared_precision is True and np.ndim(est.model_.b0) == 0
    assert est.log_evidence_ == local.log_evidence_


# ---------------------------------------------------------------------- the coalescent
def blobs(n, d=4, seed=0, missing=0.0):
    """Gaussian rows around 6 centres in 2 super-clusters; a fraction ``missing`` is NaN."""
    rng = np.random.default_rng(seed)
    supers = rng.normal(scale=8.0, size=(2, d))
    centres = supers[np.arange(6) % 2] + rng.normal(scale=2.5, size=(6, d))
    X = centres[rng.integers(6, size=n)] + rng.normal(size=(n, d))
    X[rng.random(X.shape) < missing] = np.nan
    return X


def categories(n, d=10, seed=0):
    """Categorical rows (3 states) copied from 4 prototypes with 15 % of entries redrawn."""
    rng = np.random.default_rng(seed)
    protos = rng.integers(3, size=(4, d))
    X = protos[rng.integers(4, size=n)]
    redraw = rng.random(X.shape) < 0.15
    X[redraw] = rng.integers(3, size=int(redraw.sum()))
    return X.astype(float)


COAL_SMALL = dict(sample_size=300, part_rows=400, exact_below=200, approx_sample=100)


def coal_log_joint(X, est):
    return rt.coalescent_log_joint(
        X,
        est.tree_,
        likelihood=est.likelihood,
        Lambda=est.Lambda_,
        root=est.root,
        noise=est.noise_,
    )


@pytest.mark.parametrize(
    ("likelihood", "make"),
    [
        ("brownian", lambda: blobs(2400, seed=1)),
        ("brownian", lambda: blobs(2400, seed=2, missing=0.1)),
        ("multinomial", lambda: categories(2400, seed=3)),
    ],
)
def test_coalescent_stitched_log_joint_is_that_of_the_tree(client, likelihood, make):
    X = make()
    est = rtd.KingmanCoalescent(likelihood, chunk_rows=500, random_state=3, **COAL_SMALL).fit(X)
    assert est.n_parts_ > 5
    assert est.tree_.n_leaves == len(X)
    # The exact log joint of the tree returned, evaluated here from every row.
    assert est.log_joint_ == pytest.approx(coal_log_joint(X, est), rel=1e-10, abs=0)
    # The log-likelihood ratios, from the parts' evidence and the top's summaries.
    from rosetree import _core
    from rosetree.coalescent import _lambda, _split_llr

    model = _core.CoalescentModel(
        X, likelihood=likelihood, lambda_=_lambda(est.Lambda_), noise=est.noise_
    )
    evidence = model.subtree_evidence(X, est.tree_._structure)
    np.testing.assert_allclose(
        est.split_llr_, _split_llr(est.tree_, np.asarray(evidence)), rtol=1e-9, atol=1e-9
    )
    assert est.n_clusters_ >= 2


@pytest.mark.parametrize(
    ("likelihood", "X"),
    [
        ("brownian", blobs(700, seed=4, missing=0.05)),
        # A constant column, which both leave out of the flat clusters (kept, it would give
        # 4 clusters instead of 6).
        ("brownian", np.column_stack([blobs(700, seed=8, missing=0.05), np.full(700, 3.0)])),
        ("multinomial", categories(700, seed=5)),
    ],
)
def test_coalescent_one_part_is_the_single_machine_fit(client, likelihood, X):
    kw = dict(likelihood=likelihood, exact_below=250, approx_sample=100, random_state=9)
    local = rt.KingmanCoalescent(approximate=True, **kw).fit(X)
    est = rtd.KingmanCoalescent(**kw).fit(da.from_array(X, chunks=(150, -1)))
    assert est.n_parts_ == 1
    assert est.tree_.children == local.tree_.children
    np.testing.assert_array_equal(est.tree_.heights, local.tree_.heights)
    assert est.log_joint_ == pytest.approx(local.log_joint_, rel=1e-12, abs=0)
    assert est.Lambda_ == local.Lambda_
    np.testing.assert_allclose(est.split_llr_, local.split_llr_, rtol=1e-10)
    np.testing.assert_array_equal(est.labels_.compute(), local.labels_)
    new = X[::7]
    np.testing.assert_allclose(est.predict_proba(new).compute(), local.predict_proba(new))
    np.testing.assert_array_equal(est.predict(new).compute(), local.predict(new))
    np.testing.assert_array_equal(est.cluster_labels(), local.cluster_labels())


def test_coalescent_same_tree_for_any_chunking_and_workers(client):
    X = blobs(1800, seed=6)
    kw = dict(random_state=5, **COAL_SMALL)
    ref = rtd.KingmanCoalescent(chunk_rows=2000, **kw).fit(X)
    assert ref.n_parts_ > 3
    ragged = da.concatenate([da.from_array(X[:123]), da.from_array(X[123:], chunks=(611, 4))])
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    for data in (da.from_array(X, chunks=(333, 4)), ragged, frame):
        again = rtd.KingmanCoalescent(**kw).fit(data)
        assert again.tree_.children == ref.tree_.children
        assert again.log_joint_ == ref.log_joint_
    with (
        distributed.LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as one,
        distributed.Client(one, set_as_default=False) as other,
    ):
        alone = rtd.KingmanCoalescent(**kw).fit(da.from_array(X, chunks=700), client=other)
    assert alone.tree_.children == ref.tree_.children
    np.testing.assert_array_equal(alone.tree_.heights, ref.tree_.heights)
    assert alone.log_joint_ == ref.log_joint_


def test_coalescent_workers_restarted_mid_fit_do_not_change_the_tree(client, monkeypatch):
    X = blobs(1600, seed=7)
    kw = dict(chunk_rows=400, random_state=2, **COAL_SMALL)
    ref = rtd.KingmanCoalescent(**kw).fit(X)
    submit_part = rtd.KingmanCoalescent._submit_part
    restarts = []

    def restart_then_submit(self, client, *args):
        if not restarts:
            workers = list(client.scheduler_info()["workers"])
            client.restart_workers(workers)
            restarts.append(workers)
        return submit_part(self, client, *args)

    monkeypatch.setattr(rtd.KingmanCoalescent, "_submit_part", restart_then_submit)
    again = rtd.KingmanCoalescent(**kw).fit(X)
    assert restarts
    assert again.tree_.children == ref.tree_.children
    assert again.log_joint_ == ref.log_joint_


def test_coalescent_worker_killed_while_a_part_is_fitted(client):
    X = blobs(3000, d=16, seed=10)
    kw = dict(chunk_rows=1000, random_state=4, sample_size=500, part_rows=1500)
    kw.update(exact_below=1500)
    ref = rtd.KingmanCoalescent(**kw).fit(X)
    est = _fit_killing_a_worker(client, lambda: rtd.KingmanCoalescent(**kw).fit(X))
    assert est.tree_.children == ref.tree_.children
    assert est.log_joint_ == ref.log_joint_


def test_coalescent_client_never_holds_the_data(client, monkeypatch):
    n, d, size = 24000, 8, 300

    def rows(block_id=None):
        rng = np.random.default_rng(block_id[0])
        centres = np.random.default_rng(0).normal(scale=5.0, size=(5, d))
        return centres[rng.integers(5, size=3000)] + rng.normal(size=(3000, d))

    X = da.map_blocks(rows, chunks=((3000,) * 8, (d,)), dtype=np.float64)
    largest = [0]

    def check(value):
        if isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype == np.float64:
            largest[0] = max(largest[0], value.shape[0])
        elif isinstance(value, (list, tuple, dict)):
            for v in value.values() if isinstance(value, dict) else value:
                check(v)
        return value

    gather, result = distributed.Client.gather, distributed.Future.result
    monkeypatch.setattr(distributed.Client, "gather", lambda *a, **k: check(gather(*a, **k)))
    monkeypatch.setattr(distributed.Future, "result", lambda *a, **k: check(result(*a, **k)))

    def refuse(*args, **kwargs):
        raise AssertionError("the whole array was computed on the client")

    monkeypatch.setattr(da.Array, "compute", refuse)
    monkeypatch.setattr(da.Array, "__array__", refuse)
    est = rtd.KingmanCoalescent(sample_size=size, part_rows=4000, exact_below=1000).fit(X)
    assert est.tree_.n_leaves == n
    assert est.n_parts_ > 4
    assert 0 < largest[0] <= size
    monkeypatch.undo()
    assert isinstance(est.predict(X), da.Array)


def test_coalescent_bad_chunks_are_named(client):
    X = categories(900)
    X[650, 3] = 0.5
    with pytest.raises(InvalidDataError, match=r"chunk 3 \(rows 600\.\.800\), row 650, column 3"):
        rtd.KingmanCoalescent("multinomial", chunk_rows=200).fit(X)
    X = blobs(900)
    X[650, 2] = np.inf
    with pytest.raises(InvalidDataError, match=r"chunk 3 \(rows 600\.\.800\): row 650, column 2"):
        rtd.KingmanCoalescent().fit(da.from_array(X, chunks=(200, -1)))
    X[:, 2] = np.nan
    with pytest.raises(InvalidDataError, match="column 2 has no observed value"):
        rtd.KingmanCoalescent(chunk_rows=200).fit(X)
    with pytest.raises(InvalidParameterError, match="noise"):
        rtd.KingmanCoalescent("multinomial", noise=0.5).fit(categories(50))
    with pytest.raises(InvalidParameterError, match="Lambda") as info:
        rtd.KingmanCoalescent(Lambda=[1.0, 2.0]).fit(blobs(50))
    assert info.value.parameter == "Lambda"
    with pytest.raises(rt.NotFittedError):
        rtd.KingmanCoalescent().predict(blobs(5))


def test_coalescent_pickles_small_and_predicts_after(client):
    X = blobs(2000, d=64, seed=8)
    est = rtd.KingmanCoalescent(chunk_rows=500, **COAL_SMALL).fit(X)
    blob = pickle.dumps(est)
    # The tree, its times and ratios, and the flat clusters' rose tree and statistics: a
    # size per row that does not grow with the columns.
    assert len(blob) < 160 * len(X) < X.nbytes / 3
    back = pickle.loads(blob)
    assert back.tree_.to_newick() == est.tree_.to_newick()
    np.testing.assert_array_equal(back.tree_.to_linkage(), est.tree_.to_linkage())
    assert back.log_joint_ == est.log_joint_
    np.testing.assert_array_equal(back.labels_.compute(), est.labels_.compute())
    new = X[:300]
    predicted = back.predict(da.from_array(new, chunks=100)).compute()
    np.testing.assert_array_equal(predicted, est.predict(new).compute())
    assert np.mean(predicted == est.labels_.compute()[:300]) > 0.9
    score = back.score_samples(new)
    assert isinstance(score, da.Array)
    proba = back.predict_proba(new).compute()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
