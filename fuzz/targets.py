"""The fuzz targets: for each public entry point, a strategy for its arguments and a runner.

A target's strategy draws the keyword arguments of its runner (plain, picklable data with
:class:`~fuzz.spec.Build` markers for rosetree objects); the runner makes the calls and
returns the :class:`~fuzz.outputs.Output` values to check. Every public function of
rosetree, the constructor, ``fit`` and every public method of the three estimators, the
cluster models (``GPExperts`` with all of its methods), the tree classes and their methods,
the metrics and the plotting helpers are covered; ``TARGETS`` lists them.
"""

from __future__ import annotations

import itertools
import math
import pickle
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import rosetree as rt
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from .outputs import HEIGHT_ROSE, LOG, LOG_POINT_MASS, REAL, Output
from .spec import Build
from .values import (
    any_float,
    any_int,
    chain_internal,
    chaotic,
    containers,
    heights_for,
    internal_nodes,
    matrix,
    nested_trees,
    param,
    positive,
    vector,
    wrong,
)

__all__ = ["BUILDERS", "TARGETS", "CallbackError", "CallbackModel", "Target", "cycle", "resolve"]


# ============================================================================ building
class CallbackError(Exception):
    """Raised on purpose by :class:`CallbackModel`; rosetree lets it propagate unchanged."""


class CallbackModel(rt.ClusterModel):
    """A Python cluster model whose ``log_marginal`` misbehaves as ``mode`` says."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __repr__(self) -> str:
        return f"CallbackModel({self.mode!r})"

    def log_marginal(self, X: Any) -> Any:
        """A finite value, or NaN, an infinity, a wrong type or an exception (``mode``)."""
        X = np.asarray(X, dtype=np.float64)
        n = X.shape[0]
        ok = float(-0.5 * np.sum(np.nan_to_num(X) ** 2) / (1.0 + n) - n)
        mode = self.mode
        if mode == "ok":
            return ok
        if mode == "raise" or (mode == "raise_some" and n == 2):
            raise CallbackError("log_marginal raised on purpose")
        if mode == "nan" or (mode == "nan_some" and n == 2):
            return math.nan
        if mode == "inf":
            return math.inf
        if mode == "neg_inf" or (mode == "neg_inf_some" and n == 2):
            return -math.inf
        if mode == "huge":
            return 1e308 * n
        if mode == "int":
            return -n
        if mode == "numpy":
            return np.float32(ok)
        if mode == "array":
            return np.array([ok, ok])
        if mode == "string":
            return "x"
        if mode == "none":
            return None
        return ok


def _build_model(name: str, **kwargs: Any) -> Any:
    import rosetree as rt

    return getattr(rt, name)(**kwargs)


def _build_gp_from_data(X: Any, **kwargs: Any) -> Any:
    import rosetree as rt

    return rt.GPExperts.from_data(X, **kwargs)


def _build_bare() -> Any:
    import rosetree as rt

    return rt.ClusterModel()


def _build_model_class(name: str) -> Any:
    import rosetree as rt

    return getattr(rt, name)


def _build_tree(n: Any, internal: Any, heights: Any = None) -> Any:
    import rosetree as rt

    return rt.Tree(n, internal, heights)


def _build_newick(text: Any, **kwargs: Any) -> Any:
    import rosetree as rt

    return rt.Tree.from_newick(text, **kwargs)


def _build_rose_tree(X: Any, tree: Any, **kwargs: Any) -> Any:
    import rosetree as rt

    return rt.evaluate_tree(X, tree, **kwargs)


def _build_fitted_tree(X: Any, model: Any = None, **kwargs: Any) -> Any:
    import rosetree as rt

    return rt.BayesianRoseTree(model=model, **kwargs).fit(X).tree_


def _build_sampled_tree(n: int, seed: int, alpha: float, beta: float, c: float) -> Any:
    import rosetree as rt

    return rt.sample_pydt(n=n, d=1, alpha=alpha, beta=beta, c=c, random_state=seed)[1]


BUILDERS: dict[str, Callable[..., Any]] = {
    "model": _build_model,
    "gp_from_data": _build_gp_from_data,
    "callback": CallbackModel,
    "bare_model": _build_bare,
    "model_class": _build_model_class,
    "tree": _build_tree,
    "newick": _build_newick,
    "rose_tree": _build_rose_tree,
    "fitted_tree": _build_fitted_tree,
    "sampled_tree": _build_sampled_tree,
}


def resolve(value: Any, depth: int = 0) -> Any:
    """``value`` with every :class:`Build` marker made (inner markers first)."""
    if isinstance(value, Build):
        args = [resolve(a, depth + 1) for a in value.args]
        kwargs = {k: resolve(v, depth + 1) for k, v in value.kwargs.items()}
        return BUILDERS[value.kind](*args, **kwargs)
    if depth > 20:
        return value
    if type(value) is dict:
        return {k: resolve(v, depth + 1) for k, v in value.items()}
    if type(value) is list:
        if any(isinstance(v, (Build, dict, list, tuple)) for v in value):
            return [resolve(v, depth + 1) for v in value]
        return value
    if type(value) is tuple:
        return tuple(resolve(v, depth + 1) for v in value)
    return value


# ============================================================================ targets
@dataclass(frozen=True)
class Target:
    """A public entry point: how to draw its arguments and how to call it."""

    name: str
    weight: int
    strategy: Callable[[], st.SearchStrategy[dict[str, Any]]]
    run: Callable[..., list[Output]]


TARGETS: dict[str, Target] = {}


def target(
    name: str, weight: int, strategy: Callable[[], st.SearchStrategy[dict[str, Any]]]
) -> Callable[[Callable[..., list[Output]]], Callable[..., list[Output]]]:
    """Register ``run`` under ``name`` with its argument strategy."""

    def register(run: Callable[..., list[Output]]) -> Callable[..., list[Output]]:
        TARGETS[name] = Target(name, weight, strategy, run)
        return run

    return register


# ---------------------------------------------------------------------------- shared pieces
_FAMILY_DATA = {
    "default": "binary",
    "bernoulli": "binary",
    "dirichlet": "counts",
    "normal_gamma": "real",
    "niw": "real",
    "gp": "real",
    "callback": "real",
    "bare": "real",
    "wrong": "binary",
}
_FAMILIES = ["default", "bernoulli", "bernoulli", "dirichlet", "dirichlet", "normal_gamma"]
_FAMILIES += ["normal_gamma", "niw", "niw", "gp", "callback", "bare", "wrong"]
_CALLBACK_MODES = ["ok", "ok", "ok", "raise", "raise_some", "nan", "nan_some", "inf"]
_CALLBACK_MODES += ["neg_inf", "neg_inf_some", "huge", "int", "numpy", "array", "string", "none"]


@st.composite
def _kwargs(
    draw: st.DrawFn, spec: dict[str, st.SearchStrategy[Any]], p_omit: int = 3
) -> dict[str, Any]:
    """A subset of keyword arguments: each is left out one time in ``p_omit``.

    The model is always given, unless it is the default.
    """
    out = {}
    for key, strategy in spec.items():
        if key == "model" or draw(st.integers(0, p_omit - 1)) != 0:
            out[key] = draw(strategy)
    if out.get("model", 0) is None:
        del out["model"]
    return out


@st.composite
def _spd(draw: st.DrawFn, d: int) -> Any:
    """A symmetric positive definite d × d matrix, or something that is not one."""
    A = draw(hnp.arrays(np.float64, (d, d), elements=st.floats(-2, 2)))
    how = draw(st.sampled_from(["spd", "spd", "diag", "scaled"]))
    if chaotic(draw):
        how = draw(st.sampled_from(["singular", "asym", "neg"]))
    if how == "spd":
        return A @ A.T + draw(st.sampled_from([1e-3, 1.0, 10.0])) * np.eye(d)
    if how == "diag":
        return np.diag(draw(hnp.arrays(np.float64, d, elements=positive())))
    if how == "singular":
        return np.zeros((d, d)) if d else np.zeros((0, 0))
    if how == "asym":
        return A + 2 * d * np.eye(d)
    if how == "neg":
        return -(A @ A.T) - np.eye(d)
    return (A @ A.T + np.eye(d)) * draw(st.sampled_from([1e-300, 1e300, 1e154]))


def _model(family: str, d: int, X: np.ndarray) -> st.SearchStrategy[Any]:
    """A cluster model of ``family`` for ``d`` columns (hyperparameters valid or not)."""
    pos = positive()
    if family == "default":
        return st.none()
    if family == "bernoulli":
        spec = {
            "alpha": param(st.one_of(st.none(), pos, vector(d, pos))),
            "beta": param(st.one_of(st.none(), pos, vector(d, pos))),
        }
        return _kwargs(spec).map(lambda kw: Build("model", "BetaBernoulli", **kw))
    if family == "dirichlet":
        spec = {
            "alpha": param(st.one_of(pos, vector(d, pos))),
            "multinomial_coefficient": param(st.booleans()),
        }
        return _kwargs(spec).map(lambda kw: Build("model", "DirichletMultinomial", **kw))
    if family == "normal_gamma":
        spec = {
            "m0": param(st.one_of(st.none(), st.floats(-5, 5), vector(d, st.floats(-5, 5)))),
            "kappa0": param(st.one_of(st.none(), pos)),
            "a0": param(st.one_of(st.none(), pos)),
            "b0": param(st.one_of(st.none(), pos, vector(d, pos))),
        }
        return _kwargs(spec).map(lambda kw: Build("model", "NormalGamma", **kw))
    if family == "niw":
        spec = {
            "mu0": param(st.one_of(st.none(), vector(d, st.floats(-5, 5)))),
            "kappa0": param(st.one_of(st.none(), pos)),
            "nu0": param(
                st.one_of(
                    st.none(), st.floats(max(d - 1, 0) + 1e-3, d + 10.0), st.integers(0, d + 3)
                )
            ),
            "psi0": param(st.one_of(st.none(), _spd(d), vector(d, pos))),
        }
        return _kwargs(spec).map(lambda kw: Build("model", "NormalInverseWishart", **kw))
    if family == "gp":
        return _gp_model(max(d - 1, 1), X)
    if family == "callback":
        return st.sampled_from(_CALLBACK_MODES).map(lambda m: Build("callback", m))
    if family == "bare":
        return st.just(Build("bare_model"))
    return st.one_of(
        wrong,
        st.sampled_from(["BetaBernoulli", "NormalGamma"]).map(lambda m: Build("model_class", m)),
    )


def _gp_spec(d: int) -> dict[str, st.SearchStrategy[Any]]:
    pos = positive()
    return {
        "signal_variance": param(pos),
        "lengthscale": param(st.one_of(pos, vector(d, pos))),
        "noise_variance": param(st.one_of(pos, st.floats(1e-6, 1.0))),
        "mean": param(st.floats(-3, 3)),
        "mu0": param(st.one_of(st.floats(-3, 3), vector(d, st.floats(-3, 3)))),
        "kappa0": param(pos),
        "nu0": param(st.one_of(st.none(), st.floats(max(d - 1, 0) + 1e-3, d + 10.0))),
        "psi0": param(st.one_of(pos, vector(d, pos), _spd(d))),
    }


def _gp_model(d: int, X: np.ndarray) -> st.SearchStrategy[Any]:
    direct = _kwargs(_gp_spec(d), p_omit=2).map(lambda kw: Build("model", "GPExperts", **kw))
    spec = _gp_spec(d)
    keys = ("signal_variance", "lengthscale", "noise_variance", "mean")
    data_spec = {k: spec[k] for k in keys}
    data_spec["kappa0"] = spec["kappa0"]
    data_spec["nu0"] = spec["nu0"]
    from_data = _kwargs(data_spec, p_omit=2).map(lambda kw: Build("gp_from_data", X, **kw))
    return st.one_of(direct, from_data)


@st.composite
def model_data(
    draw: st.DrawFn,
    families: list[str] | None = None,
    max_n: int = 12,
    max_d: int = 4,
    n: int | None = None,
    wrap: bool = True,
) -> tuple[Any, np.ndarray, Any]:
    """``(model, X as an array, X as passed)``: data of the model's kind most of the time."""
    family = draw(st.sampled_from(families or _FAMILIES))
    if family in ("bare", "wrong") and not chaotic(draw, 3.0):
        family = "default"
    kind = _FAMILY_DATA[family]
    if chaotic(draw, 0.5):
        kind = draw(st.sampled_from(["binary", "counts", "real", "nasty", "unit"]))
    if n is None:
        n = draw(_rows(max_n))
    d = draw(st.integers(0, max_d)) if chaotic(draw, 0.5) else draw(st.integers(1, max_d))
    if family == "gp":
        d = max(d, 2) if draw(st.integers(0, 5)) else d
        n = min(n, 8)
    missing = kind in ("binary", "real") and draw(st.integers(0, 4)) == 0
    X0 = draw(matrix(kind, n=n, d=d, missing=missing))
    model = draw(_model(family, d, X0))
    X = draw(containers(X0, allow=wrap))
    return model, X0, X


