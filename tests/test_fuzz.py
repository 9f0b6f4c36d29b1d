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
    # ---- crashes, hangs and Rust panics
    (
        r"optimal_tree \| crash \| signal SIGSEGV",
        "optimal_tree segfaults when a cluster model's log_marginal returns -inf: "
        "rt.optimal_tree(np.zeros((2, 1)), model=M()) with M.log_marginal returning -np.inf",
    ),
    (
        r"[\w.]+ \| crash \| signal SIGABRT: memory allocation of N bytes failed",
        "rt.Tree with a huge n_leaves aborts the interpreter (Rust's allocation failure): "
        "rt.Tree(2**40, [[0, 1]])",
    ),
    (
        r"[\w.]+ \| other_exception \| pyo3_runtime\.PanicException at rosetree/tree\.py:\d+ "
        r"in __init__ \| capacity overflow",
        "rt.Tree(2**63, [[0, 1]]) raises a Rust panic (capacity overflow)",
    ),
    (
        r"PitmanYorDiffusionTree \| hang \| ",
        "PYDT fits that never return: rt.PitmanYorDiffusionTree(c=1e-12, inference='mcmc', "
        "n_iter=1, learn_hyperparameters=False).fit(np.array([[0.0], [1.0]])); "
        "rt.PitmanYorDiffusionTree(alpha=5e-324, inference='mcmc', n_iter=1, "
        "learn_hyperparameters=['alpha']).fit(np.array([[0.0], [1.0]])); "
        "rt.PitmanYorDiffusionTree(n_iter=1, learn_hyperparameters=False)"
        ".fit(np.array([[1e154], [-1e154]]))",
    ),
    (
        r"PitmanYorDiffusionTree \| other_exception \| pyo3_runtime\.PanicException at ",
        "a Rust panic: rt.PitmanYorDiffusionTree(sigma2=1.7976931348623157e308, "
        "likelihood='probit').fit(np.array([[np.nan], [np.nan], [1.0]]))",
    ),
    # ---- silent NaN or infinity
    (
        r"PitmanYorDiffusionTree \| non_finite \| ",
        "NaN predictive densities after fitting equal rows: rt.PitmanYorDiffusionTree()"
        ".fit(np.array([[1e8], [1e8]])).score_samples(np.array([[1e8]])); NaN trace_ with "
        "sigma2=5e-324: rt.PitmanYorDiffusionTree(sigma2=5e-324).fit(np.zeros((2, 2)))"
        ".trace_['objective']; log_joint_ = +inf with c=1.8e308 (python3 -m fuzz --replay "
        "0:22550)",
    ),
    (
        r"pydt_log_(likelihood|prior) \| non_finite \| [^|]*: NaN",
        "NaN log densities at extreme values: rt.pydt_log_likelihood(np.full((2, 1), 1e300), "
        "{'t': 1e-301, 'children': [0, 1]}, sigma2=1e-300); rt.pydt_log_prior(tree, alpha=2.21, "
        "c=1.7976931348623157e308) for tree = rt.sample_pydt(n=7, d=1, alpha=2.75, "
        "random_state=1)[1]",
    ),
    (
        r"(GPExperts|ClusterModel\.log_marginal|RoseTree|evaluate_tree|log_evidence"
        r"|BayesianRoseTree|optimal_tree|learn_hyperparameters) \| non_finite \| [^|]*: NaN",
        "GPExperts returns NaN for tiny lengthscales or huge inputs: rt.GPExperts(lengthscale="
        "5e-324).log_marginal(np.array([[1e-300, 0.0], [2e-300, 1.0]])); "
        "rt.GPExperts(lengthscale=1e-300).log_marginal(np.full((2, 3), 1e300)); and "
        "DirichletMultinomial with extreme concentrations gives a NaN evidence: "
        "rt.log_evidence(np.array([[1e300, 1.0], [1.0, 1e300]]), [0, 1], "
        "model=rt.DirichletMultinomial(alpha=[1.7976931348623157e308, 1e-300]))",
    ),
    (
        r"[\w.]+ \| non_finite \| [^|]*heights: \+inf",
        "a rose tree node with r = 0 (ln f = -inf) gets height +inf, and to_linkage() holds "
        "inf: rt.evaluate_tree(np.zeros((2, 1)), [0, 1], model=M()).heights with "
        "M.log_marginal returning -np.inf for two rows and 0 for one",
    ),
    (
        r"KingmanCoalescent \| non_finite \| ",
        "NaN or +inf from the coalescent at extreme values: "
        "rt.KingmanCoalescent(root=0.0).fit(np.array([[3e100]])).attach_proba(np.array([[3e100]])) "
        "is NaN; rt.KingmanCoalescent(Lambda=11.4).fit(np.array([[-3e300], [0.0]])).split_llr_ "
        "holds +inf",
    ),
    (
        r"coalescent_log_joint \| non_finite \| ",
        "rt.coalescent_log_joint(np.full((2, 1), 1e300), {'t': -0.5, 'children': [0, 1]}, "
        "Lambda=3e-300) is NaN; rt.coalescent_log_joint(np.zeros((1, 1)), rt.Tree(1, [], [0.0]), "
        "root=0.0) is +inf",
    ),
    (
        r"evidence_gradient \| non_finite \| ",
        "gradients at subnormal hyperparameters are NaN or inf: rt.evidence_gradient("
        "np.ones((3, 1)), [0, 1, 2], gamma=5e-324).mixing is inf; rt.evidence_gradient("
        "np.ones((3, 1)), [0, 1, 2], model=rt.DirichletMultinomial(alpha=5e-324)).model is NaN",
    ),
    (
        r"excess_bits \| non_finite \| ",
        "excess_bits passes NaN through and overflows to -inf: rt.excess_bits([np.nan], [-1.0], 1)"
        "; rt.excess_bits([0.0], [1.7976931348623157e308], 1)",
    ),
    # ---- exceptions that are not rosetree's: unchecked arguments
    (
        r"[\w.]+ \| other_exception \| ValueError at rosetree/[\w/]+\.py:\d+ in [^|]+ \| "
        r"The truth value of an (empty )?array",
        "options and flags given as arrays reach `in` or `if`: "
        "rt.KingmanCoalescent(inference=np.array([1.0, 2.0])).fit(np.zeros((2, 1))), "
        "rt.DirichletMultinomial(multinomial_coefficient=np.array([])).log_marginal(X) raise "
        "NumPy's ValueError",
    ),
    (
        r"excess_bits \| other_exception \| (TypeError|ValueError) at rosetree/functions\.py:",
        "excess_bits does not check element types: rt.excess_bits([1j], [0.0], 1) raises TypeError",
    ),
    (
        r"[\w.]+ \| other_exception \| (TypeError|ValueError|OverflowError) at "
        r"rosetree/tree\.py:\d+ in (__init__|<listcomp>)",
        "rt.Tree does not check its arguments: rt.Tree(None, []) raises TypeError, "
        "rt.Tree(-4, [[0, 1]]) OverflowError, rt.Tree(1, 'x') ValueError",
    ),
    (
        r"[\w.]+ \| other_exception \| (TypeError|OverflowError|MemoryError"
        r"|numpy\._core\._exceptions\._UFuncNoLoopError) at rosetree/tree\.py:\d+ in _dumps",
        "to_json does not check indent: rt.Tree(2, [[0, 1]]).to_json(indent=1.5) raises "
        "TypeError, indent=2**63 OverflowError, indent=2**31 - 1 MemoryError",
    ),
    (
        r"[\w.]+ \| other_exception \| (TypeError|ValueError) at rosetree/tree\.py:\d+ in "
        r"(_check_labels|_read_newick|clusters_at_height|format)",
        "labels, heights and max_leaves of the wrong type: rt.Tree(2, [[0, 1]])"
        ".to_newick(labels=1j), rt.Tree.from_newick('(0,1);', labels=True), "
        "rt.Tree(2, [[0, 1]], [0, 0, 1]).clusters_at_height('a'), "
        "rt.Tree(3, [[0, 1], [2, 3]]).format(max_leaves=1.5) raise TypeError or ValueError",
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
        r"[\w.]+ \| other_exception \| (TypeError|ValueError) at rosetree/config\.py:\d+ in _spec",
        "the base class as a model raises TypeError: rt.ClusterModel().log_marginal("
        "np.zeros((2, 1))); a string psi0 raises float()'s ValueError: "
        "rt.NormalInverseWishart(psi0='a').log_marginal(np.eye(3))",
    ),
    (
        r"[\w.]+ \| other_exception \| TypeError at rosetree/(estimators|functions|learning)"
        r"\.py:\d+ in (fit_brt|optimal_tree|evaluate_tree|fit_tree|_evaluate)",
        "a Python cluster model whose log_marginal returns an array, None or a string gives "
        "float()'s TypeError: rt.BayesianRoseTree(model=M()).fit(np.zeros((2, 1))) with "
        "M.log_marginal returning np.array([0.0, 0.0])",
    ),
    (
        r"[\w.]+ \| other_exception \| (OverflowError|ValueError|TypeError) at rosetree/gp\.py:",
        "GPExperts: math's OverflowError and ValueError at extreme values, and unchecked query "
        "types: rt.GPExperts().log_marginal(np.array([[1e300, 0.0], [1e300, 1.0]])) raises "
        "OverflowError; rt.GPExperts().posterior_mean(np.zeros((2, 2)), 1j) TypeError; "
        "rt.GPExperts().fit_kernel(X, bounds=[]) ValueError",
    ),
    (
        r"KingmanCoalescent \| other_exception \| (IndexError|TypeError|ValueError) at "
        r"rosetree/coalescent\.py:\d+ in (log_predictive_missing|_threshold)",
        "unchecked arguments: est = rt.KingmanCoalescent(likelihood='multinomial')"
        ".fit(np.zeros((3, 1))); est.log_predictive_missing(np.zeros((3, 1)), [0], [8]) raises "
        "IndexError; est.cluster_labels(2**64) TypeError",
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
    (
        r"plot \| other_exception \| (ValueError|TypeError) at rosetree/plot\.py:",
        "plot_tree passes matplotlib's errors through and does not check clusters: "
        "plot_tree(tree, cluster_colors='no_such_map') raises ValueError, "
        "plot_tree(tree, clusters=1.5) TypeError",
    ),
    (
        r"metrics \| other_exception \| IndexError at rosetree/metrics\.py:\d+ in "
        r"_linkage_parents",
        "a linkage matrix with NaN ids: rt.subtree_score(np.array([[np.nan, 1.0, 1.0, 2.0]]), "
        "[0, 1]) raises IndexError",
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
