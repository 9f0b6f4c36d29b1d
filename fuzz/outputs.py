"""Which non-finite numbers a target may return.

A target returns a list of :class:`Output`: a name, a value and a rule. The rule is the set
of infinities that the value may legitimately contain:

``REAL``
    Nothing non-finite: probabilities, labels, purities, heights, gradients, hyperparameters,
    predictions, imputed values, sampled data.
``LOG``
    ``-inf`` allowed: a log probability or log density (an evidence, a log marginal
    likelihood, a log predictive density, a log weight). It is ``-inf`` for an impossible
    event, and a density far in a tail may round to ``-inf`` (its logarithm is below
    ``-1.8e308``). ``+inf`` is still a finding.
``LOG_POINT_MASS``
    ``-inf`` and ``+inf`` allowed: the log density of a point mass, which
    :meth:`rosetree.KingmanCoalescent.log_predictive_missing` documents as ``+inf`` at its
    atom, and :func:`rosetree.coalescent_log_joint` for a pinned root or equal rows merged
    at time 0; and the coalescent's ``split_llr_``, a log-likelihood ratio that is ``+inf``
    where one subtree's evidence is ``-inf``.
``HEIGHT_ROSE``
    ``+inf`` allowed: a rose tree's height -ln r_T, infinite where
    r_T = 0 (the model gives the node's rows zero probability as one cluster).
``None``
    Not checked (strings, tree objects, the estimator itself).

NaN is never allowed. :func:`non_finite` returns a description of the first value that
breaks its rule.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

__all__ = ["HEIGHT_ROSE", "LOG", "LOG_POINT_MASS", "REAL", "Output", "non_finite"]

REAL: frozenset[str] = frozenset()
LOG: frozenset[str] = frozenset({"-inf"})
LOG_POINT_MASS: frozenset[str] = frozenset({"-inf", "+inf"})
HEIGHT_ROSE: frozenset[str] = frozenset({"+inf"})


class Output(NamedTuple):
    """A value a target returned (or an attribute it set) and the infinities it may hold."""

    name: str
    value: Any
    allow: frozenset[str] | None


def _arrays(value: Any, depth: int = 0) -> Iterator[np.ndarray]:
    """Every float array inside ``value`` (numbers, arrays, sparse data, lists, dicts)."""
    if depth > 50 or value is None or isinstance(value, (str, bytes)):
        return
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return
    if isinstance(value, (float, np.floating)):
        yield np.asarray(value, dtype=np.float64)
    elif isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            yield np.asarray(value)
        elif value.dtype == object:
            for v in value.ravel()[:10_000]:
                yield from _arrays(v, depth + 1)
    elif hasattr(value, "tocsr") and hasattr(value, "data"):
        yield from _arrays(np.asarray(value.data), depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _arrays(v, depth + 1)
    elif isinstance(value, (list, tuple)):
        for v in value[:10_000]:
            yield from _arrays(v, depth + 1)


def non_finite(outputs: list[Output]) -> str | None:
    """``"name: NaN"`` (or ``+inf``, ``-inf``) for the first value that breaks its rule."""
    for out in outputs:
        if out.allow is None:
            continue
        for arr in _arrays(out.value):
            if np.iscomplexobj(arr):
                arr = np.concatenate([arr.real.ravel(), arr.imag.ravel()])
            if np.isnan(arr).any():
                return f"{out.name}: NaN"
            if "+inf" not in out.allow and np.isposinf(arr).any():
                return f"{out.name}: +inf"
            if "-inf" not in out.allow and np.isneginf(arr).any():
                return f"{out.name}: -inf"
    return None