@st.composite
def _rows(draw: st.DrawFn, max_n: int = 12, low: int = 2) -> int:
    """A number of rows: ``low .. max_n``, or (by the chaos level) down to 0."""
    if chaotic(draw, 0.5):
        return draw(st.integers(0, max_n))
    return draw(st.one_of(st.integers(low, min(8, max_n)), st.integers(low, max_n)))


@st.composite
def _cols(draw: st.DrawFn, max_d: int = 4) -> int:
    """A number of columns: ``1 .. max_d``, or (by the chaos level) 0."""
    return 0 if chaotic(draw, 0.3) else draw(st.integers(1, max_d))


def _kind_of(X0: np.ndarray) -> str:
    """The kind of data of ``X0``, for fresh rows like it."""
    values = X0[~np.isnan(X0)] if X0.size else X0
    if np.isin(values, (0.0, 1.0)).all():
        return "binary"
    if np.isfinite(values).all() and (values >= 0).all() and (values == np.round(values)).all():
        return "counts"
    return "real"


def _mixing() -> dict[str, st.SearchStrategy[Any]]:
    return {
        "mixing": param(st.sampled_from(["brt", "gamma", "dp"])),
        "gamma": param(st.one_of(st.floats(0.0, 1.0), st.sampled_from([1e-300, 1 - 1e-16, 0.5]))),
        "dp_alpha": param(positive()),
    }


@st.composite
def _work(draw: st.DrawFn, valid: st.SearchStrategy[Any], bounded: bool = True) -> Any:
    """A parameter that sets an amount of work: small valid values, or invalid ones.

    Never a huge valid one, which would be a legitimate long computation, not a hang: 2**64
    and 2**70 only where the parameter is checked to be below 2**63 (``bounded``).
    """
    if chaotic(draw):
        bad = [0, -1, -(2**63), 1.5, math.nan, math.inf, "3", None, True]
        if bounded:
            bad += [2**64, 2**70]
        return draw(st.one_of(st.sampled_from(bad), wrong))
    return draw(valid)


def _seed() -> st.SearchStrategy[Any]:
    return param(st.one_of(st.none(), st.integers(0, 2**64 - 1), st.integers(0, 100)))


@st.composite
def _n_jobs(draw: st.DrawFn) -> Any:
    if chaotic(draw):
        return draw(st.sampled_from([0, -2, 1025, 2**64, 1.5, "2", True, np.int64(-3)]))
    return draw(st.sampled_from([None, -1, 1, 1, 2, np.int64(1)]))


@st.composite
def new_rows(draw: st.DrawFn, X0: np.ndarray, X: Any, kind: str = "real") -> Any:
    """Rows to predict for a model fitted to ``X``.

    The same rows, a subset, fresh rows of the same width, or something else.
    """
    d = X0.shape[1] if X0.ndim == 2 else 1
    how = draw(st.sampled_from(["same", "same", "subset", "fresh", "fresh", "fresh"]))
    if chaotic(draw):
        how = draw(st.sampled_from(["wide", "any"]))
    if how == "same":
        return X
    if how == "subset" and X0.ndim == 2 and len(X0):
        rows = draw(st.lists(st.integers(0, len(X0) - 1), min_size=0, max_size=4))
        return X0[rows]
    if how in ("fresh", "subset"):
        fresh = draw(matrix(kind, n=draw(st.integers(0, 4)), d=d))
        return draw(containers(fresh))
    if how == "wide":
        return draw(matrix(kind, n=draw(st.integers(1, 3)), d=draw(st.integers(0, 5))))
    return draw(st.one_of(wrong, any_float))


# ---------------------------------------------------------------------------- tree outputs
def _rose_outputs(tree: Any, prefix: str = "tree") -> list[Output]:
    out = [
        Output(f"{prefix}.log_evidence", tree.log_evidence, LOG),
        Output(f"{prefix}.log_p", tree.log_p, LOG),
        Output(f"{prefix}.log_f", tree.log_f, LOG),
        Output(f"{prefix}.log_pi", tree.log_pi, LOG),
        Output(f"{prefix}.log_1m_pi", tree.log_1m_pi, LOG),
        Output(f"{prefix}.log_r", tree.log_r, LOG),
    ]
    return out + _tree_outputs(tree, prefix)


def _tree_outputs(tree: Any, prefix: str = "tree") -> list[Output]:
    import rosetree as rt

    # A rose tree's height is -ln r: +inf where r = 0, a node whose rows the model gives
    # zero probability as one cluster (ln f = -inf), as RoseTree documents.
    rule = HEIGHT_ROSE if isinstance(tree, rt.RoseTree) else REAL
    out = [Output(f"{prefix}.heights", tree.heights, rule)]
    if tree.heights is not None and tree.n_leaves >= 2:
        out.append(Output(f"{prefix}.to_linkage()", tree.to_linkage(), rule))
    return out


