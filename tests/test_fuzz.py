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
KNOWN: list[tuple[str, str]] = [
    # ---- hangs
    (
        r"PitmanYorDiffusionTree \| hang \| ",
        "PYDT fits that never return: rt.PitmanYorDiffusionTree(alpha=5e-324, "
        "inference='mcmc', n_iter=1, learn_hyperparameters=['alpha'])"
        ".fit(np.array([[0.0], [1.0]])); rt.PitmanYorDiffusionTree(n_iter=1, "
        "learn_hyperparameters=False).fit(np.array([[1e154], [-1e154]]))",
    ),
    # ---- silent infinities and NaN
    (
        r"[\w.]+ \| non_finite \| [^|]*heights: \+inf",
        "a rose tree node with r = 0 (ln f = -inf) gets height +inf, and to_linkage() holds "
        "inf: rt.evaluate_tree(np.zeros((2, 1)), [0, 1], model=M()).heights with "
        "M.log_marginal returning -np.inf for two rows and 0.0 for one",
    ),
    (
        r"KingmanCoalescent \| non_finite \| ",
        "rt.KingmanCoalescent(root=0.0).fit(np.array([[3e100]])).attach_proba("
        "np.array([[3e100]])) is NaN; rt.KingmanCoalescent(Lambda=11.4)"
        ".fit(np.array([[-3e300], [0.0]])).split_llr_ holds +inf",
    ),
    (
        r"coalescent_log_joint \| non_finite \| coalescent_log_joint: \+inf",
        "a root pinned at the origin gives +inf: rt.coalescent_log_joint(np.zeros((1, 1)), "
        "rt.Tree(1, [], [0.0]), root=0.0)",
    ),
    (
        r"ClusterModel\.log_marginal \| non_finite \| log_marginal: NaN",
        "DirichletMultinomial.log_marginal returns NaN at extreme values (the evidence "
        "functions raise NumericalError there): rt.DirichletMultinomial(alpha=[1e12, 0.5, "
        "1.7976931348623157e308]).log_marginal(np.array([[1e6, 5.0, 1e6], [0.0, 1e300, 1.0]]))",
    ),
    # ---- exceptions that are not rosetree's
    (
        r"[\w.]+ \| other_exception \| (OverflowError|ValueError|TypeError) at rosetree/gp\.py:",
        "GPExperts: math's errors at extreme values and an unchecked y: "
        "rt.GPExperts.from_data(np.zeros((2, 3)), nu0=1.7976931348623157e308)"
        ".log_marginal(np.zeros((2, 3))) raises OverflowError (math range error); "
        "python3 -m fuzz --replay 0:14677 ValueError (math domain error); "
        "model.predictive_density(tree, X, x, 1j) TypeError",
    ),
    (
        r"metrics \| other_exception \| IndexError at rosetree/metrics\.py:\d+ in "
        r"_linkage_parents",
        "a linkage matrix whose ids are out of range: rt.leave_one_out_accuracy("
        "np.array([[5.0, 1.0, 7.1, 2.0]]), [0, 0]) raises IndexError",
    ),
    (
        r"plot \| other_exception \| ValueError at rosetree/plot\.py:\d+ in plot_tree",
        "plot_tree with finite heights whose range overflows passes matplotlib's ValueError "
        "through: plot_tree(rt.Tree(2, [[0, 1]]), heights=np.array([0.0, 0.0, "
        "1.7976931348623157e308]))",
    ),
]


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
