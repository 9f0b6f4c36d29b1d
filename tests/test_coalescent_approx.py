"""KingmanCoalescent(approximate=True): the linear-time Greedy-Rate1 search on parts."""

from __future__ import annotations

import numpy as np
import pytest
import rosetree as rt


def _mixture(n: int, d: int = 3, k: int = 6, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(k, d))
    return centres[rng.integers(k, size=n)] + rng.normal(size=(n, d))


def _binary(n: int, d: int = 16, k: int = 5, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    protos = rng.random((k, d)) < 0.5
    return (protos[rng.integers(k, size=n)] ^ (rng.random((n, d)) < 0.1)).astype(float)


def _check_tree(est: rt.KingmanCoalescent, X: np.ndarray, **model: object) -> None:
    tree = est.tree_
    n = X.shape[0]
    h = tree.heights
    assert np.all(h[:n] == 0) and np.all(h[n:] <= 0)
    for v in range(n, len(h)):
        kids = tree.children[v]
        assert len(kids) == 2 and all(h[c] >= h[v] for c in kids)
    # The reported value is the exact evaluation of the tree returned, also after a Newick
    # round trip.
    again = rt.coalescent_log_joint(X, tree, Lambda=est.Lambda_, noise=est.noise_, **model)
    assert est.log_joint_ == pytest.approx(again, rel=1e-12)
    read = rt.Tree.from_newick(tree.to_newick(lengths=True), leaf_time=0.0)
    back = rt.coalescent_log_joint(X, read, Lambda=est.Lambda_, noise=est.noise_, **model)
    assert back == pytest.approx(est.log_joint_, rel=1e-9)
    assert len(est.labels_) == n


def test_brownian_tree_is_valid_with_its_exact_log_joint():
    X = _mixture(900)
    est = rt.KingmanCoalescent(approximate=True, exact_below=200, approx_sample=100).fit(X)
    _check_tree(est, X)


def test_multinomial_tree_is_valid_with_its_exact_log_joint():
    X = _binary(700)
    est = rt.KingmanCoalescent(
        likelihood="multinomial", approximate=True, exact_below=150, approx_sample=60
    ).fit(X)
    _check_tree(est, X, likelihood="multinomial")


def test_same_tree_for_any_n_jobs_and_seed_dependent():
    X = _mixture(800, seed=1)
    fits = [
        rt.KingmanCoalescent(
            approximate=True, exact_below=150, approx_sample=50, n_jobs=jobs, random_state=4
        ).fit(X)
        for jobs in (1, 2)
    ]
    assert fits[0].tree_.to_newick(lengths=True) == fits[1].tree_.to_newick(lengths=True)
    assert fits[0].log_joint_ == fits[1].log_joint_
    assert np.array_equal(fits[0].labels_, fits[1].labels_)


def test_small_data_is_the_exact_fit():
    X = _mixture(150, seed=2)
    exact = rt.KingmanCoalescent().fit(X)
    approx = rt.KingmanCoalescent(approximate=True, exact_below=150).fit(X)
    assert approx.tree_.to_newick(lengths=True) == exact.tree_.to_newick(lengths=True)
    assert approx.log_joint_ == exact.log_joint_


def test_close_to_the_exact_fit_on_clustered_data():
    X = _mixture(1200, d=5, k=8, seed=3)
    exact = rt.KingmanCoalescent().fit(X)
    approx = rt.KingmanCoalescent(approximate=True, exact_below=300, approx_sample=150).fit(X)
    # Not worse by more than 0.5 % (Greedy-Rate1 is greedy: the parts' trees may be better).
    assert approx.log_joint_ >= exact.log_joint_ - 0.005 * abs(exact.log_joint_)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(approximate="yes"), "approximate"),
        (dict(approximate=True, exact_below=1), "exact_below"),
        (dict(approximate=True, exact_below=2.5), "exact_below"),
        (dict(approximate=True, approx_sample=1), "approx_sample"),
        (dict(approx_sample="many"), "approx_sample"),
        (dict(approximate=True, inference="smc-priorpost"), "approximate"),
        (dict(approximate=True, inference="greedy-maxprob"), "approximate"),
    ],
)
def test_bad_parameters_name_themselves(kwargs, name):
    X = _mixture(30)
    with pytest.raises(rt.InvalidParameterError, match=name) as info:
        rt.KingmanCoalescent(**kwargs).fit(X)
    assert info.value.parameter == name


def test_ctrl_c_stops_the_approximate_search(ctrl_c):
    X = _mixture(3000, seed=5)
    # Ctrl-C at the first look for it: the calling thread polls while the parts are built.
    ctrl_c.at_poll(1)
    with pytest.raises(KeyboardInterrupt, match=r"^interrupted$"):
        rt.KingmanCoalescent(approximate=True, exact_below=300, approx_sample=100).fit(X)


def test_progress_counts_rows_placed(every_poll, capsys):
    X = _mixture(30000, seed=6)
    rt.KingmanCoalescent(
        approximate=True, exact_below=300, approx_sample=100, verbose=True, n_jobs=1
    ).fit(X)
    err = capsys.readouterr().err
    assert "approximate coalescent: rows placed" in err, err
