"""Progress on request (``verbose=True``) for the long fits of every family, and Ctrl-C."""

import re

import numpy as np
import pytest
import rosetree as rt
from rosetree import _core, _validation

LINE = r"{label}: {phase} (\d+)/(\d+) \((\d+) s\)"


def _progress(err, label, phase):
    found = [tuple(map(int, m)) for m in re.findall(LINE.format(label=label, phase=phase), err)]
    assert found, err
    return found


def test_a_long_greedy_rose_tree_reports_progress_and_stops_on_ctrl_c(ctrl_c):
    # 12,000 rows: seconds of pair scoring, and Ctrl-C comes while the third line of progress
    # (at the third poll, about 0.15 s in) is written.
    X = (np.random.default_rng(1).random((12000, 64)) < 0.5).astype(float)
    lines = ctrl_c.after_lines(3)
    with pytest.raises(KeyboardInterrupt, match=r"^interrupted$"):
        rt.BayesianRoseTree(n_jobs=2, verbose=True).fit(X)
    # The interrupted write is the last: no closing line, no line after Ctrl-C.
    assert len(lines) == 3, lines
    err = "\n".join(lines)
    rows = _progress(err, "rose tree", "(?:scoring pairs|merging)")
    assert len(rows) == 3
    phases = re.findall(r"rose tree: (scoring pairs|merging)", err)
    assert phases == sorted(phases, key=["scoring pairs", "merging"].index)
    # Pairs are scored row by row (12,000 rows), then 11,999 merges follow.
    assert all(0 <= done < total and total in (11999, 12000) for done, total, _ in rows)
    assert [done for done, *_ in rows] == sorted(done for done, *_ in rows)
    assert [secs for *_, secs in rows] == sorted(secs for *_, secs in rows)


def test_coalescent_smc_reports_its_merges_and_the_end(every_poll, capsys):
    # Lines at every poll (every_poll) instead of once a second, so the lines do not depend on
    # how long the fit takes. The paper's model (no noise, Lambda = 1) on 480 rows.
    X = np.random.default_rng(2).normal(size=(480, 3))
    paper = dict(inference="smc-priorpost", n_particles=10, random_state=0, noise=0.0, Lambda=1.0)
    est = rt.KingmanCoalescent(**paper, verbose=True).fit(X)
    err = capsys.readouterr().err
    rows = _progress(err, "coalescent SMC", "sampling merges")
    assert all(total == 479 and 0 <= done < total for done, total, _ in rows)
    assert [done for done, *_ in rows] == sorted(done for done, *_ in rows)
    assert re.search(r"coalescent SMC: done in \d+\.\d s\n$", err)
    # The same fit in silence: progress never changes the result.
    quiet = rt.KingmanCoalescent(**paper, verbose=False)
    assert quiet.fit(X).log_marginal_ == est.log_marginal_
    assert capsys.readouterr().err == ""


def test_by_default_a_fit_reports_only_once_it_has_run_a_while(every_poll, capsys, monkeypatch):
    # verbose="auto" (the default) starts its lines AUTO_PROGRESS_AFTER seconds into a fit:
    # here never, then at once, so that the test does not depend on how long the fit takes.
    X = np.random.default_rng(2).normal(size=(480, 3))
    paper = dict(inference="smc-priorpost", n_particles=10, random_state=0, noise=0.0, Lambda=1.0)
    assert rt.KingmanCoalescent().verbose == "auto"
    monkeypatch.setattr(_validation, "AUTO_PROGRESS_AFTER", 1e9)
    silent = rt.KingmanCoalescent(**paper).fit(X)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(_validation, "AUTO_PROGRESS_AFTER", 0.0)
    shown = rt.KingmanCoalescent(**paper).fit(X)
    err = capsys.readouterr().err
    assert _progress(err, "coalescent SMC", "sampling merges")
    assert re.search(r"coalescent SMC: done in \d+\.\d s\n$", err)
    assert shown.log_marginal_ == silent.log_marginal_
    # Learning's rounds follow the same rule.
    Y = np.random.default_rng(3).normal(size=(40, 2))
    rt.KingmanCoalescent(learn_hyperparameters=True, hyper_iter=2).fit(Y)
    assert "learning Lambda: round 1/2" in capsys.readouterr().err
    monkeypatch.setattr(_validation, "AUTO_PROGRESS_AFTER", 1e9)
    rt.KingmanCoalescent(learn_hyperparameters=True, hyper_iter=2).fit(Y)
    assert capsys.readouterr().err == ""


def test_quick_work_is_silent_at_the_default_interval(capsys):
    # One line a second by default: a fit of a few rows ends before the first.
    X = np.random.default_rng(5).normal(size=(8, 2))
    rt.KingmanCoalescent(inference="smc-priorpost", verbose=True, random_state=0).fit(X)
    assert capsys.readouterr().err == ""


def test_the_progress_interval_is_checked():
    with pytest.raises(rt.InvalidParameterError, match="seconds"):
        _core._set_progress_interval(-1.0)


def test_pydt_greedy_em_reports_within_passes(every_poll, capsys):
    # A pass over the subtrees of hundreds of rows takes minutes: lines come from within the
    # starting trees and the passes (here at every poll), and a summary after each pass.
    X = np.random.default_rng(6).normal(size=(150, 3))
    rt.PitmanYorDiffusionTree(inference="greedy-em", n_iter=1, verbose=True).fit(X)
    err = capsys.readouterr().err
    within = _progress(err, "pydt greedy EM", "(?:building a starting tree, point|moving subtrees)")
    assert all(0 <= done <= total and total <= 150 for done, total, _ in within)
    assert re.search(r"pydt greedy EM: pass 1/1, objective -?\d", err)
    assert re.search(r"pydt greedy EM: done in \d+\.\d s\n$", err)


def test_hyperparameter_learning_reports_each_iteration(capsys):
    animals = rt.datasets.load_animals()
    est = rt.BayesianRoseTree(learn_hyperparameters=True, verbose=True).fit(animals.data[:20])
    lines = capsys.readouterr().err.splitlines()
    values = [
        float(m[1])
        for m in (
            re.match(r"learning: start 1/1, iteration \d+: ln p\(D\|T\) = (.*)", line)
            for line in lines
        )
        if m
    ]
    assert values, lines
    assert values[-1] == pytest.approx(est.log_evidence_, rel=1e-5)
    assert values == sorted(values)  # coordinate ascent never loses evidence

    X = np.random.default_rng(3).normal(size=(40, 2))
    rt.KingmanCoalescent(learn_hyperparameters=True, hyper_iter=3, verbose=True).fit(X)
    rounds = re.findall(r"learning Lambda: round (\d)/3", capsys.readouterr().err)
    assert rounds[0] == "1"


@pytest.mark.parametrize(
    "make", [rt.BayesianRoseTree, rt.KingmanCoalescent, rt.PitmanYorDiffusionTree]
)
def test_verbose_must_be_a_flag(make):
    X = np.random.default_rng(4).normal(size=(6, 2))
    with pytest.raises(rt.InvalidParameterError, match="verbose"):
        make(verbose="yes").fit(X)
