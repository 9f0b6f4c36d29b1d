"""Hypothesis strategies for the values the targets are called with, valid and invalid.

Sizes stay small (at most 12 rows and 4 columns, a few iterations) so that a case takes
milliseconds; the invalid values are the usual suspects: NaN, infinities, the largest and
smallest doubles, negative zero, integers beyond 64 bits, wrong types (strings, None,
lists, dicts, complex numbers, Decimal, Fraction, NumPy scalars of odd dtypes), empty and
one-row data, ragged lists, DataFrames with odd dtypes, sparse matrices.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

try:  # the test extras have pandas; the fuzzer works without it
    import pandas as pd
except ImportError:  # pragma: no cover
    pd = None

try:
    from scipy import sparse
except ImportError:  # pragma: no cover
    sparse = None

__all__ = [
    "SPECIAL_FLOATS",
    "SPECIAL_INTS",
    "WRONG_TYPES",
    "any_float",
    "any_int",
    "containers",
    "matrix",
    "maybe",
    "nested_trees",
    "param",
    "vector",
]

NAN, INF = float("nan"), float("inf")

SPECIAL_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    1e-300,
    5e-324,
    -5e-324,
    2.2250738585072014e-308,
    1e-8,
    1e8,
    1e15,
    1e154,
    1e300,
    1e308,
    1.7976931348623157e308,
    -1e308,
    9007199254740993.0,
    0.9999999999999999,
    1.0000000000000002,
    NAN,
    INF,
    -INF,
]

SPECIAL_INTS = [
    0,
    1,
    -1,
    2,
    3,
    2**31 - 1,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63),
    -(2**63) - 1,
    10**30,
    -(10**30),
    np.int64(2),
    np.int64(-1),
    np.int32(3),
    np.uint64(2**64 - 1),
    np.uint8(255),
    np.int8(-1),
]

WRONG_TYPES = [
    None,
    "",
    "a",
    "1.5",
    "nan",
    "brt",
    b"1",
    [],
    [1.0, 2.0],
    [[1.0]],
    {},
    {"a": 1},
    (),
    (1, 2),
    1j,
    complex(NAN, 0),
    Fraction(1, 3),
    Decimal("1.5"),
    Decimal("NaN"),
    Decimal("-Infinity"),
    np.float32(NAN),
    np.float32(0.5),
    np.float16(1.0),
    np.longdouble(0.5),
    np.complex128(1 + 1j),
    np.bool_(True),
    True,
    False,
    np.array(1.0),
    np.array([1.0, 2.0]),
    np.array([]),
    np.array(["a"]),
    np.datetime64("2020-01-01"),
    np.str_("x"),
    range(3),
    frozenset({1}),
]

any_float = st.one_of(
    st.sampled_from(SPECIAL_FLOATS),
    st.floats(),
    st.floats(-10, 10),
)
any_int = st.one_of(st.sampled_from(SPECIAL_INTS), st.integers(-5, 20), st.integers())
wrong = st.sampled_from(WRONG_TYPES)


#: How often a parameter is drawn invalid in the case being drawn (set by :func:`chaos`).
_CHAOS = [0.0]
#: The levels a case may get: most cases are valid throughout, so that the calls get past
#: validation into the numerics; the others break a few or many parameters.
CHAOS_LEVELS = [0.0, 0.0, 0.0, 0.0, 0.03, 0.1, 0.3, 0.6]


@st.composite
def chaos(draw: st.DrawFn, strategy: st.SearchStrategy[Any]) -> tuple[float, Any]:
    """``(level, value)``: ``strategy`` drawn at a chaos level drawn first.

    Cases are drawn one at a time, so a module global carries the level.
    """
    level = _CHAOS[0] = draw(st.sampled_from(CHAOS_LEVELS))
    try:
        return level, draw(strategy)
    finally:
        _CHAOS[0] = 0.0


def chaotic(draw: st.DrawFn, scale: float = 1.0) -> bool:
    """Whether to break this value, by the current chaos level."""
    level = min(1.0, _CHAOS[0] * scale)
    return level > 0 and draw(st.integers(0, 999)) < 1000 * level


@st.composite
def maybe(draw: st.DrawFn, strategy: st.SearchStrategy[Any], scale: float = 1.0) -> Any:
    """``strategy``, or (by the chaos level) a nasty number or a value of a wrong type."""
    if chaotic(draw, scale):
        return draw(st.one_of(any_float, any_int, wrong))
    return draw(strategy)


def param(valid: st.SearchStrategy[Any], weight: int = 6) -> st.SearchStrategy[Any]:
    """A parameter: ``valid``, or (by the chaos level, divided by ``weight / 6``) anything."""
    return maybe(valid, 6.0 / weight)


def positive(lo: float = 1e-3, hi: float = 20.0) -> st.SearchStrategy[float]:
    """A positive float, occasionally extreme."""
    return st.one_of(
        st.floats(lo, hi),
        st.floats(lo, hi),
        st.floats(lo, hi),
        st.sampled_from([1e-300, 1e-12, 1e12, 1e300, 5e-324, 1.7976931348623157e308]),
    )


@st.composite
def vector(draw: st.DrawFn, d: int, elements: st.SearchStrategy[float]) -> Any:
    """A 1-D hyperparameter of length ``d`` (an array or a list).

    By the chaos level, one of another length or a 2-D array.
    """
    if chaotic(draw):
        return draw(
            st.one_of(
                st.integers(0, 5).flatmap(lambda k: hnp.arrays(np.float64, k, elements=elements)),
                hnp.arrays(np.float64, (1, d), elements=elements),
            )
        )
    value = draw(hnp.arrays(np.float64, d, elements=elements))
    return value.tolist() if draw(st.integers(0, 3)) == 0 else value


# ----------------------------------------------------------------------------- data
_REAL_SCALES = [1.0, 1.0, 1.0, 1e-300, 1e-150, 1e-8, 1e8, 1e100, 1e154, 1e200, 1e300]


def _elements(kind: str, missing: bool) -> st.SearchStrategy[float]:
    if kind == "binary":
        base: st.SearchStrategy[float] = st.sampled_from([0.0, 1.0])
    elif kind == "counts":
        base = st.one_of(
            st.integers(0, 5).map(float),
            st.integers(0, 5).map(float),
            st.sampled_from([1e6, 1e15, 2.0**53, 1e300]),
        )
    elif kind == "category":
        base = st.integers(0, 3).map(float)
    elif kind == "unit":
        base = st.floats(0.0, 1.0)
    elif kind == "real":
        base = st.one_of(st.floats(-5, 5), st.floats(-5, 5), st.integers(-3, 3).map(float))
    else:  # "nasty": anything a float64 can hold
        base = st.one_of(st.sampled_from(SPECIAL_FLOATS), st.floats(), st.floats(-5, 5))
    if missing:
        base = st.one_of(base, base, base, st.just(NAN))
    return base


@st.composite
def matrix(
    draw: st.DrawFn,
    kind: str | None = None,
    n: int | None = None,
    d: int | None = None,
    max_n: int = 12,
    max_d: int = 4,
    missing: bool | None = None,
) -> np.ndarray:
    """An ``n`` × ``d`` float64 array of the given kind.

    Now and then with duplicated rows or a constant column (the degenerate cases of the
    cluster models), or all zeros.
    """
    if kind is None:
        kind = draw(st.sampled_from(["binary", "counts", "real", "real", "category", "nasty"]))
    if n is None:
        n = draw(st.one_of(st.integers(2, 8), st.integers(2, 8), st.integers(0, max_n)))
    if d is None:
        d = draw(st.one_of(st.integers(1, 3), st.integers(0, max_d)))
    if missing is None:
        missing = draw(st.sampled_from([False, False, False, True]))
    elements = _elements(kind, missing)
    shape = draw(st.sampled_from(["iid", "iid", "iid", "dup", "const", "zeros"]))
    if shape == "dup" and n > 0:
        pool = draw(
            hnp.arrays(np.float64, (draw(st.integers(1, max(1, n - 1))), d), elements=elements)
        )
        rows = draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n))
        X = pool[rows]
    else:
        X = draw(hnp.arrays(np.float64, (n, d), elements=elements))
        if shape == "const" and n > 0 and d > 0:
            X[:, draw(st.integers(0, d - 1))] = X[0, 0]
        elif shape == "zeros":
            X[:] = 0.0
    if kind == "real":
        X = X * draw(st.sampled_from(_REAL_SCALES))
        if draw(st.booleans()):
            X = X + draw(st.sampled_from([0.0, 0.0, 1e8, -1e15, 1e300]))
    return X


def _frame(X: np.ndarray, how: str, names: list[Any]) -> Any:
    n, d = X.shape
    if how == "float":
        return pd.DataFrame(X, columns=names)
    cols = []
    for j in range(d):
        col = X[:, j]
        if how == "Int64":
            ints = [
                int(v) if np.isfinite(v) and v == int(v) and abs(v) < 2**62 else None for v in col
            ]
            cols.append(pd.array(ints, dtype="Int64"))
        elif how == "boolean":
            cols.append(pd.array([None if np.isnan(v) else bool(v) for v in col], dtype="boolean"))
        elif how == "Float64":
            cols.append(pd.array([None if np.isnan(v) else float(v) for v in col], dtype="Float64"))
        elif how == "category":
            cols.append(pd.Categorical(col))
        elif how == "object":
            cols.append(pd.Series([float(v) for v in col], dtype=object))
        elif how == "string":
            cols.append(pd.Series([str(v) for v in col], dtype="string"))
        elif how == "mixed":
            cols.append(
                pd.Series([float(v) if i % 2 else str(v) for i, v in enumerate(col)], dtype=object)
            )
        else:  # "datetime"
            cols.append(pd.Series(pd.to_datetime(np.arange(n), unit="D")))
    frame = pd.DataFrame({j: c for j, c in enumerate(cols)}, index=range(n))
    frame.columns = names
    return frame


_CONTAINERS = ["ndarray"] * 14 + ["list", "list", "int", "bool", "float32", "fortran", "strided"]
_CONTAINERS += [
    "object",
    "readonly",
    "frame",
    "frame",
    "frame",
    "frame",
    "sparse",
    "sparse",
    "sparse",
]
_BAD_CONTAINERS = ["1d", "3d", "empty", "scalar", "none", "str", "complex", "ragged", "transposed"]
_BAD_CONTAINERS += ["frame"] * 3


@st.composite
def containers(draw: st.DrawFn, X: np.ndarray, allow: bool = True) -> Any:
    """``X`` as the user might pass it.

    An array, lists, another dtype, a view, a DataFrame, a sparse matrix, or (by the chaos
    level) not a matrix at all.
    """
    if not allow:
        return X
    bad = chaotic(draw)
    how = draw(st.sampled_from(_BAD_CONTAINERS if bad else _CONTAINERS))
    if how == "ndarray":
        return X
    if how == "list":
        return X.tolist()
    if how == "int":
        with np.errstate(invalid="ignore", over="ignore"):
            return (
                np.nan_to_num(X)
                .clip(-(2.0**62), 2.0**62)
                .astype(draw(st.sampled_from(["int64", "uint8", "int8"])))
            )
    if how == "bool":
        return X != 0
    if how == "float32":
        with np.errstate(over="ignore"):
            return X.astype(np.float32)
    if how == "fortran":
        return np.asfortranarray(X)
    if how == "strided":
        wide = np.repeat(X, 2, axis=1)
        return wide[:, ::2]
    if how == "object":
        return X.astype(object)
    if how == "readonly":
        Y = X.copy()
        Y.flags.writeable = False
        return Y
    if how == "transposed":
        return X.T
    if how == "frame" and pd is not None and X.ndim == 2:
        n_cols = X.shape[1]
        choices = [[f"f{j}" for j in range(n_cols)], list(range(n_cols))]
        if bad:
            choices += [
                [f"f{j}" for j in reversed(range(n_cols))],
                ["a"] * n_cols,
                [j if j % 2 else str(j) for j in range(n_cols)],
            ]
        names = draw(st.sampled_from(choices))
        kinds = ["float", "float", "Int64", "boolean", "Float64", "object"]
        if bad:
            kinds = ["category", "string", "mixed", "datetime"]
        return _frame(X, draw(st.sampled_from(kinds)), names)
    if how == "sparse" and sparse is not None and X.ndim == 2:
        kind = draw(st.sampled_from(["csr_array", "csr_matrix", "csc_array", "coo_array", "dup"]))
        if kind == "dup":  # the same entry twice (summed), and explicit zeros
            rows, cols = np.nonzero(np.ones_like(X, dtype=bool))
            vals = X[rows, cols] / 2.0
            return sparse.coo_array(
                (np.r_[vals, vals], (np.r_[rows, rows], np.r_[cols, cols])), shape=X.shape
            )
        return getattr(sparse, kind)(X)
    if how == "1d":
        return X.ravel()
    if how == "3d":
        return X[None]
    if how == "empty":
        return np.empty(
            draw(st.sampled_from([(0, X.shape[-1] if X.ndim else 1), (3, 0), (0, 0), (0,)]))
        )
    if how == "scalar":
        return draw(any_float)
    if how == "none":
        return draw(wrong)
    if how == "str":
        return X.astype(str)
    if how == "complex":
        return X + 1j
    if how == "ragged":
        rows = X.tolist()
        if rows:
            rows[-1] = rows[-1] + [1.0]
        return rows
    return X


# ----------------------------------------------------------------------------- trees
def _rose(items: list[int], binary: bool) -> Any:
    """Nested lists over ``items`` (each once): :func:`rosetree.testing.rose_trees`."""
    from rosetree.testing import rose_trees

    return rose_trees(items, binary)


_BAD_LEAVES = [-1, 1.0, True, "0", None, np.int64(0), np.uint64(1), 2**64, np.float64(0.0), [], ()]


def _leaves(t: Any) -> list[Any]:
    out, stack = [], [t]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(x)
        else:
            out.append(x)
    return out


def _replace_leaf(t: Any, k: int, new: Any) -> Any:
    """``t`` with its ``k``-th leaf (in depth-first order) replaced by ``new``."""
    count = [0]

    def walk(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return type(x)(walk(c) for c in x)
        count[0] += 1
        return new if count[0] - 1 == k else x

    return walk(t)


@st.composite
def nested_trees(draw: st.DrawFn, n: int, binary: bool = False, valid: bool | None = None) -> Any:
    """Nested lists of row indices over ``n`` rows, valid or broken in one place."""
    if valid is None:
        valid = not chaotic(draw)
    if n <= 0:
        t: Any = draw(st.sampled_from([[], 0, [[]], None]))
        return t
    t = draw(_rose(list(range(n)), binary))
    if valid:
        if draw(st.integers(0, 9)) == 0:
            t = [t]  # a one-element list stands for its element
        return t
    how = draw(st.sampled_from(["leaf", "leaf", "drop", "dup", "empty", "tuple", "wrong", "chain"]))
    leaves = _leaves(t)
    k = draw(st.integers(0, len(leaves) - 1))
    if how == "leaf":
        return _replace_leaf(t, k, draw(st.sampled_from([n, n + 5, *_BAD_LEAVES])))
    if how == "drop":
        return [t, n] if not isinstance(t, list) else t[:-1] if len(t) > 2 else t[:1]
    if how == "dup":
        return [t, leaves[k]]
    if how == "empty":
        return [t, []] if isinstance(t, list) else [[], t]
    if how == "tuple":
        return draw(
            _rose(list(range(n)), binary).map(lambda x: tuple(x) if isinstance(x, list) else x)
        )
    if how == "chain":
        out: Any = 0
        for i in range(1, n + 1):
            out = [out, i]
        return out
    return draw(wrong)


def internal_nodes(tree: Any, n: int) -> list[list[int]]:
    """Child lists of the internal nodes of a valid nested tree, children before parents."""
    internal: list[list[int]] = []

    def walk(t: Any) -> int:
        # Recursion is fine: the strategies' trees are at most a few hundred levels deep.
        if isinstance(t, (list, tuple)):
            if len(t) == 1:
                return walk(t[0])
            ids = [walk(c) for c in t]
            internal.append(ids)
            return n + len(internal) - 1
        return int(t)

    walk(tree)
    return internal


def heights_for(internal: list[list[int]], n: int, mode: str) -> list[float]:
    """Node heights of a structure.

    ``"rose"``: 0 at the leaves, growing to the root; ``"coalescent"``: 0 at the leaves,
    negative above; ``"pydt"``: 1 at the leaves, divergence times in (0, 1) falling towards
    the root.
    """
    level = [0] * n
    for kids in internal:
        level.append(1 + max(level[c] for c in kids))
    top = max(level) if level else 0
    if mode == "rose":
        return [float(h) for h in level]
    if mode == "coalescent":
        return [-0.5 * h for h in level]
    return [1.0 - h / (top + 1.0) for h in level]


def chain_internal(n: int) -> list[list[int]]:
    """A caterpillar over ``n`` leaves: the deepest tree there is."""
    internal = [[0, 1]]
    for i in range(2, n):
        internal.append([n + len(internal) - 1, i])
    return internal
