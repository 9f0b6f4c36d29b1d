"""Smoke test of benchmarks/bench_quality.py, so that the benchmark cannot rot."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np
import pytest
import rosetree as rt

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_quality")


def test_one_dataset_one_subset(bench, tmp_path, capsys):
    # toy ships with the package, so this needs no data directory.
    out_json, out_md = tmp_path / "q.json", tmp_path / "q.md"
    argv = ["--datasets", "toy", "--subsets", "1", "--learn", "none", "--families", "brt"]
    results = bench.main([*argv, "--json", str(out_json), "--markdown", str(out_md)])
    toy = results["datasets"]["toy"]
    assert (toy["n_rows"], toy["n_features"], toy["n_classes"]) == (48, 12, 3)
    assert set(toy["systems"]) == {
        "rosetree default (BayesianRoseTree())",
        "rosetree BRT",
        "rosetree BHC",
        "rosetree BHC-DP, posterior rule",
        *(
            f"SciPy {m}, {d}"
            for m in ("average", "complete", "single")
            for d in ("Hamming", "Jaccard")
        ),
        "SciPy ward, Euclidean",
    }
    for cells in toy["systems"].values():
        for score in ("purity", "subtree", "loo"):
            mean, se = cells[score]
            assert 0.0 <= mean <= 1.0
            assert se is None  # one subset
    # Flat clusters: every system here has them (SciPy's cut at the true number of classes).
    for label, cells in toy["systems"].items():
        mean, se = cells["ari"]
        assert -0.5 <= mean <= 1.0 and se is None, label
    # The default picks the beta-Bernoulli model on binary data: the same tree as "BRT".
    assert (
        toy["systems"]["rosetree default (BayesianRoseTree())"]["purity"]
        == (toy["systems"]["rosetree BRT"]["purity"])
    )
    written = json.loads(out_json.read_text())
    assert written["datasets"]["toy"]["raw"]["rosetree BRT"]["purity"] == [
        toy["systems"]["rosetree BRT"]["purity"][0]
    ]
    table = out_md.read_text()
    assert "| rosetree BRT |" in table and "dendrogram purity" in table
    assert "command" in capsys.readouterr().out


def test_subsets_are_seeded_and_balanced(bench):
    source = bench.Source(bench.DATA_DIR)
    if not (bench.DATA_DIR / "spambase" / "spambase_bin.csv").exists():
        pytest.skip(f"no shared data at {bench.DATA_DIR} (set ROSETREE_DATA)")
    X0, y0 = source.subset("spambase", 0)
    X0b, _ = source.subset("spambase", 0)
    X1, _ = source.subset("spambase", 1)
    assert X0.shape == (100, 57)
    assert sorted(set(y0)) == ["0", "1"] and (y0 == "1").sum() == 50
    assert (X0 == X0b).all() and not (X0 == X1).all()


def test_whole_sets_come_in_different_row_orders(bench):
    source = bench.Source(bench.DATA_DIR)
    toy = rt.datasets.load_toy()
    orders = [source.subset("toy", i) for i in range(3)]
    rows = {tuple(map(tuple, X)) for X, _ in orders}
    assert len(rows) == 3  # three orders, not one
    for X, y in orders:  # each the whole set, rows and labels moved together
        assert X.shape == toy.data.shape
        whole = sorted(zip(map(tuple, toy.data), toy.target, strict=True))
        assert sorted(zip(map(tuple, X), y, strict=True)) == whole
    assert "whole data set, 10 row orders" in bench.markdown(
        {"datasets": {"toy": bench.run_dataset("toy", 10, set(), source, print, set())}}
    )


def test_real_valued_sets_are_standardized_subsets(bench):
    pytest.importorskip("sklearn")
    source = bench.Source(bench.DATA_DIR)
    assert source.available("wine")
    X, y = source.subset("wine", 0)
    X1, _ = source.subset("wine", 1)
    assert X.shape == (142, 13) and set(y) == {0, 1, 2}
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1.0)
    assert not np.array_equal(X, X1)


def test_a_failing_system_is_recorded_not_fatal(bench, monkeypatch):
    def refuse(make, X):
        raise rt.InvalidDataError("refused")

    monkeypatch.setattr(bench, "default_fit", refuse)
    res = bench.run_dataset("toy", 1, set(), bench.Source(bench.DATA_DIR), print, {"brt"})
    label = "rosetree default (BayesianRoseTree())"
    assert res["systems"][label]["failed_subsets"] == 1
    assert res["systems"][label]["purity"] is None
    assert res["failures"][label] == ["subset 0: InvalidDataError: refused"]
    assert "failed on 1 of 1 subsets" in bench.markdown({"datasets": {"toy": res}})


def test_search_evidence_scores_the_same_subsets(bench, monkeypatch, tmp_path):
    # bench_search_evidence.py reads bench_quality's subsets: its greedy tree is the
    # default rose tree there, and its SciPy trees are on the rose tree's scale.
    search = importlib.import_module("bench_search_evidence")
    out = tmp_path / "s.md"
    results = search.main(["--datasets", "toy", "--subsets", "2", "--markdown", str(out)])
    quality = bench.main(
        ["--datasets", "toy", "--subsets", "2", "--learn", "none", "--families", "brt"]
    )
    rows = results["toy"]["raw"]
    default = quality["datasets"]["toy"]["raw"]["rosetree default (BayesianRoseTree())"]
    assert [r["greedy"][1] for r in rows] == default["purity"]
    source = bench.Source(bench.DATA_DIR)
    for i, r in enumerate(rows):
        X, _ = source.subset("toy", i)
        assert r["greedy"][0] == rt.BayesianRoseTree().fit(X).log_evidence_
        # The coarsened average-linkage tree: at least as probable as the binary one.
        binary = rt.evaluate_tree(X, search.linkage_tree(X, "binary", "average"))
        assert r["average"][0] >= binary.log_evidence
        # BHC's tree under the default's model, coarsened: at least as probable as BHC's.
        est = rt.BayesianRoseTree().fit(X)
        bhc = rt.BayesianRoseTree(model=est.model_, binary=True).fit(X)
        assert r["bhc"][0] >= bhc.log_evidence_
    assert out.read_text().startswith("| data set |")


def test_search_evidence_does_not_count_rounding_as_a_more_probable_tree(bench):
    search = importlib.import_module("bench_search_evidence")
    ln_p = -3687.2612345
    same = np.nextafter(np.nextafter(ln_p, 0.0), 0.0)  # the same tree, summed otherwise
    assert same > ln_p
    assert not search.more_probable((same, 0.5), (ln_p, 0.9))
    assert search.more_probable((ln_p + 0.01, 0.5), (ln_p, 0.9))


def test_integer_data_benchmark_takes_measurements_as_real_and_counts_as_counts(
    monkeypatch, tmp_path
):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    integer = importlib.import_module("bench_integer_data")
    names = ["iris_mm"]
    if (integer.bq.DATA_DIR / "newsgroups" / "source").is_dir():
        names.append("newsgroups_counts")  # its loader checks the counts against the file
    out = tmp_path / "i.md"
    results = integer.main(
        ["--datasets", ",".join(names), "--subsets", "1", "--markdown", str(out)]
    )
    iris = results["iris_mm"]
    assert iris["chosen"] in ({"NormalGamma": 1}, {"NormalInverseWishart": 1})
    assert iris["zeros"] == 0.0
    X, y = integer.subset("iris_mm", *integer.SETS["iris_mm"][0](integer.bq.DATA_DIR), 0)
    assert np.array_equal(X, np.rint(X)) and X.min() > 0
    assert iris["raw"][0]["BayesianRoseTree()"][0] == rt.dendrogram_purity(
        rt.BayesianRoseTree().fit(X).tree_, y
    )
    if "newsgroups_counts" in results:
        assert results["newsgroups_counts"]["chosen"] == {"DirichletMultinomial": 1}
    assert out.read_text().startswith("**iris_mm**")


def test_many_columns_benchmark_scores_every_system_on_the_same_rows(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    many = importlib.import_module("bench_many_columns")
    rows = [many.one(X, y) for X, y in many.synthetic(50, 3, 1)]
    summary = many.summarise(rows)
    assert set(summary) == {*many.DEFAULTS, "SciPy average", "SciPy ward"}
    X, y = next(many.synthetic(50, 3, 1))
    assert X.shape == (60, 50) and np.bincount(y).tolist() == [20, 20, 20]
    est = rt.KingmanCoalescent().fit(X)
    assert summary["KingmanCoalescent()"]["purity"][0] == rt.dendrogram_purity(est.tree_, y)
    assert summary["KingmanCoalescent()"]["clusters"][0] == len(np.unique(est.labels_))
    noise = many.one(*next(many.synthetic(50, 1, 1)))
    assert "purity" not in noise["SciPy average"]  # one group: purity says nothing
    assert noise["SciPy average"]["ari"] == 1.0
    assert "| three_50 | SciPy ward |" in many.markdown({"three_50": summary})
