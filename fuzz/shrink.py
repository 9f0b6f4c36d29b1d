"""Greedy shrinking of a finding: simpler arguments that give the same outcome.

Candidates drop keyword arguments, dictionary entries, list elements, array rows and
columns and characters of strings, and replace numbers by 0 or 1, one change at a time; the
first candidate that keeps the finding's signature is kept, until none does or the budget
is spent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .spec import Build, Case

__all__ = ["shrink"]


def _simpler(value: Any) -> Iterator[Any]:
    """Variants of ``value`` itself, simplest first."""
    if isinstance(value, np.ndarray):
        if value.ndim >= 1 and len(value) > 1:
            half = len(value) // 2
            yield value[:half]
            yield value[half:]
            if len(value) <= 16:
                for i in range(len(value)):
                    yield np.delete(value, i, axis=0)
        if value.ndim == 2 and value.shape[1] > 1:
            for j in range(value.shape[1]):
                yield np.delete(value, j, axis=1)
        if value.dtype.kind == "f" and value.size:
            with np.errstate(all="ignore"):
                rounded = np.round(value, 1)
            if not np.array_equal(rounded, value, equal_nan=True):
                yield rounded
    elif isinstance(value, (list, tuple)) and not isinstance(value, str):
        if len(value) > 1:
            half = len(value) // 2
            yield type(value)(value[:half])
            yield type(value)(value[half:])
        if len(value) <= 24:
            for i in range(len(value)):
                yield type(value)(value[:i] + value[i + 1 :])
    elif type(value) is dict:
        for key in value:
            yield {k: v for k, v in value.items() if k != key}
    elif isinstance(value, str):
        if len(value) > 1:
            half = len(value) // 2
            yield value[:half]
            yield value[half:]
        if len(value) <= 48:
            for i in range(len(value)):
                yield value[:i] + value[i + 1 :]
    elif isinstance(value, float) and not isinstance(value, bool):
        for simple in (0.0, 1.0):
            if value != simple:
                yield simple
    elif isinstance(value, int) and not isinstance(value, bool):
        for simple in (0, 1):
            if value != simple:
                yield simple


def _children(value: Any) -> list[tuple[Any, Any]]:
    """``(key, child)`` pairs of a container (keys for :func:`_replace`)."""
    if type(value) is dict:
        return list(value.items())
    if isinstance(value, (list, tuple)) and not isinstance(value, str):
        return list(enumerate(value))
    if isinstance(value, Build):
        return [(("a", i), a) for i, a in enumerate(value.args)] + [
            (("k", k), v) for k, v in value.kwargs.items()
        ]
    return []


def _replace(value: Any, key: Any, new: Any) -> Any:
    if type(value) is dict:
        return {**value, key: new}
    if isinstance(value, (list, tuple)):
        items = list(value)
        items[key] = new
        return type(value)(items)
    kind, k = key
    if kind == "a":
        args = list(value.args)
        args[k] = new
        return Build(value.kind, *args, **value.kwargs)
    return Build(value.kind, *value.args, **{**value.kwargs, k: new})


def _candidates(root: Any, depth: int = 0) -> Iterator[Any]:
    """Every one-change simplification of ``root``, outer changes first."""
    yield from _simpler(root)
    if depth > 12:
        return
    for key, child in _children(root):
        for variant in _candidates(child, depth + 1):
            yield _replace(root, key, variant)


def shrink(
    case: Case,
    same: Callable[[Case], bool],
    max_runs: int = 200,
) -> tuple[Case, int]:
    """The simplest case found that ``same`` accepts, and the number of runs it took."""
    runs = 0
    current = case
    improved = True
    while improved and runs < max_runs:
        improved = False
        for kwargs in _candidates(current.kwargs):
            if runs >= max_runs:
                break
            candidate = Case(current.target, kwargs, case.seed, case.index, case.chaos)
            runs += 1
            if same(candidate):
                current = candidate
                improved = True
                break
    return current, runs
