"""The child process: draws cases, runs them one after another, reports each outcome.

Started by :mod:`fuzz.runner` as ``python -m fuzz.worker``. Messages are length-prefixed
pickles: on stdin the parent sends ``("gen", seed, index)`` (draw case ``index`` of
``seed`` and run it) or ``("case", pickled_case)`` (run a given case, when shrinking); on
the original stdout the worker answers ``("start", ...)`` before it runs a case, so the
parent knows the case if the process dies, and ``("result", index, result)`` after it.
Everything the library prints goes to stderr, which the parent keeps in a file and clears
before each case.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import struct
import sys
import time
import traceback
import warnings
from functools import cache
from typing import Any, BinaryIO

__all__ = ["case_seed", "classify", "generate", "main", "read_message", "run_case", "write_message"]

#: Address-space limit of a worker, so that a huge allocation fails at once rather than
#: swapping the machine (``FUZZ_MEMORY_MB`` overrides it).
DEFAULT_MEMORY_MB = 4096


def write_message(stream: BinaryIO, message: Any) -> None:
    """Send one pickled message with its length."""
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(stream: BinaryIO) -> Any:
    """The next message, or None at the end of the stream."""
    head = _read_exact(stream, 8)
    if head is None:
        return None
    body = _read_exact(stream, struct.unpack("<Q", head)[0])
    return None if body is None else pickle.loads(body)


def case_seed(seed: int, index: int) -> int:
    """The hypothesis seed of case ``index`` of run ``seed``."""
    return (int(seed) << 40) + int(index)


@cache
def _strategy(name: str) -> Any:
    from .targets import TARGETS
    from .values import chaos

    return chaos(TARGETS[name].strategy())


def generate(seed: int, index: int) -> Any:
    """Case ``index`` of run ``seed``.

    Its target is given by :func:`fuzz.targets.cycle`; its arguments are drawn by
    hypothesis from a seed that depends on ``(seed, index)`` alone.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    from .spec import Case
    from .targets import cycle

    names = cycle()
    name = names[index % len(names)]
    drawn: list[Any] = []

    # The first example hypothesis tries is the simplest one; the second is random.
    @hypothesis_seed(case_seed(seed, index))
    @settings(
        database=None,
        max_examples=2,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=False,
        verbosity=Verbosity.quiet,
        print_blob=False,
    )
    @given(_strategy(name))
    def draw(kwargs: Any) -> None:
        drawn.append(kwargs)

    draw()
    level, kwargs = drawn[-1]
    return Case(name, kwargs, seed, index, level)


def _exception_type(exc: BaseException) -> str:
    cls = type(exc)
    module = cls.__module__
    if module in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{module}.{cls.__qualname__}"


def _where(tb: Any) -> str:
    """The innermost frame in rosetree (``rosetree/file.py:line in function``).

    The innermost frame of all when no frame is in rosetree.
    """
    frames = traceback.extract_tb(tb)
    if not frames:
        return "?"
    inside = [f for f in frames if f"{os.sep}rosetree{os.sep}" in f.filename]
    frame = inside[-1] if inside else frames[-1]
    parts = frame.filename.split(os.sep)
    short = os.sep.join(parts[-2:])
    return f"{short}:{frame.lineno} in {frame.name}"


def classify(exc: BaseException) -> str:
    """The outcome class of an exception.

    ``"documented"`` for rosetree's own exceptions (and the fuzzer's callback's), else
    ``"other_exception"``.
    """
    import rosetree as rt

    from .targets import CallbackError

    if isinstance(exc, (rt.RoseTreeError, CallbackError)):
        return "documented"
    return "other_exception"


def _warning_records(caught: list[warnings.WarningMessage]) -> list[list[str]]:
    seen: dict[tuple[str, str], list[str]] = {}
    for w in caught:
        category = w.category.__module__ + "." + w.category.__qualname__
        category = category.removeprefix("builtins.")
        where = f"{os.path.basename(w.filename)}:{w.lineno}"
        seen.setdefault((category, where), [category, where, str(w.message)[:200]])
    return list(seen.values())


def run_case(case: Any) -> dict[str, Any]:
    """Run one case and classify its outcome (see :mod:`fuzz`)."""
    from .outputs import non_finite
    from .targets import TARGETS, resolve

    target = TARGETS[case.target]
    result: dict[str, Any] = {"outcome": "ok"}
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outputs = target.run(**resolve(case.kwargs))
            bad = non_finite(outputs)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            result = {
                "outcome": classify(exc),
                "exc_type": _exception_type(exc),
                "message": str(exc)[:600],
                "where": _where(exc.__traceback__),
                "traceback": "".join(tb)[-3000:],
            }
        else:
            if bad is not None:
                result = {"outcome": "non_finite", "detail": bad}
    result["seconds"] = time.perf_counter() - start
    result["warnings"] = _warning_records(caught)
    return result


def _limit_memory() -> None:
    try:
        import resource
    except ImportError:  # pragma: no cover - not on POSIX
        return
    limit = int(os.environ.get("FUZZ_MEMORY_MB", DEFAULT_MEMORY_MB)) * 2**20
    if limit > 0:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _clear_stderr() -> None:
    try:
        os.ftruncate(2, 0)
    except OSError:
        pass


def main() -> None:
    """Serve cases on stdin until it closes."""
    commands = sys.stdin.buffer
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # print() in the library must not corrupt the replies
    sys.stdout = sys.stderr
    faulthandler.enable()
    _limit_memory()
    import matplotlib

    matplotlib.use("Agg")
    from .spec import format_case

    while True:
        message = read_message(commands)
        if message is None or message[0] == "quit":
            return
        _clear_stderr()
        try:
            if message[0] == "gen":
                case = generate(message[1], message[2])
            else:
                case = pickle.loads(message[1])
        except Exception:  # a bug in the fuzzer's strategies, not in rosetree
            index = message[2] if message[0] == "gen" else None
            write_message(replies, ("start", index, "?", "<the case could not be drawn>", None))
            error = {"outcome": "harness_error", "traceback": traceback.format_exc()[-3000:]}
            write_message(replies, ("result", index, error))
            continue
        try:
            blob: bytes | None = pickle.dumps(case, protocol=pickle.HIGHEST_PROTOCOL)
        except (RecursionError, pickle.PicklingError, TypeError, AttributeError):
            blob = None
        write_message(replies, ("start", case.index, case.target, format_case(case), blob))
        result = run_case(case)
        write_message(replies, ("result", case.index, result))


if __name__ == "__main__":
    main()
