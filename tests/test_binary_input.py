"""Binary data given as bool, uint8, float32 or sparse: the same tree as float64 input.

The beta-Bernoulli model keeps a complete row as packed bits; these tests pin that every
form of the same 0/1 data gives the tree of the float64 array, bit for bit, and that a value
outside {0, 1} is reported with its row and column whatever the dtype.
"""

from __future__ import annotations

import numpy as np
import pytest
import rosetree as rt
import scipy.sparse as sp


def _binary(n: int = 60, d: int = 70, seed: int = 3) -> np.ndarray:
    """Rows from three prototypes with 10 % of the bits flipped (d not a multiple of 64)."""
    rng = np.random.default_rng(seed)
    protos = rng.random((3, d)) < 0.4
    return protos[rng.integers(3, size=n)] ^ (rng.random((n, d)) < 0.1)


FORMS = {
    "bool": lambda x: x.astype(bool),
    "uint8": lambda x: x.astype(np.uint8),
    "float32": lambda x: x.astype(np.float32),
    "csr": lambda x: sp.csr_matrix(x.astype(np.float64)),
    "csr bool": lambda x: sp.csr_matrix(x.astype(bool)),
}


def _fit(X: object, **kw: object) -> rt.BayesianRoseTree:
    return rt.BayesianRoseTree(**kw).fit(X)  # type: ignore[arg-type]


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"model": rt.BetaBernoulli(1.0, 1.0)},
        {"model": rt.BetaBernoulli(1.0, 1.0), "binary": True},
        {"model": rt.BetaBernoulli(0.5, 2.0), "approximate": True},
    ],
    ids=["auto", "bb11", "bhc", "approximate"],
)
def test_every_form_of_binary_data_gives_the_float64_tree(form: str, kw: dict[str, object]) -> None:
    x = _binary()
    want = _fit(x.astype(np.float64), **kw)
    got = _fit(FORMS[form](x), **kw)
    assert type(got.model_) is type(want.model_)
    assert isinstance(got.model_, rt.BetaBernoulli)
    np.testing.assert_array_equal(got.tree_.parent, want.tree_.parent)
    assert got.log_evidence_ == want.log_evidence_
    np.testing.assert_array_equal(got.labels_, want.labels_)


@pytest.mark.parametrize("form", ["bool", "uint8", "float32"])
def test_prediction_takes_the_same_forms(form: str) -> None:
    x = _binary()
    est = _fit(x.astype(np.float64), model=rt.BetaBernoulli(1.0, 1.0))
    new = _binary(n=7, seed=11)
    want = est.score_samples(new.astype(np.float64))
    np.testing.assert_array_equal(est.score_samples(FORMS[form](new)), want)
    np.testing.assert_array_equal(
        est.predict_proba(FORMS[form](new)), est.predict_proba(new.astype(np.float64))
    )


@pytest.mark.parametrize(("dtype", "value"), [(np.uint8, 2), (np.float32, 0.5), (np.float64, 0.5)])
def test_a_value_outside_zero_one_names_its_row_and_column(dtype: type, value: float) -> None:
    x = _binary().astype(dtype)
    x[4, 66] = value
    with pytest.raises(rt.InvalidDataError, match="beta-Bernoulli") as info:
        _fit(x, model=rt.BetaBernoulli(1.0, 1.0))
    assert (info.value.row, info.value.column) == (4, 66)


@pytest.mark.parametrize("dtype", [bool, np.uint8])
def test_binary_input_is_not_copied_to_float64(dtype: type) -> None:
    """NumPy's allocations are traced: none as large as a float64 copy of X is made."""
    import tracemalloc

    x = _binary(n=6000, d=64).astype(dtype)
    float64_copy = x.size * 8
    tracemalloc.start()
    try:
        est = rt.BayesianRoseTree(approximate=True).fit(x)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(est.model_, rt.BetaBernoulli)
    assert peak < float64_copy / 2, f"{peak} bytes traced, a float64 copy is {float64_copy}"


@pytest.mark.parametrize("d", [3, 64, 70, 130])
def test_a_bool_fit_keeps_its_rows_as_bits_and_gives_them_back(d: int) -> None:
    """bool training rows are kept packed (64 to a word): pickling, partial_fit and the
    completions of predict_missing_proba read the same rows as a float64 fit's."""
    import pickle

    x = _binary(n=50, d=d, seed=d)
    as_bool = _fit(x.astype(bool), model=rt.BetaBernoulli(1.0, 1.0))
    as_float = _fit(x.astype(np.float64), model=rt.BetaBernoulli(1.0, 1.0))
    kept = as_bool._fit.training()
    assert kept.dtype == np.bool_
    np.testing.assert_array_equal(kept, x)
    again = pickle.loads(pickle.dumps(as_bool))
    assert again.log_evidence_ == as_float.log_evidence_
    np.testing.assert_array_equal(again.score_samples(x), as_float.score_samples(x))
    completed = again.predict_missing_proba()
    assert completed.dtype == np.float64
    np.testing.assert_array_equal(completed, x.astype(np.float64))
    more = _binary(n=10, d=d, seed=d + 1)
    as_bool.partial_fit(more.astype(bool))
    as_float.partial_fit(more.astype(np.float64))
    assert as_bool.tree_.children == as_float.tree_.children
    assert as_bool.log_evidence_ == as_float.log_evidence_
