import os
import signal
import threading

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=500, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def ctrl_c():
    """``press(after)`` sends this process SIGINT ``after`` seconds later, as Ctrl-C would.

    Python's own SIGINT handler is installed for the test: a process started in the
    background (``nohup``, ``cmd &`` in a script, some CI runners) inherits SIGINT ignored,
    and Python then raises no KeyboardInterrupt at all.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timers = []

    def press(after: float) -> None:
        timer = threading.Timer(after, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        timers.append(timer)

    yield press
    for timer in timers:
        timer.cancel()
    signal.signal(signal.SIGINT, previous)
