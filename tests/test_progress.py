"""Progress on request (``verbose=True``) for the long fits of every family, and Ctrl-C."""

import re

import numpy as np
import pytest
import rosetree as rt

LINE = r"{label}: {phase} (\d+)/(\d+) \((\d+) s\)"


def _progress(err, label, phase):
    found = [tuple(map(int, m)) for m in re.findall(LINE.format(label=label, phase=phase), err)]
    assert found, err
    return found


def test_a_long_greedy_rose_tree_reports_progress_and_stops_on_ctrl_c(ctrl_c, capsys):
    # 12,000 rows: about 4 s of pair scoring on one idle core, so Ctrl-C at 1.6 s comes
    # after the first progress line (at 1 s) and before the end, loaded or not.
    X = (np.random.default_rng(1).random((12000, 64)) < 0.5).astype(float)
    ctrl_c(after=1.6)
    with pytest.raises(KeyboardInterrupt, match=r"^interrupted$"):
        rt.BayesianRoseTree(n_jobs=2, verbose=True).fit(X)
    err = capsys.readouterr().err
    rows = _progress(err, "rose tree", "(?:scoring pairs|merging)")
    phases = re.findall(r"rose tree: (scoring pairs|merging)", err)
    assert phases == sorted(phases, key=["scoring pairs", "merging"].index)
    # Pairs are scored row by row (12,000 rows), then 11,999 merges follow.
    assert all(0 <= done < total and total in (11999, 12000) for done, total, _ in rows)
    assert [secs for *_, secs in rows] == sorted(secs for *_, secs in rows)


def test_coalescent_smc_reports_its_merges_and_the_end(capsys):
    # 480 rows under the paper's model (no noise, Lambda = 1): about 2.5 s on one core, so
    # progress lines (one a second) must appear (the default model's fit takes about 1 s).
    X = np.random.default_rng(2).normal(size=(480, 3))
    paper = dict(inference="smc-priorpost", n_particles=10, random_state=0, noise=0.0, Lambda=1.0)
    est = rt.KingmanCoalescent(**paper, verbose=True).fit(X)
    err = capsys.readouterr().err
    rows = _progress(err, "coalescent SMC", "sampling merges")
    assert all(total == 479 and 0 <= done < total for done, total, _ in rows)
    assert re.search(r"coalescent SMC: done in \d+\.\d s", err)
    # The same fit in silence: progress never changes the result.
    quiet = rt.KingmanCoalescent(**paper)
    assert quiet.fit(X).log_marginal_ == est.log_marginal_
    assert capsys.readouterr().err == ""


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
