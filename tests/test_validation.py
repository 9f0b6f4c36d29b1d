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
