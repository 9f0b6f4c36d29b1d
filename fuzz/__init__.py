"""A fuzzing harness for rosetree's public API (not part of the installed library).

Every public function, estimator and tree method of rosetree is called with arguments
drawn by hypothesis strategies, valid and invalid alike, in long-lived child processes, so
that a crash (a segfault, an abort, a Rust panic that ends the process) or a hang is caught
and attributed to the case in flight. Each case ends in one outcome class:

``ok``
    The call returned, and every number it returned is finite where it must be.
``documented``
    It raised one of rosetree's documented exceptions (a :class:`rosetree.RoseTreeError`
    subclass: ``InvalidParameterError``, ``InvalidDataError``, ``InvalidTreeError``,
    ``NumericalError``, ``NotFittedError``), or an exception that the fuzzer's own
    cluster model raised on purpose (rosetree documents that such exceptions propagate).
``other_exception``
    Any other exception, including a plain ``ValueError`` or ``TypeError`` that is not a
    rosetree class, ``IndexError``, ``OverflowError``, ``MemoryError``, ``RecursionError``
    and pyo3's ``PanicException`` (a Rust panic turned into a Python exception).
``non_finite``
    It returned NaN anywhere, or an infinity where the output cannot legitimately be
    infinite (see :mod:`fuzz.outputs` for the rule: ``-inf`` is allowed only in log
    probabilities and log densities).
``crash``
    The child process died while running the case.
``hang``
    The case ran past the per-case timeout; the child was killed.

A case is identified by ``(seed, index)`` and replayed with
``python3 -m fuzz --replay SEED:INDEX``. See ``RELIABILITY.md`` at the repository root.
"""

from __future__ import annotations

__all__ = ["OUTCOMES"]

#: The outcome classes, in report order.
OUTCOMES = ("ok", "documented", "other_exception", "non_finite", "crash", "hang")
