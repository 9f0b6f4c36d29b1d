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


def test_non_numeric_data_is_a_type_error_that_is_also_invalid_data():
    X = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=object)
    X[0, 1] = {"a": 1}
    for bad in (X, np.array([[1, 2], [3, 4]]) + 1j):
        with pytest.raises(rt.InvalidDataTypeError) as info:
            rt.BayesianRoseTree(model=rt.NormalGamma()).fit(bad)
        assert isinstance(info.value, TypeError)
        assert isinstance(info.value, rt.InvalidDataError)


def test_missing_values_for_a_model_without_them_name_the_entry_and_what_takes_them():
    X = np.random.default_rng(0).normal(size=(6, 2))
    X[4, 1] = np.nan
    full = np.nan_to_num(X)
    rose = "NormalInverseWishart takes no missing entries; NormalGamma"
    niw = rt.BayesianRoseTree(model=rt.NormalInverseWishart())
    for call in (lambda: niw.fit(X), lambda: niw.fit(full).score_samples(X)):
        with pytest.raises(rt.InvalidDataError, match=f"NaN in row 4, column 1: {rose}") as info:
            call()
        assert (info.value.row, info.value.column) == (4, 1)
    # The fit reads a float32 array in place; the same message.
    with pytest.raises(rt.InvalidDataError, match=rose):
        niw.fit(X.astype(np.float32))
    diffusion = "the Gaussian likelihood takes no missing entries"
    pydt = rt.PitmanYorDiffusionTree(n_iter=2, random_state=0)
    with pytest.raises(rt.InvalidDataError, match=f"NaN in row 4, column 1: {diffusion}"):
        pydt.fit(X)
    pydt.fit(full)
    for method in (pydt.score_samples, pydt.predict_proba, pydt.partial_fit):
        with pytest.raises(rt.InvalidDataError, match=diffusion):
            method(X)
    # What the message offers does take the row.
    rt.BayesianRoseTree(model=rt.NormalGamma()).fit(X)
    rt.KingmanCoalescent().fit(X)
    # An infinite value is named as such, with no word about missing entries.
    X[4, 1] = np.inf
    with pytest.raises(rt.InvalidDataError, match=r"infinite value in row 4, column 1$"):
        niw.fit(X)


@pytest.mark.parametrize("inference", ["greedy-rate1", "greedy-maxprob", "greedy-minduration"])
def test_equal_rows_under_brownian_greedy_coalescent_are_named(inference):
    # Without observation noise, equal rows have unbounded density as their merge time goes
    # to 0: the greedy tree's log joint would be +inf, and every split score after it NaN.
    X = np.random.default_rng(1).normal(size=(8, 3))
    X[6] = X[2]
    with pytest.raises(rt.InvalidDataError, match="rows 2 and 6 are equal"):
        rt.KingmanCoalescent(inference=inference, noise=0.0).fit(X)
    # Equal on the columns both observe is the same.
    X[6, 0] = np.nan
    with pytest.raises(rt.InvalidDataError, match="rows 2 and 6"):
        rt.KingmanCoalescent(inference=inference, noise=0.0).fit(X)
    # Without the duplicate, and for sampled merge times, all is finite.
    X[6] += 0.5
    assert np.isfinite(rt.KingmanCoalescent(inference=inference, noise=0.0).fit(X).log_joint_)
    X[6] = X[2]
    smc = rt.KingmanCoalescent(inference="smc-priorpost", n_particles=5, random_state=0).fit(X)
    assert np.isfinite(smc.log_marginal_)


def test_integers_beyond_the_float_range_are_named_not_a_type_error():
    from rosetree._validation import check_finite, check_nonnegative, check_positive

    huge = 10**400
    for check in (check_positive, check_nonnegative, check_finite):
        with pytest.raises(rt.InvalidParameterError, match="kappa0") as info:
            check(huge, "kappa0")
        assert info.value.parameter == "kappa0"
        assert check(10**30, "kappa0") == 1e30  # large, but a float
    with pytest.raises(rt.InvalidParameterError, match="kappa0"):
        rt.GPExperts(kappa0=-huge)
    assert rt.GPExperts(kappa0=10**30).kappa0 == 10**30