def _model_fields(model: Any, name: str) -> list[Output]:
    from dataclasses import fields, is_dataclass

    if not is_dataclass(model):
        return []
    return [
        Output(f"{name}.{f.name}", getattr(model, f.name), REAL)
        for f in fields(model)
        if not f.name.startswith("_")
    ]


# ============================================================================ the estimators
_BRT_METHODS = ["predict", "predict_proba", "predict_node_proba", "score", "score_samples"]
_BRT_RULES = {
    "predict": REAL,
    "predict_proba": REAL,
    "predict_node_proba": REAL,
    "score": LOG,
    "score_samples": LOG,
    "fit_predict": REAL,
    "log_predictive_missing": LOG,
    "predict_missing_proba": REAL,
}


def _brt_params(model: Any) -> dict[str, st.SearchStrategy[Any]]:
    return {
        "model": st.just(model),
        **_mixing(),
        "binary": param(st.booleans()),
        "merge_rule": param(st.sampled_from(["likelihood_ratio", "posterior"])),
        "contract": param(st.booleans()),
        "n_jobs": _n_jobs(),
        "approximate": param(st.booleans()),
        "exact_below": param(st.one_of(st.integers(2, 6), st.sampled_from([4000, 2**63, 2**70]))),
        "random_state": _seed(),
        "learn_hyperparameters": param(st.sampled_from([False] * 8 + [True, np.bool_(True)])),
        "n_restarts": _work(st.integers(0, 1), bounded=False),
        "tie_hyperparameters": param(st.booleans()),
        "flat_clusters": param(st.sampled_from(["dp", "cut", "map"])),
        "n_clusters": param(st.one_of(st.none(), st.integers(1, 15))),
        "cut_threshold": param(st.floats(0.0, 1.0)),
    }


@st.composite
def _brt_case(draw: st.DrawFn) -> dict[str, Any]:
    model, X0, X = draw(model_data())
    params = draw(_kwargs(_brt_params(model)))
    kind = _kind_of(X0)
    calls: list[Any] = []
    if draw(st.integers(0, 7)):
        calls.append(("fit", X) if draw(st.integers(0, 5)) else ("fit_predict", X))
    for _ in range(draw(st.integers(0, 3))):
        what = draw(st.sampled_from([*_BRT_METHODS, "missing", "missing_proba", "other"]))
        if what in _BRT_METHODS:
            calls.append((what, draw(new_rows(X0, X, kind))))
        elif what == "missing":
            full = X0.copy()
            if full.ndim == 2:
                full[np.isnan(full)] = draw(st.sampled_from([0.0, 1.0, 2.0, 0.5, math.nan]))
                if full.size and draw(st.integers(0, 3)) == 0:
                    full.flat[0] = 1.0 - full.flat[0]
            calls.append(
                ("log_predictive_missing", draw(st.one_of(st.just(full), containers(full))))
            )
        elif what == "missing_proba":
            calls.append(("predict_missing_proba",))
        else:
            other = draw(st.sampled_from(["pickle", "clone", "get_params", "set_params", "refit"]))
            if other == "set_params":
                spec = _brt_params(model)
                key = draw(
                    st.sampled_from([*spec, "no_such_parameter"] if chaotic(draw) else list(spec))
                )
                value = draw(spec[key]) if key in spec else 1
                calls.append(("set_params", {key: value}))
            elif other == "refit":
                calls.append(("fit", draw(new_rows(X0, X, kind))))
            else:
                calls.append((other,))
    return {"params": params, "calls": calls}


def _run_estimator(
    cls: Any,
    params: dict[str, Any],
    calls: list[Any],
    fitted: Callable[[Any], list[Output]],
    rules: dict[str, Any],
) -> list[Output]:
    est = cls(**params)
    outputs: list[Output] = []
    for call in calls:
        name, args = call[0], call[1:]
        if name == "pickle":
            est = pickle.loads(pickle.dumps(est))
        elif name == "clone":
            est = cls(**est.get_params(deep=False))
        elif name == "get_params":
            est.get_params()
        elif name == "set_params":
            est.set_params(**args[0])
        elif name == "fit":
            assert est.fit(*args) is est
            outputs += fitted(est)
            if isinstance(est, rt.BayesianRoseTree) and args:
                _check_brt_fit(est, args[0])
        else:
            result = getattr(est, name)(*args)
            outputs.append(Output(name, result, rules.get(name, REAL)))
            if name == "fit_predict":
                outputs += fitted(est)
    return outputs


class InvariantError(AssertionError):
    """A result that breaks a documented promise.

    Weights that do not sum to one, a tree that is not binary under ``binary=True``, an
    evidence that re-evaluation does not reproduce, hyperparameter learning that ends below
    its start.
    """


def _close(a: float, b: float, rel: float = 1e-8) -> bool:
    """Whether two finite log values agree to ``rel`` (absolute below 1)."""
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def _check_weights(tree: Any) -> None:
    """``tree.log_cluster_weights()`` sums to one (BRT eq 1.25) where it is finite."""
    log_w = np.asarray(tree.log_cluster_weights(), dtype=float)
    if log_w.size and np.all(log_w < np.inf) and not np.any(np.isnan(log_w)):
        top = float(np.max(log_w))
        total = top + math.log(float(np.sum(np.exp(log_w - top))))
        if not abs(total) <= 1e-9:
            raise InvariantError(f"log_cluster_weights() sums to exp({total!r}), not 1")


def _check_brt_fit(est: Any, X: Any) -> None:
    """Check the promises of a fitted rose tree.

    The tree is binary under ``binary=True`` (without ``contract``); its ``log_evidence_`` is what
    :func:`rosetree.log_evidence` gives for the returned tree and fitted hyperparameters; its
    cluster weights sum to one.
    """
    tree = est.tree_
    binary = est.binary and not est.contract  # contraction makes a rose tree (documented)
    if binary and any(len(c) not in (0, 2) for c in tree.children):
        raise InvariantError("binary=True returned a node with more than two children")
    _check_weights(tree)
    # Columns the model left out (constant_features_) are not part of log_evidence_.
    dropped = np.asarray(getattr(est, "constant_features_", ()), dtype=np.int64)
    if dropped.size:
        if hasattr(X, "toarray"):  # SciPy sparse
            dense = X.toarray()
        elif hasattr(X, "to_numpy"):  # pandas, whose <NA> is a missing value
            dense = X.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            dense = np.asarray(X, dtype=np.float64)
        X = np.delete(dense, dropped, axis=1)
    try:
        again = rt.log_evidence(
            X,
            [list(c) for c in tree.children[tree.n_leaves :]],
            model=est.model_,
            mixing=est.mixing,
            gamma=est.gamma_,
            dp_alpha=est.dp_alpha_,
            binary=binary,
        )
    except (rt.RoseTreeError, CallbackError):
        return
    fitted = float(est.log_evidence_)
    if math.isfinite(fitted) and math.isfinite(again) and not _close(fitted, again):
        raise InvariantError(f"log_evidence_ = {fitted!r}, but the returned tree gives {again!r}")


def _brt_fitted(est: Any) -> list[Output]:
    out = [
        Output("log_evidence_", est.log_evidence_, LOG),
        Output("labels_", est.labels_, REAL),
        Output("gamma_", est.gamma_, REAL),
        Output("dp_alpha_", est.dp_alpha_, REAL),
    ]
    out += _rose_outputs(est.tree_, "tree_")
    if getattr(est, "evidence_trace_", None) is not None and est.learn_hyperparameters:
        out.append(Output("evidence_trace_", est.evidence_trace_, LOG))
        out += _model_fields(est.model_, "model_")
    return out


@target("BayesianRoseTree", 8, _brt_case)
def run_brt(params: dict[str, Any], calls: list[Any]) -> list[Output]:
    """``BayesianRoseTree(**params)``, then each call in turn (fit, predictions, ...)."""
    import rosetree as rt

    return _run_estimator(rt.BayesianRoseTree, params, calls, _brt_fitted, _BRT_RULES)


_KC_RULES = {
    "fit_predict": REAL,
    "score_samples": LOG,
    "score": LOG,
    "attach_proba": REAL,
    "predict_proba_missing": REAL,
    "impute": REAL,
    "log_predictive_missing": LOG_POINT_MASS,
    "cluster_labels": REAL,
}


