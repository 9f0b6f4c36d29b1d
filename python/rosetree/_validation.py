"""Input coercion shared by the estimators and functions."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import numpy as np

from ._choices import MIXINGS as _MIXINGS
from .exceptions import (
    DataScaleWarning,
    InvalidDataError,
    InvalidDataTypeError,
    InvalidParameterError,
)

__all__ = ["MAX_JOBS", "check_array", "check_csr", "check_n_jobs", "is_sparse", "mixing_args"]

#: More threads than this is a mistake, not a configuration (each one is an OS thread).
MAX_JOBS = 1024


def _frame_values(frame: Any, name: str) -> np.ndarray:
    """A DataFrame's values as float64, column by column, naming a column that is not numeric.

    Nullable columns (``Int64``, ``boolean``, ``Float64``) give NaN where they hold ``NA``.
    """
    columns = []
    for j, column in enumerate(frame.columns):
        series = frame.iloc[:, j]
        try:
            columns.append(series.to_numpy(dtype=np.float64, na_value=np.nan))
        except (TypeError, ValueError):
            raise InvalidDataError(
                f"{name} column {column!r} (position {j}) must be numeric, got dtype "
                f"{series.dtype}; encode it as numbers first",
                column=j,
            ) from None
    if not columns:
        return np.empty((len(frame), 0))
    return np.column_stack(columns)


#: Dtypes that the core's fit reads as they are, without a float64 copy of ``X``.
NARROW_DTYPES = (np.dtype(bool), np.dtype(np.uint8), np.dtype(np.float32))


def check_array(
    X: Any,
    *,
    allow_nan: bool = True,
    min_rows: int = 2,
    name: str = "X",
    keep_narrow: bool = False,
    nan_hint: str = "",
) -> np.ndarray:
    """Return ``X`` as a C-contiguous 2-D float64 array, or raise naming the problem.

    Accepts anything :func:`numpy.asarray` accepts, pandas DataFrames (their values), and
    SciPy sparse matrices (densified). NaN marks a missing entry where ``allow_nan``; the
    cluster model decides whether it supports missing entries. Infinite values are rejected
    here, with their row and column. With ``keep_narrow``, a NumPy array of dtype ``bool``,
    ``uint8`` or ``float32`` keeps its dtype (C-contiguous), so that the core reads it
    without a float64 copy (binary data at a byte, or less, an entry). ``nan_hint`` ends
    the message on a NaN that is not allowed (what takes missing entries instead).
    """
    if keep_narrow and isinstance(X, np.ndarray) and X.dtype in NARROW_DTYPES and X.ndim == 2:
        _check_shape(X.shape, min_rows, name)
        narrow: np.ndarray = np.ascontiguousarray(X)
        if narrow.dtype == np.float32:
            bad = np.isinf(narrow) if allow_nan else ~np.isfinite(narrow)
            if bad.any():
                row, col = (int(i) for i in np.argwhere(bad)[0])
                raise _bad_entry(name, narrow, row, col, nan_hint)
        return narrow
    if is_sparse(X):
        X = X.toarray()
    elif hasattr(X, "to_numpy") and hasattr(X, "columns"):  # pandas.DataFrame
        X = _frame_values(X, name)
    try:
        arr = np.asarray(X)
    except (TypeError, ValueError) as exc:
        raise InvalidDataError(f"{name} could not be read as a numeric array: {exc}") from None
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidDataTypeError(
                f"{name} must be numeric; its dtype {arr.dtype} does not convert to float: {exc}"
            ) from None
    if np.iscomplexobj(arr):
        raise InvalidDataTypeError(f"Complex data not supported: {name} must be real-valued")
    if arr.ndim != 2:
        raise InvalidDataError(
            f"{name} must be a 2-D array (rows are data items), got {arr.ndim}-D with shape "
            f"{arr.shape}. Reshape your data: X.reshape(-1, 1) for a single feature, "
            "X.reshape(1, -1) for a single row"
        )
    _check_shape(arr.shape, min_rows, name)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    bad = np.isinf(arr) if allow_nan else ~np.isfinite(arr)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise _bad_entry(name, arr, row, col, nan_hint)
    return arr


def _bad_entry(name: str, X: np.ndarray, row: int, col: int, nan_hint: str) -> InvalidDataError:
    """The error for an infinite value, or a NaN where none is allowed, at ``(row, col)``."""
    where = f"{name} has {{}} in row {row}, column {col}"
    if np.isinf(X[row, col]):
        return InvalidDataError(where.format("an infinite value"), row, col)
    return InvalidDataError(where.format("NaN") + nan_hint, row, col)


def _check_shape(shape: tuple[int, int], min_rows: int, name: str) -> None:
    """Enough rows and at least one column (messages as scikit-learn's, which its checks match)."""
    n, d = shape
    if n < min_rows:
        rows = "one row" if min_rows == 1 else f"{min_rows} rows"
        raise InvalidDataError(f"{name} needs at least {rows}, got n_samples = {n}")
    if d == 0:
        raise InvalidDataError(
            f"{name} has 0 feature(s) (shape={tuple(shape)}) while a minimum of 1 is required."
        )


def is_sparse(X: Any) -> bool:
    """Whether ``X`` is a SciPy sparse matrix or array (without importing SciPy)."""
    return hasattr(X, "tocsr") and hasattr(X, "nnz")


def check_csr(X: Any, *, min_rows: int = 2, name: str = "X") -> tuple[np.ndarray, ...]:
    """``(indptr, indices, data)`` of ``X`` as canonical CSR (sorted, no duplicates).

    The arrays are int64, int64 and float64; infinite stored values are rejected with their
    row and column, NaN marks a missing entry.
    """
    csr = X.tocsr(copy=True)
    csr.sum_duplicates()
    _check_shape(csr.shape, min_rows, name)
    data = np.ascontiguousarray(csr.data, dtype=np.float64)
    indptr = np.ascontiguousarray(csr.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(csr.indices, dtype=np.int64)
    bad = np.flatnonzero(np.isinf(data))
    if bad.size:
        k = int(bad[0])
        row = int(np.searchsorted(indptr, k, side="right") - 1)
        col = int(indices[k])
        raise InvalidDataError(f"{name} has an infinite value in row {row}, column {col}", row, col)
    return indptr, indices, data


def feature_names(X: Any) -> np.ndarray | None:
    """The column names of a DataFrame ``X`` as strings, or None for other inputs."""
    columns = getattr(X, "columns", None)
    if columns is None or not hasattr(X, "to_numpy"):
        return None
    return np.asarray([str(c) for c in columns], dtype=object)


@contextmanager
def naming_columns(names: Any, columns: Any = None) -> Iterator[None]:
    """Name the column of an :class:`InvalidDataError` raised inside, where known.

    ``names`` (or None) are the names of the data's columns. ``columns``, where the code
    inside sees only some of them, maps its column numbers to the data's.
    """
    try:
        yield
    except InvalidDataError as err:
        j = err.column
        if j is None or (names is None and columns is None):
            raise
        notes = []
        if columns is not None:
            j = int(columns[j])
            notes.append(f"column {err.column} of the {len(columns)} fitted is X's column {j}")
        if names is not None:
            notes.append(f"column {names[j]!r}")
        raise type(err)(f"{err} ({'; '.join(notes)})", err.row, j) from None


def set_feature_names(estimator: Any, names: np.ndarray | None) -> None:
    """Sets ``feature_names_in_`` at fit, or removes one left by an earlier fit."""
    if names is None:
        estimator.__dict__.pop("feature_names_in_", None)
    else:
        estimator.feature_names_in_ = names


def check_feature_names(estimator: Any, X: Any) -> None:
    """At prediction: a DataFrame's columns must be those seen in fit, in the same order.

    As in scikit-learn, a check only when both the fit and ``X`` have names; reordered or
    renamed columns are an :class:`InvalidDataError`, not silently misread.
    """
    fitted = getattr(estimator, "feature_names_in_", None)
    names = feature_names(X)
    if fitted is None or names is None:
        return
    if len(names) != len(fitted) or any(a != b for a, b in zip(names, fitted, strict=False)):
        raise InvalidDataError(
            f"X's columns {list(names)} are not the columns seen in fit {list(fitted)} "
            "(the same names in the same order)"
        )


def check_new_rows(
    estimator: Any, X: Any, *, allow_nan: bool = True, nan_hint: str = ""
) -> np.ndarray:
    """Rows to predict for a fitted estimator: names and number of columns as in its fit.

    The message on a wrong number of columns is scikit-learn's, which its checks match.
    """
    estimator._check_fitted()
    check_feature_names(estimator, X)
    X = check_array(X, allow_nan=allow_nan, min_rows=1, nan_hint=nan_hint)
    expected = estimator.n_features_in_
    if X.shape[1] != expected:
        raise InvalidDataError(
            f"X has {X.shape[1]} features, but {type(estimator).__name__} is expecting "
            f"{expected} features as input"
        )
    return cast("np.ndarray", X)


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer, Python's or NumPy's (booleans are not)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number, Python's or NumPy's (booleans are not)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def check_int(value: Any, name: str, *, low: int = 1, cap: bool = False) -> int:
    """An integer of at least ``low``, or InvalidParameterError naming it.

    With ``cap``, values beyond a machine word mean "no limit" and become ``2**63 - 1``;
    without, they are refused.
    """
    if not is_int(value) or value < low:
        what = {0: "a non-negative integer", 1: "a positive integer"}.get(
            low, f"an integer >= {low}"
        )
        raise InvalidParameterError(f"{name} must be {what}, got {value!r}", name)
    if value > 2**63 - 1:
        if not cap:
            raise InvalidParameterError(f"{name} must be below 2**63, got {value!r}", name)
        return 2**63 - 1
    return int(value)


def check_approx(
    approximate: Any, exact_below: Any, approx_sample: Any, seed: int
) -> tuple[int, int, int] | None:
    """The core's ``(exact_below, sample, seed)`` of an approximate search, or ``None``.

    ``None`` means the exact search; a bad value raises InvalidParameterError naming it.

    ``exact_below`` and ``approx_sample`` are checked whether or not they are used, as every
    parameter is: a bad value fails the fit that sets it, not a later one with
    ``approximate=True``. Any ``exact_below`` of at least ``n`` means the exact search;
    larger ones than a machine word holds mean the same. The sample is at most
    ``exact_below`` rows.
    """
    approximate = check_flag(approximate, "approximate")
    if not is_int(exact_below):
        raise InvalidParameterError(
            f"exact_below must be an integer, got {exact_below!r}", "exact_below"
        )
    if exact_below < 2:
        raise InvalidParameterError(
            f"exact_below must be at least 2, got {exact_below}", "exact_below"
        )
    exact_below = min(int(exact_below), 2**63 - 1)
    sample = check_int(approx_sample, "approx_sample", low=2, cap=True)
    if not approximate:
        return None
    return exact_below, min(sample, exact_below), seed


def _as_float(value: Any) -> float:
    """A real number as a float; an integer beyond the float range as infinity."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def check_positive(value: Any, name: str) -> float:
    """A finite number > 0, or InvalidParameterError naming it."""
    number = _as_float(value) if is_real(value) else math.nan
    if not (math.isfinite(number) and number > 0):
        raise InvalidParameterError(f"{name} must be a finite number > 0, got {value!r}", name)
    return number


def check_nonnegative(value: Any, name: str) -> float:
    """A finite number >= 0, or InvalidParameterError naming it."""
    number = _as_float(value) if is_real(value) else math.nan
    if not (math.isfinite(number) and number >= 0):
        raise InvalidParameterError(f"{name} must be a finite number >= 0, got {value!r}", name)
    return number


def check_finite(value: Any, name: str) -> float:
    """A finite real number, or InvalidParameterError naming it."""
    number = _as_float(value) if is_real(value) else math.nan
    if not math.isfinite(number):
        raise InvalidParameterError(f"{name} must be a finite number, got {value!r}", name)
    return number


def finite_array(
    value: Any, name: str, *, max_ndim: int | None = None, positive: bool = False
) -> np.ndarray:
    """A non-empty float64 array of finite numbers, or InvalidParameterError naming ``name``.

    With ``max_ndim``, at most that many dimensions; with ``positive``, every entry ``> 0``.
    """
    if isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name} must be numeric, got {value!r}", name)
    arr = real_array(value, name)
    if max_ndim is not None and arr.ndim > max_ndim:
        raise InvalidParameterError(
            f"{name} must have at most {max_ndim} dimensions, got shape {arr.shape}", name
        )
    if arr.size == 0:
        raise InvalidParameterError(f"{name} must not be empty", name)
    if not np.isfinite(arr).all():
        raise InvalidParameterError(f"{name} must be finite, got {value!r}", name)
    if positive and (arr <= 0).any():
        raise InvalidParameterError(f"{name} must be > 0, got {value!r}", name)
    return arr


def check_real(value: Any, name: str) -> float:
    """A real number (NumPy scalars included), or InvalidParameterError naming it."""
    if not is_real(value):
        raise InvalidParameterError(f"{name} must be a real number, got {value!r}", name)
    return float(value)


def real_array(value: Any, name: str, *, data: bool = False) -> np.ndarray:
    """``value`` as a float64 array (complex, text and objects refused).

    The error names ``name``: InvalidDataTypeError with ``data``, else InvalidParameterError.
    """
    try:
        arr = np.asarray(value)
        if np.iscomplexobj(arr):
            raise TypeError("complex values")
        return arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        if data:
            raise InvalidDataTypeError(f"{name} must be numeric: {exc}") from None
        raise InvalidParameterError(f"{name} must hold real numbers: {exc}", name) from None


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    """One of the strings ``choices``, or InvalidParameterError naming the parameter.

    The type is checked first: ``array in choices`` compares element-wise and raises
    NumPy's own ValueError.
    """
    if not isinstance(value, str) or value not in choices:
        raise InvalidParameterError(
            f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}", name
        )
    return value


def check_cut_threshold(value: Any) -> float:
    """``cut_threshold``: a number in [0, 1] (a posterior probability to cut at)."""
    if not is_real(value) or not 0 <= value <= 1:
        raise InvalidParameterError(
            f"cut_threshold must be a number in [0, 1], got {value!r}", "cut_threshold"
        )
    return float(value)


def check_flag(value: Any, name: str) -> bool:
    """``True`` or ``False`` (NumPy's too), or InvalidParameterError naming the parameter."""
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"{name} must be True or False, got {value!r}", name)
    return bool(value)


#: With ``verbose="auto"``, how long a fit runs silently (seconds) before it reports progress.
AUTO_PROGRESS_AFTER = 10.0


def check_verbose(value: Any) -> float | None:
    """Seconds before the first line of progress for ``verbose`` (``None``: never).

    ``True``: from the first second; ``"auto"``: once the fit has run
    :data:`AUTO_PROGRESS_AFTER` seconds; ``False``: never.
    """
    if isinstance(value, str) and value == "auto":
        return AUTO_PROGRESS_AFTER
    if not isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(
            f"verbose must be True, False or 'auto', got {value!r}", "verbose"
        )
    return 0.0 if value else None


def check_count(value: Any, name: str) -> int:
    """A positive integer that fits a machine word, or InvalidParameterError naming it."""
    return check_int(value, name)


def check_n_jobs(n_jobs: Any) -> int | None:
    """Map scikit-learn's ``n_jobs`` to a thread count (``None``: every core)."""
    if n_jobs is None or n_jobs == -1:
        return None
    if not is_int(n_jobs) or n_jobs < 1:
        raise InvalidParameterError(
            f"n_jobs must be None, -1 or a positive integer, got {n_jobs!r}", "n_jobs"
        )
    if n_jobs > MAX_JOBS:
        raise InvalidParameterError(f"n_jobs must be at most {MAX_JOBS}, got {n_jobs}", "n_jobs")
    return int(n_jobs)


def check_seed(random_state: Any) -> int:
    """The seed of ``random_state`` (``None`` means 0), an integer in [0, 2**64)."""
    seed = 0 if random_state is None else random_state
    if not is_int(seed) or not 0 <= seed < 2**64:
        raise InvalidParameterError(
            f"random_state must be None or an integer in [0, 2**64), got {random_state!r}",
            "random_state",
        )
    return int(seed)


def mixing_args(mixing: Any, gamma: Any, dp_alpha: Any) -> dict[str, Any]:
    """Keyword arguments of the core functions for a mixing rule, checked for type."""
    out: dict[str, Any] = {"mixing": check_choice(mixing, "mixing", _MIXINGS)}
    for name, value in (("gamma", gamma), ("dp_alpha", dp_alpha)):
        if not is_real(value):
            raise InvalidParameterError(f"{name} must be a number, got {value!r}", name)
        out[name] = float(value)
    return out


#: Columns whose ranges (largest minus smallest value) differ by more than this factor are
#: taken to be in different units: ``"auto"`` scaling measures each against its own
#: variance, and a model told to use the data as given warns
#: (:class:`~rosetree.DataScaleWarning`).
RANGE_SPREAD = 100.0


def _in_different_units(X: np.ndarray) -> tuple[bool, float, float]:
    """Whether the columns are in different units, with their smallest and largest range.

    In different units: the ranges (NaN ignored) of the columns that vary differ by more
    than :data:`RANGE_SPREAD`. Ranges, not variances: a pixel or a word that is rarely
    non-zero has a tiny variance but the range of the others (scikit-learn's digits:
    variances 7.7·10⁴ apart, ranges 16), while a change of unit scales both (penguins'
    grams beside millimetres: ranges 430 apart).
    """
    observed = ~np.isnan(X)
    if not X.size or not observed.any():
        return False, 0.0, 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        ranges = np.nanmax(np.where(observed, X, -np.inf), axis=0) - np.nanmin(
            np.where(observed, X, np.inf), axis=0
        )
    ranges = ranges[np.isfinite(ranges) & (ranges > 0)]
    if not ranges.size:
        return False, 0.0, 0.0
    low, high = float(ranges.min()), float(ranges.max())
    return high > RANGE_SPREAD * low, low, high


def column_variances(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each column's variance (NaN ignored), and which columns vary (finite, > 0)."""
    observed = ~np.isnan(X)
    count = observed.sum(axis=0)
    filled = np.where(observed, X, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):  # beyond double precision: not finite
        mean = filled.sum(axis=0) / np.maximum(count, 1)
        var = (np.where(observed, X - mean, 0.0) ** 2).sum(axis=0) / np.maximum(count, 1)
    return var, np.isfinite(var) & (var > 0) & (count > 1)


def unit_variances(X: np.ndarray) -> tuple[np.ndarray, bool]:
    """The variance of the unit each column is measured in under ``"auto"`` scaling.

    One unit for every column, the mean of the varying columns' variances, while their
    ranges lie within a factor :data:`RANGE_SPREAD` of each other: that keeps the data's
    geometry (principal components, pixel counts, 0/1 rows), whose columns share a unit
    and whose low-variance columns are the least informative. Beyond that factor the
    columns are taken to be in different units (grams beside millimetres) and each is
    measured against its own variance, so that no choice of units changes the result;
    a column that does not vary gets 1.

    Returns ``(variances of shape (d,), by_column)``.
    """
    var, ok = column_variances(X)
    varying = var[ok]
    if not varying.size:
        return np.ones(X.shape[1]), False
    if _in_different_units(X)[0]:
        return np.where(ok, var, 1.0), True
    return np.full(X.shape[1], float(varying.mean())), False


def warn_column_scales(X: np.ndarray, who: str, stacklevel: int) -> None:
    """Warn when the columns of ``X`` look to be in different units.

    That is, when their ranges differ by more than :data:`RANGE_SPREAD`, for a model
    (``who``) that compares all columns on one scale; the warning is a
    :class:`~rosetree.DataScaleWarning`.
    """
    different, low, high = _in_different_units(X)
    if different:
        warnings.warn(
            f"the columns' ranges run from {low:.3g} to {high:.3g}: "
            f"{who} compares all columns on one scale, so the widest decide the tree. "
            "Standardize the columns (e.g. sklearn.preprocessing.StandardScaler) unless "
            "their scales are meant",
            DataScaleWarning,
            stacklevel=stacklevel + 1,
        )
