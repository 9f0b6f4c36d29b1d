"""The greedy Bayesian EM search of the Pitman–Yor diffusion tree, through the core binding."""

import numpy as np
import pytest
import rosetree
from rosetree import _core

PRIORS = {"alpha": (1.0, 1.0), "beta": (1.0, 1.0), "c": (1.0, 1.0), "precision": (1.0, 1.0)}


def four_clusters(per: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.array([[-3.0, -3.0], [3.0, -3.0], [-3.0, 3.0], [3.0, 3.0]])
    return np.repeat(centres, per, axis=0) + 0.05 * rng.standard_normal((4 * per, 2))


def wrap(structure: object) -> rosetree.Tree:
    tree = rosetree.Tree.__new__(rosetree.Tree)
    tree._set_structure(structure)
    return tree


def em(x: np.ndarray, tree: object = None, **kwargs: object) -> tuple:
    """``_core.pydt_greedy_em`` with the hyperparameters and options given by name."""
    process = {k: kwargs.pop(k) for k in ("alpha", "beta", "c", "sigma2")}
    seed, verbose = kwargs.pop("seed"), kwargs.pop("verbose")
    params = _core.PydtParams(**process)
    return _core.pydt_greedy_em(
        x, tree, params, _core.PydtEmParams(**kwargs), seed=seed, verbose=verbose
    )


def run(x: np.ndarray, learn: list[str], seed: int = 0) -> tuple:
    return em(
        x,
        None,
        alpha=0.5,
        beta=0.2,
        c=1.0,
        sigma2=1.0,
        max_iter=3,
        k_best=10,
        learn=learn,
        priors=PRIORS,
        seed=seed,
        verbose=False,
    )


@pytest.mark.parametrize("learn", [[], ["alpha", "beta", "c", "sigma2"]])
def test_greedy_em_recovers_four_clusters_and_reports_the_exact_log_joint(learn):
    per = 6
    x = four_clusters(per, 1)
    best, trace = run(x, learn)
    assert 1 < len(best) <= 10
    assert np.all(np.diff(trace) >= 0)
    tree = wrap(best[0].tree)
    clusters = {tuple(tree.leaves(v)) for v in range(tree.n_nodes)}
    for k in range(4):
        assert tuple(range(k * per, (k + 1) * per)) in clusters
    for state in best:
        t = wrap(state.tree)
        want = rosetree.pydt_log_prior(t, alpha=state.alpha, beta=state.beta, c=state.c)
        want += rosetree.pydt_log_likelihood(x, t, sigma2=state.sigma2)
        assert state.log_joint == pytest.approx(want, rel=1e-10, abs=1e-8)


def test_greedy_em_is_reproducible_and_starts_from_a_given_tree():
    x = four_clusters(3, 2)
    a, ta = run(x, [], seed=5)
    b, tb = run(x, [], seed=5)
    np.testing.assert_array_equal(ta, tb)
    assert a[0].tree.children() == b[0].tree.children()
    best, trace = em(
        x,
        a[0].tree,
        alpha=0.5,
        beta=0.2,
        c=1.0,
        sigma2=1.0,
        max_iter=1,
        k_best=3,
        learn=[],
        priors=PRIORS,
        seed=0,
        verbose=False,
    )
    assert len(best) <= 3
    # EM from the best tree of the first run starts where that run ended.
    assert trace[0] >= ta[-1] - 1e-9


def test_greedy_em_names_bad_arguments():
    x = four_clusters(2, 3)
    with pytest.raises(ValueError, match="sigma2"):
        em(
            x,
            alpha=0.5,
            beta=0.2,
            c=1.0,
            sigma2=-1.0,
            max_iter=1,
            k_best=10,
            learn=[],
            priors=PRIORS,
            seed=0,
            verbose=False,
        )
    with pytest.raises(ValueError, match="k_best"):
        em(
            x,
            alpha=0.5,
            beta=0.2,
            c=1.0,
            sigma2=1.0,
            max_iter=1,
            k_best=0,
            learn=[],
            priors=PRIORS,
            seed=0,
            verbose=False,
        )


@pytest.mark.parametrize("name", ["em_steps", "n_candidates"])
def test_greedy_em_names_a_zero_step_or_candidate_count(name):
    with pytest.raises(rosetree.InvalidParameterError, match=name) as info:
        em(
            four_clusters(2, 3),
            alpha=0.5,
            beta=0.2,
            c=1.0,
            sigma2=1.0,
            max_iter=1,
            k_best=10,
            learn=[],
            priors=PRIORS,
            seed=0,
            verbose=False,
            **{name: 0},
        )
    assert info.value.parameter == name