def _kc_spec(d: int) -> dict[str, st.SearchStrategy[Any]]:
    pos = positive()
    inferences = ["greedy-rate1", "greedy-rate1", "greedy-maxprob", "greedy-minduration"]
    inferences += ["smc-priorprior", "smc-priorpost", "smc-postpost"]
    return {
        "likelihood": param(st.sampled_from(["brownian", "multinomial"])),
        "Lambda": param(st.one_of(pos, vector(d, pos), _spd(d))),
        "inference": param(st.sampled_from(inferences)),
        "n_particles": _work(st.integers(1, 5)),
        "root": param(st.one_of(st.just("flat"), st.floats(0, 10))),
        "llr_threshold": param(st.floats(-10, 10)),
        "learn_hyperparameters": param(st.sampled_from([False, False, True])),
        "hyper_iter": _work(st.integers(1, 3)),
        "Lambda_prior": param(
            st.one_of(
                st.none(),
                st.tuples(pos, pos),
                st.tuples(st.floats(0, 10), vector(d, pos)),
                st.tuples(st.floats(0, 10), _spd(d)),
            )
        ),
        "random_state": _seed(),
        "n_jobs": _n_jobs(),
    }


@st.composite
def _kc_case(draw: st.DrawFn) -> dict[str, Any]:
    d = draw(_cols(3))
    params = draw(_kwargs(_kc_spec(d)))
    multinomial = (
        isinstance(params.get("likelihood"), str) and params["likelihood"] == "multinomial"
    )
    kind = "category" if multinomial else draw(st.sampled_from(["real", "real", "real", "binary"]))
    kind = "nasty" if chaotic(draw, 0.5) else kind
    X0 = draw(matrix(kind, n=draw(_rows(10, low=1)), d=d))
    n = X0.shape[0]
    X = draw(containers(X0))
    calls: list[Any] = []
    if draw(st.integers(0, 7)):
        calls.append(("fit", X) if draw(st.integers(0, 5)) else ("fit_predict", X))
    for _ in range(draw(st.integers(0, 3))):
        what = draw(
            st.sampled_from(
                [
                    *("score_samples", "score", "attach_proba", "predict_proba_missing"),
                    *("impute", "log_predictive_missing", "cluster_labels", "pickle", "set_params"),
                ]
            )
        )
        if what in ("score_samples", "score", "attach_proba"):
            calls.append((what, draw(new_rows(X0, X, kind))))
        elif what == "log_predictive_missing":
            truth = np.where(np.isnan(X0), draw(st.sampled_from([0.0, 1.0, 2.5, -1.0])), X0)
            k = draw(st.integers(0, 3))
            cells = st.lists(st.integers(0, max(n - 1, 0)), min_size=k, max_size=k)
            rows, cols = draw(st.one_of(st.tuples(st.none(), st.none()), st.tuples(cells, cells)))
            if chaotic(draw):
                rows = draw(st.one_of(st.lists(st.integers(-2, n + 1), max_size=3), wrong))
                cols = draw(st.one_of(st.lists(st.integers(-2, d + 1), max_size=3), wrong))
            calls.append((what, draw(st.one_of(st.just(truth), containers(truth))), rows, cols))
        elif what == "cluster_labels":
            calls.append((what, draw(param(st.one_of(st.none(), st.floats(-10, 10))))))
        elif what == "set_params":
            calls.append(("set_params", {"llr_threshold": draw(param(st.floats(-5, 5)))}))
        else:
            calls.append((what,))
    return {"params": params, "calls": calls}


def _kc_fitted(est: Any) -> list[Output]:
    out = [
        Output("log_joint_", est.log_joint_, LOG),
        Output("log_marginal_", est.log_marginal_, LOG),
        Output("particle_log_weights_", est.particle_log_weights_, LOG),
        Output("ess_", est.ess_, REAL),
        # A log-likelihood ratio: +inf where one subtree's evidence is -inf.
        Output("split_llr_", est.split_llr_, LOG_POINT_MASS),
        Output("Lambda_", est.Lambda_, REAL),
        Output("hyper_trace_", est.hyper_trace_, LOG),
        Output("labels_", est.labels_, REAL),
    ]
    return out + _tree_outputs(est.tree_, "tree_")


@target("KingmanCoalescent", 6, _kc_case)
def run_kingman(params: dict[str, Any], calls: list[Any]) -> list[Output]:
    """``KingmanCoalescent(**params)``, then each call in turn."""
    import rosetree as rt

    return _run_estimator(rt.KingmanCoalescent, params, calls, _kc_fitted, _KC_RULES)


@st.composite
def _pydt_case(draw: st.DrawFn) -> dict[str, Any]:
    likelihood = draw(param(st.sampled_from(["gaussian", "gaussian", "probit"]), weight=12))
    kind = "binary" if isinstance(likelihood, str) and likelihood == "probit" else "real"
    if chaotic(draw, 0.5):
        kind = draw(st.sampled_from(["nasty", "binary", "real", "counts"]))
    n = draw(_rows(9))
    X0 = draw(matrix(kind, n=n, d=draw(_cols(3)), missing=kind == "binary" and draw(st.booleans())))
    names = ["alpha", "beta", "c", "sigma2"]
    pos = positive()
    prior_pair = param(st.tuples(pos, pos))
    spec = {
        "alpha": param(st.one_of(st.floats(0, 3), st.just(0.0), st.floats(-0.5, 0))),
        "beta": param(st.one_of(st.floats(0, 0.99), st.just(0.0))),
        "c": param(pos),
        "sigma2": param(pos),
        "scale": param(st.sampled_from(["auto", "columns", None])),
        "likelihood": st.just(likelihood),
        "inference": param(st.sampled_from(["greedy-em", "mcmc"])),
        "n_iter": _work(st.integers(1, 4)),
        "learn_hyperparameters": param(
            st.one_of(
                st.booleans(),
                st.lists(st.sampled_from([*names, "gamma"]), max_size=3),
                st.sets(st.sampled_from(names), max_size=4),
            )
        ),
        "priors": param(
            st.one_of(
                st.none(),
                st.dictionaries(
                    st.sampled_from(["alpha", "beta", "c", "precision"]), prior_pair, max_size=3
                ),
            )
        ),
        "burn_in": param(st.one_of(st.none(), st.integers(0, 3))),
        "thin": _work(st.one_of(st.integers(1, 3), st.just(2**62))),
        "n_predictive_points": _work(st.integers(1, 4)),
        "verbose": st.sampled_from([False] * 9 + [True, 1]),
        "random_state": _seed(),
    }
    params = draw(_kwargs(spec))
    X = draw(containers(X0))
    calls: list[Any] = []
    if draw(st.integers(0, 7)):
        calls.append(("fit", X))
    for _ in range(draw(st.integers(0, 2))):
        what = draw(st.sampled_from(["score_samples", "score", "pickle"]))
        calls.append((what,) if what == "pickle" else (what, draw(new_rows(X0, X, kind))))
    return {"params": params, "calls": calls}


def _pydt_fitted(est: Any) -> list[Output]:
    out = [
        Output("log_joint_", est.log_joint_, LOG),
        Output("alpha_", est.alpha_, REAL),
        Output("beta_", est.beta_, REAL),
        Output("c_", est.c_, REAL),
        Output("sigma2_", est.sigma2_, REAL),
        Output("center_", est.center_, REAL),
        Output("scale_", est.scale_, REAL),
        Output("sample_log_joint_", est.sample_log_joint_, LOG),
        Output("sample_hyperparameters_", est.sample_hyperparameters_, REAL),
        Output("acceptance_rate_", est.acceptance_rate_, REAL),
    ]
    for key, value in est.trace_.items():
        rule = LOG if key in ("objective", "log_joint", "log_likelihood") else REAL
        out.append(Output(f"trace_[{key!r}]", value, rule))
    return out + _tree_outputs(est.tree_, "tree_")


@target("PitmanYorDiffusionTree", 5, _pydt_case)
def run_pydt(params: dict[str, Any], calls: list[Any]) -> list[Output]:
    """``PitmanYorDiffusionTree(**params)``, then each call in turn."""
    import rosetree as rt

    rules = {"score_samples": LOG, "score": LOG}
    return _run_estimator(rt.PitmanYorDiffusionTree, params, calls, _pydt_fitted, rules)


# ============================================================================ BRT functions
@st.composite
def _tree_for(draw: st.DrawFn, X0: np.ndarray, binary: bool = False) -> Any:
    n = X0.shape[0] if X0.ndim >= 1 else 0
    how = draw(st.sampled_from(["nested"] * 8 + ["tree"]))
    if chaotic(draw):
        how = draw(st.sampled_from(["other_n", "garbage"]))
    if how == "nested":
        return draw(nested_trees(n, binary=binary))
    if how == "other_n":
        return draw(nested_trees(max(n + draw(st.sampled_from([-1, 1])), 1), valid=True))
    if how == "tree" and n >= 1:
        nested = draw(nested_trees(n, valid=True))
        return Build("tree", n, internal_nodes(nested, n), None)
    return draw(st.one_of(wrong, any_float))


@st.composite
def _evaluate_case(draw: st.DrawFn) -> dict[str, Any]:
    model, X0, X = draw(model_data())
    binary = draw(param(st.booleans()))
    tree = draw(_tree_for(X0, binary=binary is True))
    kwargs = draw(_kwargs({"model": st.just(model), **_mixing(), "binary": st.just(binary)}))
    return {"X": X, "tree": tree, **kwargs}


