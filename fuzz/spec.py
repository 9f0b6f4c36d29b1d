"""What a case is: a target name, its keyword arguments, and markers for objects to build.

Cases travel between processes by pickle, so they hold plain data (numbers, strings, lists,
dicts, NumPy arrays, pandas DataFrames, SciPy sparse matrices) and :class:`Build` markers
for rosetree objects, which the worker makes when it runs the case (so that an error in a
constructor counts as part of the case).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["Build", "Case", "format_case", "format_value"]


class Build:
    """A rosetree object to make in the worker: ``BUILDERS[kind](*args, **kwargs)``."""

    __slots__ = ("args", "kind", "kwargs")

    def __init__(self, kind: str, *args: Any, **kwargs: Any) -> None:
        self.kind = kind
        self.args = args
        self.kwargs = kwargs

    def __getstate__(self) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
        return (self.kind, self.args, self.kwargs)

    def __setstate__(self, state: tuple[str, tuple[Any, ...], dict[str, Any]]) -> None:
        self.kind, self.args, self.kwargs = state

    def __repr__(self) -> str:
        return format_value(self)


class Case:
    """One call of a target: ``TARGETS[target].run(**kwargs)``."""

    __slots__ = ("chaos", "index", "kwargs", "seed", "target")

    def __init__(
        self,
        target: str,
        kwargs: dict[str, Any],
        seed: int | None = None,
        index: int | None = None,
        chaos: float | None = None,
    ) -> None:
        self.target = target
        self.kwargs = kwargs
        self.seed = seed
        self.index = index
        self.chaos = chaos

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.target, self.kwargs, self.seed, self.index, self.chaos)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.target, self.kwargs, self.seed, self.index, self.chaos = state

    def __repr__(self) -> str:
        return format_case(self)


def _float(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def format_value(value: Any, limit: int = 4000) -> str:
    """Python-like source text of ``value`` (``nan`` and ``inf`` as names), cut at ``limit``."""
    text = _format(value, 0)
    if len(text) > limit:
        text = text[:limit] + f"... <{len(text) - limit} more characters>"
    return text


def _format(value: Any, depth: int) -> str:
    if depth > 60:
        return "<deeper>"
    if isinstance(value, Build):
        parts = [repr(value.kind)] + [_format(a, depth + 1) for a in value.args]
        parts += [f"{k}={_format(v, depth + 1)}" for k, v in value.kwargs.items()]
        return f"Build({', '.join(parts)})"
    if isinstance(value, (bool, np.bool_)):
        text = repr(bool(value))
        return text if isinstance(value, bool) else f"np.bool_({text})"
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, np.floating):
        return f"np.{type(value).__name__}({_float(float(value))})"
    if isinstance(value, np.integer):
        return f"np.{type(value).__name__}({int(value)})"
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            body = _format(value.tolist(), depth + 1)
        else:
            body = repr(value.tolist())
        order = ", order='F'" if value.ndim > 1 and value.flags.f_contiguous else ""
        return f"np.array({body}, dtype={str(value.dtype)!r}{order})"
    if isinstance(value, list):
        return "[" + ", ".join(_format(v, depth + 1) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(_format(v, depth + 1) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        items = ", ".join(
            f"{_format(k, depth + 1)}: {_format(v, depth + 1)}" for k, v in value.items()
        )
        return "{" + items + "}"
    if type(value).__name__ == "DataFrame":
        cols = ", ".join(
            f"({c!r}, pd.array({_format(value.iloc[:, j].tolist(), depth + 1)}, "
            f"dtype={str(value.iloc[:, j].dtype)!r}))"
            for j, c in enumerate(value.columns)
        )
        return f"frame([{cols}], n_rows={len(value)})"
    if hasattr(value, "tocsr") and hasattr(value, "nnz"):
        return f"sparse.{type(value).__name__}({_format(value.toarray(), depth + 1)})"
    return repr(value)


def format_case(case: Case) -> str:
    """``target(key=value, ...)`` for a report."""
    args = ", ".join(f"{k}={format_value(v)}" for k, v in case.kwargs.items())
    return f"{case.target}({args})"
