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
    # ---- crashes and hangs
    (
        r"[\w.]+ \| crash \| signal SIGABRT: memory allocation of N bytes failed",
        "rt.Tree with a huge n_leaves aborts the interpreter (Rust's allocation failure): "
        "rt.Tree(2**40, [[0, 1]])",
    ),
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
        r"evidence_gradient \| non_finite \| ",
        "a gradient overflows to inf at a subnormal gamma: rt.evidence_gradient("
        "np.ones((3, 1)), [0, 1, 2], gamma=5e-324).mixing",
    ),
    (
        r"excess_bits \| non_finite \| excess_bits: -inf",
        "excess_bits overflows to -inf: rt.excess_bits([0.0], [1.7976931348623157e308], 1)",
    ),
    # ---- exceptions that are not rosetree's: unchecked arguments
    (
        r"[\w.]+ \| other_exception \| ValueError at rosetree/[\w/]+\.py:\d+ in [^|]+ \| "
        r"The truth value of an (empty )?array",
        "flags given as arrays reach `if`: rt.DirichletMultinomial(multinomial_coefficient="
        "np.array([])).log_marginal(np.ones((2, 2))) raises NumPy's ValueError",
    ),
    (
        r"[\w.]+ \| other_exception \| TypeError at rosetree/tree\.py:\d+ in format",
        "rt.Tree(3, [[0, 1], [2, 3]]).format(max_leaves=1.5) raises TypeError",
    ),
    (
        r"[\w.]+ \| other_exception \| (OverflowError|ValueError|TypeError) at "
        r"rosetree/tree\.py:\d+ in (max_clusters_nodes|partitions)",
        "max_clusters and partitions do not check their integer: rt.Tree(2, [[0, 1]], "
        "[0, 0, 1]).max_clusters(2**64) raises OverflowError, rt.evaluate_tree(np.ones((3, 1)), "
        "[0, [1, 2]]).partitions(-1) OverflowError",
    ),
    (
        r"[\w.]+ \| other_exception \| fuzz\.targets\.RoundTripError at ",
        "to_newick does not quote names with control characters that from_newick reads as "
        "white space: rt.Tree(2, [[0, 1]]).to_newick(labels=['a\\x0bb', 'c']) gives "
        "'(a\\x0bb,c);', which from_newick rejects",
    ),
    (
        r"[\w.]+ \| other_exception \| ValueError at rosetree/config\.py:\d+ in _spec",
        "a string psi0 raises float()'s ValueError: "
        "rt.NormalInverseWishart(psi0='a').log_marginal(np.eye(3))",
    ),
    (
        r"GPExperts \| other_exception \| ValueError at rosetree/gp\.py:\d+ in fit_kernel",
        "rt.GPExperts().fit_kernel(np.array([[0.0, 0.0], [1.0, 1.0]]), bounds=[]) raises "
        "ValueError (unpacking)",
    ),
    (
        r"KingmanCoalescent \| other_exception \| TypeError at rosetree/coalescent\.py:\d+ in "
        r"_threshold",
        "est.cluster_labels(2**64) raises NumPy's TypeError (np.isnan of a Python int beyond "
        "64 bits), for est = rt.KingmanCoalescent().fit(np.array([[0.0], [1.0], [3.0]]))",
    ),
    (
        r"PitmanYorDiffusionTree \| other_exception \| TypeError at rosetree/pydt\.py:\d+ in "
        r"_learn_flags",
        "rt.PitmanYorDiffusionTree(learn_hyperparameters=[[1.0]]).fit(X) raises "
        "TypeError: unhashable type",
    ),
    (
        r"(learn_hyperparameters|BayesianRoseTree) \| other_exception \| (TypeError|ValueError) "
        r"at rosetree/learning\.py:\d+ in learn_hyperparameters",
        "learn_hyperparameters does not check random_state: rt.learn_hyperparameters("
        "np.array([[0.0], [1.0], [1.0]]), random_state=1.5) raises NumPy's TypeError, "
        "random_state=-1 its ValueError",
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