@target("evaluate_tree", 4, _evaluate_case)
def run_evaluate_tree(X: Any, tree: Any, **kwargs: Any) -> list[Output]:
    """``rt.evaluate_tree(X, tree, **kwargs)``."""
    import rosetree as rt

    return _rose_outputs(rt.evaluate_tree(X, tree, **kwargs))


@target("log_evidence", 2, _evaluate_case)
def run_log_evidence(X: Any, tree: Any, **kwargs: Any) -> list[Output]:
    """``rt.log_evidence(X, tree, **kwargs)``."""
    import rosetree as rt

    return [Output("log_evidence", rt.log_evidence(X, tree, **kwargs), LOG)]


@st.composite
def _optimal_case(draw: st.DrawFn) -> dict[str, Any]:
    spec = _mixing()
    mixing = draw(spec.pop("mixing"))
    max_n = 9 if isinstance(mixing, str) and mixing == "dp" else 13
    n = draw(st.one_of(st.integers(2, 7), st.integers(0, max_n)))
    model, _X0, X = draw(model_data(families=[f for f in _FAMILIES if f != "gp"], max_n=max_n, n=n))
    kwargs = draw(_kwargs({"model": st.just(model), **spec, "binary": param(st.booleans())}))
    return {"X": X, "mixing": mixing, **kwargs}


@target("optimal_tree", 3, _optimal_case)
def run_optimal_tree(X: Any, **kwargs: Any) -> list[Output]:
    """``rt.optimal_tree(X, **kwargs)``."""
    import rosetree as rt

    return _rose_outputs(rt.optimal_tree(X, **kwargs))


@st.composite
def _learn_case(draw: st.DrawFn) -> dict[str, Any]:
    families = ["default", "bernoulli", "dirichlet", "normal_gamma", "niw", "callback", "wrong"]
    model, _X0, X = draw(model_data(families=families, max_n=8, max_d=3))
    spec = {
        "model": st.just(model),
        **_mixing(),
        "binary": param(st.booleans()),
        "tie": param(st.booleans()),
        "n_restarts": _work(st.integers(0, 1), bounded=False),
        "max_iter": _work(st.integers(1, 3), bounded=False),
        "tol": param(st.one_of(st.floats(0, 1e-2), st.just(0.0))),
        "random_state": _seed(),
    }
    return {"X": X, **draw(_kwargs(spec))}


@target("learn_hyperparameters", 3, _learn_case)
def run_learn(X: Any, **kwargs: Any) -> list[Output]:
    """``rt.learn_hyperparameters(X, **kwargs)``."""
    import rosetree as rt

    result = rt.learn_hyperparameters(X, **kwargs)
    trace = [float(v) for v in result.trace]
    if any(b < a for a, b in itertools.pairwise(trace)):
        raise InvariantError(f"the learning trace decreases: {trace!r}")
    start = {
        k: kwargs[k] for k in ("model", "mixing", "gamma", "dp_alpha", "binary") if k in kwargs
    }
    # Learning's default model is BetaBernoulli(); the estimator's is "auto".
    start.setdefault("model", rt.BetaBernoulli())
    try:
        fitted = rt.BayesianRoseTree(**start).fit(X)
        given = fitted.log_evidence_
        # The estimator leaves constant columns out of a data-scaled model; learning here
        # keeps every column, so the two evidences are of different data.
        if len(getattr(fitted, "constant_features_", ())):
            given = -math.inf
    except (rt.RoseTreeError, CallbackError):
        given = -math.inf
    # With tie=True and per-feature starting values that differ, the documented start is
    # their mean, another prior: only untied learning promises to end above the given one.
    if kwargs.get("tie") is True:
        given = -math.inf
    if math.isfinite(given) and result.log_evidence < given - 1e-8 * max(1.0, abs(given)):
        raise InvariantError(
            f"learning ends at {result.log_evidence!r}, below the start's {given!r}"
        )
    out = [
        Output("log_evidence", result.log_evidence, LOG),
        Output("gamma", result.gamma, REAL),
        Output("dp_alpha", result.dp_alpha, REAL),
        Output("trace", result.trace, LOG),
        Output("start_log_evidences", result.start_log_evidences, LOG),
    ]
    return out + _model_fields(result.model, "model") + _rose_outputs(result.tree)


@st.composite
def _gradient_case(draw: st.DrawFn) -> dict[str, Any]:
    families = ["default", "bernoulli", "dirichlet", "normal_gamma", "niw", "callback", "wrong"]
    model, X0, X = draw(model_data(families=families))
    tree = draw(_tree_for(X0))
    return {"X": X, "tree": tree, **draw(_kwargs({"model": st.just(model), **_mixing()}))}


@target("evidence_gradient", 3, _gradient_case)
def run_gradient(X: Any, tree: Any, **kwargs: Any) -> list[Output]:
    """``rt.evidence_gradient(X, tree, **kwargs)``."""
    import rosetree as rt

    g = rt.evidence_gradient(X, tree, **kwargs)
    return [
        Output("log_evidence", g.log_evidence, LOG),
        Output("model", g.model, REAL),
        Output("mixing", g.mixing, REAL),
    ]


@st.composite
def _marginal_case(draw: st.DrawFn) -> dict[str, Any]:
    families = [f for f in _FAMILIES if f not in ("wrong", "callback")]  # a callback's own method
    model, _X0, X = draw(model_data(families=families, max_n=10))
    return {"model": Build("model", "BetaBernoulli") if model is None else model, "X": X}


@target("ClusterModel.log_marginal", 3, _marginal_case)
def run_log_marginal(model: Any, X: Any) -> list[Output]:
    """``model.log_marginal(X)`` for every cluster model."""
    return [Output("log_marginal", model.log_marginal(X), LOG)]


@st.composite
def _excess_case(draw: st.DrawFn) -> dict[str, Any]:
    k = draw(st.integers(0, 4))
    values = st.one_of(st.floats(-100, 0), any_float)
    a = draw(
        st.one_of(hnp.arrays(np.float64, k, elements=values), st.lists(values, max_size=4), wrong)
    )
    b = draw(
        st.one_of(hnp.arrays(np.float64, k, elements=values), st.lists(values, max_size=4), wrong)
    )
    return {"a": a, "b": b, "n_items": draw(param(st.integers(1, 100)))}


@target("excess_bits", 1, _excess_case)
def run_excess_bits(a: Any, b: Any, n_items: Any) -> list[Output]:
    """``rt.excess_bits(a, b, n_items)``."""
    import rosetree as rt

    return [Output("excess_bits", rt.excess_bits(a, b, n_items), REAL)]


# ============================================================================ GP experts
@st.composite
def _gp_case(draw: st.DrawFn) -> dict[str, Any]:
    d = draw(st.integers(1, 3))
    n = draw(_rows(8, low=1))
    kind = "nasty" if chaotic(draw, 0.5) else "real"
    X0 = draw(matrix(kind, n=n, d=d + 1, missing=False))
    model = draw(_gp_model(d, X0))
    method = draw(
        st.sampled_from(
            [
                *("log_marginal", "log_marginal_inputs", "log_marginal_outputs"),
                *("input_log_predictive", "output_predictive", "posterior_mean"),
                *("predictive_density", "fit_kernel", "fit", "construct"),
            ]
        )
    )
    q = draw(st.integers(0, 4))
    x = draw(
        st.one_of(
            matrix("real", n=q, d=d),
            matrix("real", n=q, d=d),
            matrix("nasty", n=q, d=draw(st.integers(0, 4))),
            hnp.arrays(np.float64, q, elements=st.floats(-5, 5)),
            wrong,
        )
    )
    args: dict[str, Any] = {"cluster": draw(containers(X0))}
    if method in ("input_log_predictive", "posterior_mean"):
        args["x"] = x
    elif method == "output_predictive":
        args["x"] = x
        args["noise"] = draw(param(st.booleans()))
    elif method == "predictive_density":
        args["tree"] = draw(
            st.one_of(
                st.just(Build("fitted_tree", X0, model)),
                st.just(Build("fitted_tree", X0, model)),
                _tree_for(X0).map(lambda t: Build("rose_tree", X0, t, model=model)),
                wrong,
            )
        )
        args["x"] = x
        args["y"] = draw(
            st.one_of(
                hnp.arrays(np.float64, q, elements=st.floats(-5, 5)),
                hnp.arrays(np.float64, draw(st.integers(0, 5)), elements=any_float),
                wrong,
            )
        )
    elif method == "fit_kernel":
        args["bounds"] = draw(
            param(
                st.one_of(st.tuples(positive(), positive()), st.lists(any_float, max_size=3)),
                weight=3,
            )
        )
    return {"model": model, "method": method, **args}


