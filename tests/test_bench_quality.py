"""Smoke test of benchmarks/bench_quality.py, so that the benchmark cannot rot."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_quality")


def test_one_dataset_one_subset(bench, tmp_path, capsys):
    # toy ships with the package, so this needs no data directory.
    out_json, out_md = tmp_path / "q.json", tmp_path / "q.md"
    argv = ["--datasets", "toy", "--subsets", "1", "--learn", "none"]
    results = bench.main([*argv, "--json", str(out_json), "--markdown", str(out_md)])
    toy = results["datasets"]["toy"]
    assert (toy["n_rows"], toy["n_features"], toy["n_classes"]) == (48, 12, 3)
    assert set(toy["systems"]) == {
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
