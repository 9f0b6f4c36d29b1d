"""What every rosetree estimator shares: scikit-learn's parameter and tag protocols.

scikit-learn is not a dependency: the protocols are implemented here, and scikit-learn's
classes are imported only when scikit-learn itself asks for them (``__sklearn_tags__``).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np

from .exceptions import InvalidParameterError, NotFittedError

_T = TypeVar("_T")


def _nested_params(value: Any) -> dict[str, Any] | None:
    """The parameters of a parameter value that has its own, or ``None``.

    A cluster model (a frozen dataclass) exposes its fields; an object with scikit-learn's
    ``get_params`` exposes those.
    """
    if isinstance(value, type):
        return None
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value) if f.init}
    get_params = getattr(value, "get_params", None)
    if callable(get_params):
        return dict(get_params(deep=True))
    return None


def _with_params(owner: str, value: Any, params: dict[str, Any]) -> Any:
    """``value`` with some of its own parameters changed (a new object for a dataclass)."""
    current = _nested_params(value)
    if current is None:
        raise InvalidParameterError(
            f"{owner} ({type(value).__name__}) has no parameters to set; got "
            f"{sorted(f'{owner}__{k}' for k in params)}",
            owner,
        )
    unknown = sorted(set(params) - set(current))
    if unknown:
        raise InvalidParameterError(
            f"{owner} ({type(value).__name__}) has no parameter {unknown[0]!r}; "
            f"valid: {sorted(current)}",
            f"{owner}__{unknown[0]}",
        )
    if dataclasses.is_dataclass(value):
        # Cluster models are immutable: a new one, so clones never share a changed model.
        return dataclasses.replace(value, **params)  # type: ignore[type-var]
    return value.set_params(**params)


class ParamsMixin:
    """scikit-learn's estimator protocol: parameters from ``__init__``, tags, fitted state.

    ``get_params(deep=True)`` also lists a cluster model's own parameters as
    ``model__name``, and ``set_params(model__name=value)`` replaces the model by a copy
    with that value, so ``GridSearchCV`` can search over a prior's hyperparameters.
    """

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of this estimator, by name.

        Parameters
        ----------
        deep : bool, default=True
            Also list the parameters of parameter values that have their own (a cluster
            model's hyperparameters), as ``model__alpha`` and so on.

        Returns
        -------
        dict
        """
        params = {name: getattr(self, name) for name in self._param_names()}
        if deep:
            for name, value in list(params.items()):
                nested = _nested_params(value)
                for key, sub in (nested or {}).items():
                    params[f"{name}__{key}"] = sub
        return params

    def set_params(self, **params: Any) -> ParamsMixin:
        """Set parameters by name, ``model__alpha`` for a cluster model's; returns self.

        Raises
        ------
        InvalidParameterError
            For a name that is not a parameter.
        """
        valid = self._param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, sep, sub = key.partition("__")
            if name not in valid:
                raise InvalidParameterError(
                    f"{type(self).__name__} has no parameter {name!r}; valid: {sorted(valid)}",
                    key,
                )
            if sep:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            setattr(self, name, _with_params(name, getattr(self, name), sub_params))
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params(deep=False).items())
        return f"{type(self).__name__}({args})"

    def __sklearn_is_fitted__(self) -> bool:
        return any(name.endswith("_") and not name.startswith("_") for name in vars(self))

    # What scikit-learn's checks should expect of the data; subclasses refine them. Every
    # estimator reads SciPy sparse input (densified where the model needs dense rows).
    _accepts_sparse = True
    _accepts_nan = True

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(
            estimator_type="clusterer",
            target_tags=TargetTags(required=False),
            input_tags=InputTags(sparse=self._accepts_sparse, allow_nan=self._accepts_nan),
        )


class ClusterEstimator(ParamsMixin):
    """What the three families' estimators share once fitted.

    The fitted check, flat clusters of new rows by their most probable cluster, and the
    mean predictive score.

    Subclasses define ``fit`` (setting ``labels_``), ``score_samples`` and
    ``predict_proba``, and name in ``_fitted_attribute`` the attribute that ``fit`` sets.
    """

    _fitted_attribute = "tree_"

    # Declared for type checkers; subclasses implement them.
    def fit(self, X: Any, y: Any = None) -> Any:
        raise NotImplementedError

    def score_samples(self, X: Any) -> np.ndarray:
        raise NotImplementedError

    def predict_proba(self, X: Any) -> np.ndarray:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        # Core predictors are rebuilt on demand from the fitted state.
        state = dict(self.__dict__)
        state.pop("_core_predictors", None)
        return state

    def _cached(self, key: str, build: Callable[[], _T]) -> _T:
        """``build()``, kept until the fitted state changes (:meth:`_forget_predictors`).

        For what prediction derives from the fitted state in the core (predictive
        mixtures, messages), which is then built once per fit, not once per call.
        """
        cache: dict[str, Any] = self.__dict__.setdefault("_core_predictors", {})
        if key not in cache:
            cache[key] = build()
        return cast("_T", cache[key])

    def _forget_predictors(self) -> None:
        """Drop what :meth:`_cached` kept: the fitted state has changed."""
        self.__dict__.pop("_core_predictors", None)

    def _check_fitted(self) -> None:
        if not hasattr(self, self._fitted_attribute):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(X) before "
                "using it."
            )

    def fit_predict(self, X: Any, y: Any = None) -> np.ndarray:
        """Fit to ``X`` and return the flat clusters ``labels_``."""
        return np.asarray(self.fit(X).labels_)

    def predict(self, X: Any) -> np.ndarray:
        """The flat cluster (label of ``labels_``) each new row most probably joins.

        The column of largest :meth:`predict_proba` (the lowest label on a tie).

        Parameters
        ----------
        X : array_like of shape (n_rows, n_features)

        Returns
        -------
        ndarray of shape (n_rows,)
        """
        return np.asarray(np.argmax(self.predict_proba(X), axis=1), dtype=np.int64)

    def score(self, X: Any, y: Any = None) -> float:
        """Mean log predictive density of the rows of ``X`` (see :meth:`score_samples`).

        Parameters
        ----------
        X : array_like of shape (n_rows, n_features)
        y : ignored

        Returns
        -------
        float
            The mean of :meth:`score_samples`, as in scikit-learn's mixture models.
        """
        return float(np.mean(self.score_samples(X)))