@target("GPExperts", 4, _gp_case)
def run_gp(model: Any, method: str, cluster: Any, **args: Any) -> list[Output]:
    """A ``GPExperts`` model (built directly or by ``from_data``), then one of its methods."""
    import rosetree as rt

    out = _model_fields(model, "model")
    if method == "construct":
        return out
    if method == "fit":
        est = rt.BayesianRoseTree(model=model).fit(cluster)
        return out + _brt_fitted(est)
    if method in ("log_marginal", "log_marginal_inputs", "log_marginal_outputs"):
        return [*out, Output(method, getattr(model, method)(cluster), LOG)]
    if method == "input_log_predictive":
        return [*out, Output(method, model.input_log_predictive(cluster, args["x"]), LOG)]
    if method == "output_predictive":
        value = model.output_predictive(cluster, args["x"], noise=args["noise"])
        return [*out, Output(method, value, REAL)]
    if method == "posterior_mean":
        return [*out, Output(method, model.posterior_mean(cluster, args["x"]), REAL)]
    if method == "predictive_density":
        value = model.predictive_density(args["tree"], cluster, args["x"], args["y"])
        return [*out, Output(method, value, LOG)]
    fitted = (
        model.fit_kernel(cluster, bounds=args["bounds"])
        if "bounds" in args
        else model.fit_kernel(cluster)
    )
    return out + _model_fields(fitted, "fit_kernel()")


# ============================================================================ coalescent / PYDT
@st.composite
def timed_tree(draw: st.DrawFn, n: int, mode: str) -> Any:
    """A timed tree over ``n`` rows as nested dicts or a :class:`rosetree.Tree`.

    The times are those of ``mode`` (``"coalescent"`` or ``"pydt"``); by the chaos level, the
    tree or a time is broken.
    """
    binary = mode == "coalescent" and draw(st.integers(0, 5)) > 0
    if n <= 0:
        return draw(st.one_of(wrong, st.just({"t": 0.5, "children": []})))
    nested = draw(nested_trees(n, binary=binary))
    try:
        internal = internal_nodes(nested, n)
        heights = heights_for(internal, n, mode)
    except (TypeError, ValueError, IndexError, OverflowError, RecursionError):
        return nested  # a broken tree: as nested lists, which have no times
    if mode == "pydt" and draw(st.integers(0, 3)) == 0:  # times squeezed towards 0 or 1
        squeeze = draw(st.sampled_from([1e-12, 1e-300, 0.999999]))
        heights = [
            h if i < n else h * squeeze if squeeze < 1 else 1 - (1 - h) * 1e-12
            for i, h in enumerate(heights)
        ]
    if internal and chaotic(draw):
        k = draw(st.integers(n, n + len(internal) - 1))
        heights[k] = draw(
            st.one_of(st.sampled_from([0.0, 1.0, -1.0, 0.5, heights[k - 1]]), any_float)
        )
    if draw(st.booleans()):
        return Build("tree", n, internal, heights)

    ids: dict[int, Any] = {i: i for i in range(n)}
    for k, kids in enumerate(internal):
        ids[n + k] = {"t": heights[n + k], "children": [ids.get(c, c) for c in kids]}
    root = ids[n + len(internal) - 1] if internal else 0
    if isinstance(root, dict) and chaotic(draw, 0.3):
        root = dict(root)
        del root[draw(st.sampled_from(["t", "children"]))]
    return root


@st.composite
def _cjoint_case(draw: st.DrawFn) -> dict[str, Any]:
    kind = "nasty" if chaotic(draw, 0.5) else draw(st.sampled_from(["real", "real", "category"]))
    n = draw(_rows(9, low=1))
    X0 = draw(matrix(kind, n=n, d=draw(_cols(3))))
    d = X0.shape[1]
    pos = positive()
    likelihood = "multinomial" if kind == "category" and draw(st.booleans()) else "brownian"
    spec = {
        "likelihood": param(st.just(likelihood)),
        "Lambda": param(st.one_of(pos, vector(d, pos), _spd(d))),
        "root": param(st.one_of(st.just("flat"), st.floats(0, 10))),
    }
    tree = draw(timed_tree(n + 1 if chaotic(draw, 0.3) else n, "coalescent"))
    return {"X": draw(containers(X0)), "tree": tree, **draw(_kwargs(spec))}


@target("coalescent_log_joint", 3, _cjoint_case)
def run_coalescent_log_joint(X: Any, tree: Any, **kwargs: Any) -> list[Output]:
    """``rt.coalescent_log_joint(X, tree, **kwargs)``."""
    import rosetree as rt

    # +inf is the density of a point mass: a root pinned at a point the data sit on at
    # time 0, or equal rows merged at time 0 (coalescent_log_joint documents both).
    value = rt.coalescent_log_joint(X, tree, **kwargs)
    return [Output("coalescent_log_joint", value, LOG_POINT_MASS)]


def _pydt_hyper() -> dict[str, st.SearchStrategy[Any]]:
    return {
        "alpha": param(st.one_of(st.floats(0, 5), st.just(0.0), st.floats(-1, 0))),
        "beta": param(st.one_of(st.floats(0, 0.999), st.just(0.0))),
        "c": param(positive()),
    }


