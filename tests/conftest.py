import os
import signal
import sys

import pytest
from hypothesis import HealthCheck, settings
from rosetree import _core

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


class _CtrlC:
    """Ctrl-C driven by the computation's own steps, never by the clock.

    ``at_poll(k)`` presses Ctrl-C (a real SIGINT to this process) at the ``k``-th time the
    next interruptible computation asks whether to stop, and holds the computation there
    until the waiting thread has seen it. ``after_lines(k)`` replaces ``sys.stderr`` with a
    stand-in that records lines of progress and raises ``KeyboardInterrupt`` while the
    ``k``-th is written, as Ctrl-C pressed then would; ``progress()`` has asked for a line at
    every poll (about 20 a second) instead of one a second.
    """

    def __init__(self, monkeypatch):
        self.monkeypatch = monkeypatch
        self.lines: list[str] = []

    def at_poll(self, k: int) -> None:
        _core._ctrl_c_at_poll(k)

    def after_lines(self, k: int) -> list[str]:
        lines = self.lines

        class Stderr:
            def write(self, text):
                lines.extend(text.splitlines())
                if len(lines) >= k:
                    raise KeyboardInterrupt
                return len(text)

            def flush(self):
                pass

        self.monkeypatch.setattr(sys, "stderr", Stderr())
        return lines


@pytest.fixture
def every_poll():
    """Lines of progress at every poll of the waiting thread instead of once a second."""
    previous = _core._set_progress_interval(0.0)
    yield
    _core._set_progress_interval(previous)


@pytest.fixture
def ctrl_c(monkeypatch, every_poll):
    """A :class:`_CtrlC`, with Python's own SIGINT handler installed for the test.

    A process started in the background (``nohup``, ``cmd &`` in a script, some CI runners)
    inherits SIGINT ignored, and Python then raises no KeyboardInterrupt at all.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield _CtrlC(monkeypatch)
    _core._ctrl_c_at_poll(0)
    signal.signal(signal.SIGINT, previous)
