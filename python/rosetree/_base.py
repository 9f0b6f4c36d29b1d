"""What every rosetree estimator shares: scikit-learn's parameter protocol."""

from __future__ import annotations

import inspect
from typing import Any

from .exceptions import InvalidParameterError


class ParamsMixin:
    """``get_params`` / ``set_params`` from the ``__init__`` signature, as in scikit-learn."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of this estimator, by name."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params: Any) -> ParamsMixin:
        """Set parameters by name; returns the estimator."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise InvalidParameterError(
                    f"{type(self).__name__} has no parameter {name!r}; valid: {sorted(valid)}",
                    name,
                )
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"
