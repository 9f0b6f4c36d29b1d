"""The fuzzing harness's short profile, and checks of the harness itself.

The harness lives in ``fuzz/`` at the repository root (not in the installed package); see
RELIABILITY.md. ``test_short_profile`` runs a few hundred cases of the long profile's case
stream and fails on any crash, hang, undocumented exception or silent non-finite result,
except the findings listed in ``KNOWN``, which are open bugs of the library, each with a
reproducer, waiting for a fix.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fuzz.runner import FINDING_OUTCOMES, fuzz, run_one  # noqa: E402
from fuzz.spec import Case  # noqa: E402

#: Cases of the short profile (seed 0, the first indices of the long profile's stream).
SHORT_CASES = 400
#: Seconds before a case counts as a hang in the short profile.
SHORT_TIMEOUT = 10.0

#: Open findings of the library (not of the harness). Each entry is a regular expression
#: matched (with re.match) against a finding's signature, ``target | outcome | detail |
#: message``, and the bug with a minimal reproducer (``np`` is NumPy, ``rt`` is rosetree,
#: ``M`` a ``rt.ClusterModel`` subclass). Remove an entry once its bug is fixed.
#: RELIABILITY.md lists the same findings.
KNOWN: list[tuple[str, str]] = []


def signature(finding: dict) -> str:
    """``target | outcome | detail | first line of the message``."""
    message = (finding["result"].get("message") or "").strip().splitlines()
    return f"{finding['key']} | {message[0] if message else ''}"


def _known(finding: dict) -> bool:
    return any(re.match(pattern, signature(finding)) for pattern, _ in KNOWN)


@pytest.fixture(scope="module")
def short_report():
    return fuzz(SHORT_CASES, seed=0, timeout=SHORT_TIMEOUT, shrink_findings=0)


def test_short_profile(short_report):
    """No crash, hang, undocumented exception or silent non-finite result beyond KNOWN."""
    new = [f for f in short_report["findings"] if not _known(f)]
    lines = [
        f"{f['count']} x {f['key']}\n    {f['replay']}\n    {f['case'][:400] if f['case'] else ''}"
        for f in new
    ]
    assert not new, "new fuzzing findings:\n" + "\n".join(lines)


def test_short_profile_reaches_every_target(short_report):
    from fuzz.targets import TARGETS

    assert short_report["cases"] == SHORT_CASES
    assert short_report["counts"]["harness_error"] == 0
    ran = set(short_report["per_target"])
    assert ran == {name for name, t in TARGETS.items() if t.weight > 0}
    # Most cases get past the argument checks into the numerics.
    assert short_report["counts"]["ok"] >= SHORT_CASES // 5


def test_cases_replay_exactly():
    from fuzz.worker import generate

    for index in (0, 17, 123):
        first, second = generate(3, index), generate(3, index)
        assert repr(first) == repr(second)
        assert (first.seed, first.index) == (3, index)
    assert repr(generate(3, 1)) != repr(generate(4, 1))


@pytest.mark.parametrize(
    ("target", "outcome", "detail"),
    [
        ("_selftest_crash", "crash", "death"),
        ("_selftest_hang", "hang", "timeout_s"),
        ("_selftest_exception", "other_exception", "exc_type"),
        ("_selftest_nan", "non_finite", "detail"),
    ],
)
def test_harness_classifies_outcomes(target, outcome, detail):
    from fuzz.targets import TARGETS

    kwargs = {"seconds": 3600.0} if target == "_selftest_hang" else {}
    assert TARGETS[target].weight == 0
    result = run_one(Case(target, kwargs, 0, 0), timeout=3.0)
    assert result["outcome"] == outcome
    assert detail in result
    if outcome == "crash":
        assert result["death"] == "signal SIGABRT"
    if outcome == "non_finite":
        assert result["detail"] == "value: NaN"  # -inf is allowed in a log density


def test_documented_exceptions_are_documented():
    result = run_one(
        Case(
            "Tree",
            {
                "n_leaves": 3,
                "internal": [[0, 1], [3, 2]],
                "heights": None,
                "calls": [("leaves", 99)],
            },
        )
    )
    assert result["outcome"] == "documented"
    assert result["exc_type"] == "rosetree.exceptions.InvalidParameterError"
    assert result["where"].startswith("rosetree/tree.py:")


def test_finding_outcomes_are_the_bad_ones():
    assert set(FINDING_OUTCOMES) == {
        "other_exception",
        "non_finite",
        "crash",
        "hang",
        "harness_error",
    }
