"""Input checking shared by every estimator: data frames column by column."""

import numpy as np
import pandas as pd
import pytest
import rosetree as rt

NIW = rt.NormalInverseWishart


@pytest.mark.parametrize(
    "column",
    [pd.Categorical(["x", "y", "x", "y"]), ["x", "y", "x", "y"]],
    ids=["categorical", "strings"],
)
def test_a_non_numeric_frame_column_is_named(column):
    frame = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "b": column})
    with pytest.raises(rt.InvalidDataError, match="column 'b'") as info:
        rt.BayesianRoseTree(model=NIW()).fit(frame)
    assert info.value.column == 1


def test_nullable_frame_columns_are_missing_values_where_na():
    frame = pd.DataFrame(
        {
            "a": pd.array([1, 0, 1, 1, 0], dtype="Int64"),
            "b": pd.array([True, False, None, True, False], dtype="boolean"),
        }
    )
    est = rt.BayesianRoseTree().fit(frame)  # beta-Bernoulli: NaN is a missing entry
    plain = np.array([[1, 1], [0, 0], [1, np.nan], [1, 1], [0, 0]], dtype=float)
    assert est.log_evidence_ == rt.BayesianRoseTree().fit(plain).log_evidence_
    with pytest.raises(rt.InvalidDataError) as info:
        rt.BayesianRoseTree(model=NIW()).fit(frame.astype("Float64"))
    assert (info.value.row, info.value.column) == (2, 1)


def _frame(X):
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


@pytest.mark.parametrize(
    ("make", "predict"),
    [
        (lambda: rt.BayesianRoseTree(model=NIW()), "predict"),
        (lambda: rt.KingmanCoalescent(), "score_samples"),
        (
            lambda: rt.PitmanYorDiffusionTree(inference="mcmc", n_iter=5, random_state=0),
            "score_samples",
        ),
    ],
    ids=["rose tree", "coalescent", "diffusion tree"],
)
def test_reordered_frame_columns_at_prediction_are_an_error(make, predict):
    X = _frame(np.random.default_rng(0).normal(size=(10, 3)))
    est = make().fit(X)
    assert list(est.feature_names_in_) == ["f0", "f1", "f2"]
    same = getattr(est, predict)(X.iloc[:3])
    with pytest.raises(rt.InvalidDataError, match="columns"):
        getattr(est, predict)(X.iloc[:3, [2, 0, 1]])
    # Plain arrays are read by position, as in scikit-learn.
    np.testing.assert_array_equal(getattr(est, predict)(X.iloc[:3].to_numpy()), same)
    # A refit on an array forgets the names.
    assert not hasattr(est.fit(X.to_numpy()), "feature_names_in_")