@st.composite
def _pprior_case(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(_rows(12, low=1))
    tree = draw(
        st.one_of(
            timed_tree(n, "pydt"),
            timed_tree(n, "pydt"),
            st.builds(
                lambda seed, a: Build("sampled_tree", max(n, 1), seed, a, 0.2, 1.0),
                st.integers(0, 10),
                st.floats(0, 3),
            ),
        )
    )
    return {"tree": tree, **draw(_kwargs(_pydt_hyper()))}


@target("pydt_log_prior", 3, _pprior_case)
def run_pydt_log_prior(tree: Any, **kwargs: Any) -> list[Output]:
    """``rt.pydt_log_prior(tree, **kwargs)``."""
    import rosetree as rt

    return [Output("pydt_log_prior", rt.pydt_log_prior(tree, **kwargs), LOG)]


@st.composite
def _plik_case(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(_rows(10, low=1))
    X0 = draw(matrix("nasty" if chaotic(draw, 0.5) else "real", n=n, d=draw(_cols(3))))
    tree = draw(timed_tree(n + 1 if chaotic(draw, 0.3) else n, "pydt"))
    spec = {"sigma2": param(positive())}
    return {"X": draw(containers(X0)), "tree": tree, **draw(_kwargs(spec))}


@target("pydt_log_likelihood", 3, _plik_case)
def run_pydt_log_likelihood(X: Any, tree: Any, **kwargs: Any) -> list[Output]:
    """``rt.pydt_log_likelihood(X, tree, **kwargs)``."""
    import rosetree as rt

    return [Output("pydt_log_likelihood", rt.pydt_log_likelihood(X, tree, **kwargs), LOG)]


@st.composite
def _sample_case(draw: st.DrawFn) -> dict[str, Any]:
    spec = {
        "n": _work(st.integers(1, 12)),
        "d": _work(st.integers(1, 4)),
        **_pydt_hyper(),
        "sigma2": param(positive()),
        "random_state": _seed(),
    }
    return dict(draw(_kwargs(spec)))


@target("sample_pydt", 2, _sample_case)
def run_sample_pydt(**kwargs: Any) -> list[Output]:
    """``rt.sample_pydt(**kwargs)``."""
    import rosetree as rt

    X, tree = rt.sample_pydt(**kwargs)
    return [Output("X", X, REAL), *_tree_outputs(tree)]


# ============================================================================ trees
_LABEL_TEXT = st.one_of(
    st.sampled_from(
        ["a", "b c", "d_e", "(", ")", "'", "''", ",", ";", ":", "[x]", "", " ", "é", "0", "1"]
    ),
    st.text(max_size=4),
)


@st.composite
def _labels(draw: st.DrawFn, n: int) -> Any:
    how = draw(st.sampled_from(["none", "none", "unique", "unique", "ints"]))
    if chaotic(draw):
        how = draw(st.sampled_from(["dup", "short", "wrong"]))
    if how == "none":
        return None
    if how == "unique":
        return draw(st.lists(_LABEL_TEXT, min_size=n, max_size=n, unique=True))
    if how == "dup":
        return draw(st.lists(_LABEL_TEXT, min_size=n, max_size=n))
    if how == "short":
        return draw(st.lists(_LABEL_TEXT, max_size=n + 2))
    if how == "ints":
        return list(range(n))[::-1]
    return draw(wrong)


@st.composite
def tree_calls(draw: st.DrawFn, n: int, rose: bool) -> list[Any]:
    """One to four method calls on a tree over ``n`` leaves, with arguments."""
    node = param(st.one_of(st.none(), st.integers(0, 2 * n + 2)))
    count = param(st.integers(1, n + 2))
    height = param(st.one_of(st.floats(0, 5), st.floats(-1, 2)))
    names = [
        "leaves", "depth", "n_partitions", "max_clusters", "max_clusters_nodes", "labels_of",
        "labels_at_height", "clusters_at_height", "to_nested", "to_newick", "newick_roundtrip",
        "to_linkage", "to_dict", "to_json", "format", "str", "repr", "pickle",
    ]  # fmt: skip
    if rose:
        names += [
            "log_cluster_weights", "partitions", "cut", "cut_nodes", "remix", "map_partition",
            "map_nodes", "remix",
        ]  # fmt: skip
    calls: list[Any] = []
    for _ in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(names))
        if name in ("leaves", "to_nested"):
            calls.append((name, draw(node)))
        elif name == "n_partitions":
            calls.append((name, draw(param(st.booleans()))))
        elif name in ("max_clusters", "max_clusters_nodes"):
            calls.append((name, draw(count)))
        elif name == "labels_of":
            calls.append(
                (name, draw(st.one_of(st.lists(st.integers(-1, 2 * n), max_size=5), wrong)))
            )
        elif name in ("labels_at_height", "clusters_at_height"):
            calls.append((name, draw(height)))
        elif name in ("to_newick", "newick_roundtrip"):
            calls.append((name, draw(_labels(n)), draw(param(st.booleans()))))
        elif name == "to_dict":
            calls.append((name, draw(_labels(n))))
        elif name == "to_json":
            calls.append(
                (name, draw(_labels(n)), draw(param(st.one_of(st.none(), st.integers(0, 4)))))
            )
        elif name == "format":
            max_leaves = draw(param(st.one_of(st.none(), st.integers(1, n + 1))))
            max_indent = draw(param(st.integers(1, 50)))
            calls.append((name, draw(_labels(n)), max_leaves, max_indent))
        elif name == "partitions":
            calls.append((name, draw(param(st.integers(0, 10_000)))))
        elif name in ("cut", "cut_nodes"):
            calls.append((name, draw(param(st.floats(0, 1)))))
        elif name == "remix":
            spec = _mixing()
            calls.append((name, draw(spec["mixing"]), draw(spec["gamma"]), draw(spec["dp_alpha"])))
        else:
            calls.append((name,))
    return calls


def _clusters(tree: Any) -> set[tuple[int, ...]]:
    """The leaf sets of the internal nodes: the tree up to the order of children."""
    return {tuple(tree.leaves(v)) for v in tree.internal_nodes}


class RoundTripError(AssertionError):
    """``Tree.from_newick(tree.to_newick())`` is not the tree."""


def _run_tree_calls(tree: Any, calls: list[Any]) -> list[Output]:
    import rosetree as rt

    out: list[Output] = []
    for call in calls:
        name, args = call[0], call[1:]
        if name == "str":
            str(tree)
        elif name == "repr":
            repr(tree)
        elif name == "pickle":
            tree = pickle.loads(pickle.dumps(tree))
            out += _tree_outputs(tree, "unpickled")
        elif name == "newick_roundtrip":
            labels, lengths = args
            text = tree.to_newick(labels, lengths=lengths)
            try:
                back = rt.Tree.from_newick(text, labels=labels, lengths=lengths is True)
            except rt.RoseTreeError as exc:
                raise RoundTripError(f"from_newick rejects to_newick's {text!r}: {exc}") from exc
            if _clusters(back) != _clusters(tree):
                raise RoundTripError(f"from_newick(to_newick()) differs: {text!r}")
        elif name == "remix":
            remixed = tree.remix(*args)
            out += _rose_outputs(remixed, "remix()")
        elif name == "log_cluster_weights":
            out.append(Output(name, tree.log_cluster_weights(), LOG))
            _check_weights(tree)
        elif name == "partitions":
            parts = tree.partitions(*args)
            out.append(Output(name, [w for _, w in parts], LOG))
        elif name in (
            "to_linkage",
            "labels_of",
            "max_clusters",
            "labels_at_height",
            "cut",
            "map_partition",
        ):
            out.append(Output(name, getattr(tree, name)(*args), REAL))
        elif name == "n_partitions":
            value = tree.n_partitions(*args)
            out.append(Output(name, value if isinstance(value, float) else 0.0, REAL))
        else:
            getattr(tree, name)(*args)
    return out


@st.composite
def _tree_case(draw: st.DrawFn) -> dict[str, Any]:
    how = draw(st.sampled_from(["valid"] * 12 + ["deep"]))
    if chaotic(draw):
        how = draw(st.sampled_from(["broken", "broken", "wrong_heights", "garbage"]))
    if how == "deep":
        n = draw(st.integers(200, 3000))
        internal = chain_internal(n)
    else:
        n = draw(_rows(14, low=1))
        nested = draw(nested_trees(n, valid=True)) if n > 0 else 0
        internal = internal_nodes(nested, n) if n > 0 else []
    mode = draw(st.sampled_from(["none", "rose", "coalescent", "pydt"]))
    heights: Any = None if mode == "none" else heights_for(internal, n, mode)
    n_arg: Any = n
    if how == "broken" and internal:
        what = draw(st.sampled_from(["child", "dup", "empty", "unary", "n", "cycle"]))
        k = draw(st.integers(0, len(internal) - 1))
        internal = [list(c) for c in internal]
        if what == "child":
            internal[k][0] = draw(
                st.one_of(st.sampled_from([-1, n + k, n + k + 1, 2**64, 2**63]), any_int)
            )
        elif what == "dup":
            internal[k].append(internal[k][0])
        elif what == "empty":
            internal[k] = []
        elif what == "unary":
            internal[k] = internal[k][:1]
        elif what == "cycle":
            internal.append([n + len(internal) - 1, n + len(internal)])
        else:
            n_arg = draw(st.one_of(any_int, wrong))
    elif how == "wrong_heights":
        heights = draw(
            st.one_of(
                st.lists(any_float, min_size=n + len(internal), max_size=n + len(internal)),
                st.lists(st.floats(-2, 2), max_size=n + len(internal) + 1),
                wrong,
            )
        )
    elif how == "garbage":
        internal = draw(st.one_of(wrong, st.lists(st.lists(any_int, max_size=3), max_size=3)))
    calls = draw(tree_calls(max(n, 1), rose=False))
    return {"n_leaves": n_arg, "internal": internal, "heights": heights, "calls": calls}


@target("Tree", 4, _tree_case)
def run_tree(n_leaves: Any, internal: Any, heights: Any, calls: list[Any]) -> list[Output]:
    """``rt.Tree(n_leaves, internal, heights)``, then its methods."""
    import rosetree as rt

    tree = rt.Tree(n_leaves, internal, heights)
    return _tree_outputs(tree) + _run_tree_calls(tree, calls)


def _newick_text(tree: Any, names: list[str] | None, lengths: bool, quote: bool) -> str:
    """Newick text of a nested tree, with ultrametric branch lengths if ``lengths``."""

    def name(i: int) -> str:
        s = str(i) if names is None else names[i]
        return "'" + s.replace("'", "''") + "'" if quote else s

    def height(t: Any) -> int:
        return 1 + max(height(c) for c in t) if isinstance(t, list) else 0

    def walk(t: Any, parent: int) -> str:
        h = height(t)
        length = f":{0.5 * (parent - h)}" if lengths else ""
        if isinstance(t, list):
            return "(" + ",".join(walk(c, h) for c in t) + ")" + length
        return name(t) + length

    return walk(tree, height(tree)) + ";"


_NEWICK_ALPHABET = "()[]':;,_ \t\n0123456789.-+eE abcé"


@st.composite
def _newick_case(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(_rows(12, low=1))
    labels = draw(_labels(n))
    how = draw(st.sampled_from(["valid"] * 8 + ["mutated"] * 4 + ["garbage"] * 2 + ["deep"]))
    if chaotic(draw, 0.3):
        how = "wrong"
    if how == "deep":
        n = draw(st.integers(100, 2000))
        text = "(" * (n - 1) + "0," + ",".join(f"{i})" for i in range(1, n)) + ";"
        labels = None
    elif how == "wrong":
        text = draw(wrong)
    elif how == "garbage" or n == 0:
        text = draw(
            st.one_of(st.text(alphabet=_NEWICK_ALPHABET, max_size=30), st.text(max_size=20))
        )
    else:
        nested = draw(nested_trees(n, valid=True))
        if isinstance(nested, list) and len(nested) == 1:
            nested = nested[0]
        names = labels if isinstance(labels, list) and len(labels) == n else None
        text = _newick_text(
            nested,
            None if names is None else [str(s) for s in names],
            draw(st.booleans()),
            draw(st.booleans()),
        )
        if how == "mutated":
            for _ in range(draw(st.integers(1, 3))):
                i = draw(st.integers(0, len(text)))
                op = draw(st.sampled_from(["insert", "delete", "replace"]))
                ch = draw(st.sampled_from(_NEWICK_ALPHABET))
                if op == "insert":
                    text = text[:i] + ch + text[i:]
                elif op == "delete":
                    text = text[:i] + text[i + 1 :]
                else:
                    text = text[:i] + ch + text[i + 1 :]
    kwargs = draw(
        _kwargs(
            {
                "labels": st.just(labels),
                "lengths": param(st.booleans()),
                "underscore_is_space": param(st.booleans()),
            }
        )
    )
    return {"text": text, **kwargs, "calls": draw(tree_calls(max(n, 1), rose=False))}


@target("Tree.from_newick", 4, _newick_case)
def run_newick(text: Any, calls: list[Any], **kwargs: Any) -> list[Output]:
    """``rt.Tree.from_newick(text, **kwargs)``, then its methods."""
    import rosetree as rt

    tree = rt.Tree.from_newick(text, **kwargs)
    return _tree_outputs(tree) + _run_tree_calls(tree, calls)


@st.composite
def _rose_case(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.integers(0, 19)) == 0:  # a deep tree: a chain over many rows
        n = draw(st.integers(200, 1500))
        X0 = draw(matrix("binary", n=n, d=1))
        tree = Build("rose_tree", X0, Build("tree", n, chain_internal(n), None))
    else:
        families = [f for f in _FAMILIES if f not in ("wrong", "bare")]
        model, X0, _X = draw(model_data(families=families, wrap=False))
        n = X0.shape[0]
        nested = draw(nested_trees(n, valid=True)) if n > 0 else 0
        kwargs = draw(_kwargs({"model": st.just(model), **_mixing()}))
        if draw(st.integers(0, 3)) == 0:
            tree = Build("fitted_tree", X0, model)
        else:
            tree = Build("rose_tree", X0, nested, **kwargs)
    return {"tree": tree, "calls": draw(tree_calls(max(n, 1), rose=True))}


@target("RoseTree", 5, _rose_case)
def run_rose_tree(tree: Any, calls: list[Any]) -> list[Output]:
    """A rose tree (evaluated or fitted), then its methods."""
    return _rose_outputs(tree) + _run_tree_calls(tree, calls)


# ============================================================================ metrics, plot
@st.composite
def _linkage(draw: st.DrawFn, n: int) -> Any:
    from scipy.cluster.hierarchy import linkage

    X = draw(hnp.arrays(np.float64, (max(n, 2), 2), elements=st.floats(-5, 5)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Z = linkage(X, method=draw(st.sampled_from(["single", "average", "ward"])))
    how = draw(st.sampled_from(["nan", "neg", "shape", "ids", "int"])) if chaotic(draw) else "ok"
    if how == "nan":
        Z[draw(st.integers(0, len(Z) - 1)), draw(st.integers(0, 3))] = math.nan
    elif how == "neg":
        Z[:, 2] = -Z[:, 2] - 1.0
    elif how == "shape":
        Z = Z[:, :3]
    elif how == "ids":
        Z[0, 0] = len(Z) * 5
    elif how == "int":
        Z = Z.astype(np.int64)
    return Z


@st.composite
def _metric_case(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(_rows(12))
    if draw(st.integers(0, 19)) == 0:
        n = draw(st.integers(200, 3000))
        tree: Any = Build("tree", n, chain_internal(n), None)
    else:
        how = draw(st.sampled_from(["nested", "nested", "nested", "linkage", "tree", "rose"]))
        if chaotic(draw, 0.3):
            how = "garbage"
        if how == "nested":
            tree = draw(nested_trees(n))
        elif how == "linkage":
            tree = draw(_linkage(n))
        elif how in ("tree", "rose") and n > 0:
            nested = draw(nested_trees(n, valid=True))
            tree = Build("tree", n, internal_nodes(nested, n), None)
            if how == "rose":
                tree = Build("rose_tree", np.zeros((n, 1)) if n else np.zeros((0, 1)), nested)
        else:
            tree = draw(st.one_of(wrong, any_float))
    if chaotic(draw):
        m = max(n + draw(st.sampled_from([0, -1, 1])), 0)
        y = draw(
            st.one_of(
                hnp.arrays(np.float64, m, elements=st.one_of(st.floats(0, 3), st.just(math.nan))),
                st.lists(
                    st.one_of(st.integers(0, 2), st.sampled_from(["a", None])),
                    min_size=m,
                    max_size=m,
                ),
                hnp.arrays(np.int64, (m, 2), elements=st.integers(0, 3)),
                hnp.arrays(np.int64, m, elements=st.integers(0, 3)),
                wrong,
            )
        )
    else:
        y = draw(
            st.one_of(
                hnp.arrays(np.int64, n, elements=st.integers(0, 3)),
                hnp.arrays(np.int64, n, elements=st.integers(0, 1)),
                st.lists(st.sampled_from(["a", "b", "c"]), min_size=n, max_size=n),
                hnp.arrays(np.float64, n, elements=st.integers(0, 2).map(float)),
            )
        )
    fn = draw(st.sampled_from(["dendrogram_purity", "subtree_score", "leave_one_out_accuracy"]))
    return {"fn": fn, "tree": tree, "y": y}


@target("metrics", 4, _metric_case)
def run_metric(fn: str, tree: Any, y: Any) -> list[Output]:
    """``rt.dendrogram_purity`` / ``subtree_score`` / ``leave_one_out_accuracy``."""
    import rosetree as rt

    return [Output(fn, getattr(rt, fn)(tree, y), REAL)]


@st.composite
def _plot_case(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 8))
    X0 = draw(matrix("binary", n=n, d=2, missing=False))
    nested = draw(nested_trees(n, valid=True))
    tree = draw(
        st.sampled_from(
            [
                Build("rose_tree", X0, nested),
                Build("tree", n, internal_nodes(nested, n), None),
                Build(
                    "tree",
                    n,
                    internal_nodes(nested, n),
                    heights_for(internal_nodes(nested, n), n, "coalescent"),
                ),
            ]
        )
    )
    n_nodes = n + len(internal_nodes(nested, n))
    heights = draw(
        param(
            st.one_of(
                st.sampled_from(["depth", "size", "tree", "posterior", "bogus"]),
                hnp.arrays(np.float64, n_nodes, elements=st.one_of(st.floats(0, 5), any_float)),
            ),
            weight=8,
        )
    )
    fn = draw(
        st.sampled_from(["leaf_order", "dendrogram_layout", "dendrogram_layout", "plot_tree"])
    )
    kwargs: dict[str, Any] = {}
    if fn == "plot_tree":
        kwargs = draw(
            _kwargs(
                {
                    "labels": _labels(n),
                    "orientation": param(st.sampled_from(["left", "top"])),
                    "heights": st.just(heights),
                    "clusters": param(
                        st.one_of(
                            st.none(),
                            st.just("cut"),
                            st.lists(st.integers(-1, n_nodes), max_size=3),
                        )
                    ),
                    "threshold": param(st.floats(0, 1)),
                    "cluster_colors": param(
                        st.sampled_from(["tab10", "viridis", ["red", "blue"], "no_such_map"])
                    ),
                    "linewidth": param(positive()),
                    "max_leaf_labels": param(st.integers(0, 10)),
                },
                p_omit=2,
            )
        )
    elif fn == "dendrogram_layout":
        kwargs = {"heights": heights}
    return {"fn": fn, "tree": tree, **kwargs}


@target("plot", 2, _plot_case)
def run_plot(fn: str, tree: Any, **kwargs: Any) -> list[Output]:
    """``rosetree.plot.leaf_order`` / ``dendrogram_layout`` / ``plot_tree``."""
    from rosetree import plot

    if fn != "plot_tree":
        return [Output(fn, getattr(plot, fn)(tree, **kwargs), REAL)]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    try:
        plot.plot_tree(tree, **kwargs)
    finally:
        plt.close("all")
    return []


# ============================================================================ self-tests
# Targets with weight 0 are not in the cycle: they check the harness itself (tests/test_fuzz.py).
@target("_selftest_crash", 0, lambda: st.just({}))
def run_selftest_crash() -> list[Output]:
    """Ends the worker process with SIGABRT, as a failed assertion in native code would."""
    import os

    os.abort()


@target("_selftest_hang", 0, lambda: st.just({"seconds": 3600.0}))
def run_selftest_hang(seconds: float) -> list[Output]:
    """Sleeps past any timeout."""
    import time

    time.sleep(seconds)
    return []


@target("_selftest_exception", 0, lambda: st.just({}))
def run_selftest_exception() -> list[Output]:
    """Raises a plain ValueError, which is not one of rosetree's exceptions."""
    raise ValueError("not a rosetree exception")


@target("_selftest_nan", 0, lambda: st.just({}))
def run_selftest_nan() -> list[Output]:
    """Returns NaN, and -inf where it is allowed."""
    return [Output("allowed", -math.inf, LOG), Output("value", math.nan, LOG)]


def cycle() -> list[str]:
    """Target names, each repeated by its weight: case ``i`` runs ``cycle()[i % len]``."""
    return [name for name, t in TARGETS.items() for _ in range(t.weight)]
