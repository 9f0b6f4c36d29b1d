"""The effective sample size of benchmarks/ess.py against the AR(1) closed form."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def ess_module(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("ess")


def ar1(phi: float, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = noise[0] / np.sqrt(1.0 - phi**2)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + noise[i]
    return x


@pytest.mark.parametrize("phi", [0.0, 0.5, 0.9, 0.98])
def test_ess_of_ar1_matches_the_closed_form(ess_module, phi):
    # tau = (1 + phi) / (1 - phi); the estimator's relative error is about
    # sqrt(2 (2M + 1) / n) with M the window, well under 10 % here.
    n = 200_000
    want = n * (1.0 - phi) / (1.0 + phi)
    got = [ess_module.ess(ar1(phi, n, seed)) for seed in range(3)]
    assert np.mean(got) == pytest.approx(want, rel=0.1)


def test_ess_of_a_strongly_correlated_trace_is_small(ess_module):
    # A random walk has no finite integrated time: a few effective draws at most.
    x = np.cumsum(np.random.default_rng(1).standard_normal(20_000))
    assert ess_module.ess(x) < 100


def test_bad_traces(ess_module):
    assert ess_module.ess(np.ones(10)) == 0.0
    with pytest.raises(ValueError, match="1-d"):
        ess_module.ess(np.zeros((3, 3)))
