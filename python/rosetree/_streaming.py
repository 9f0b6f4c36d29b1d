"""Support for ``partial_fit``: the fitted cluster model with its defaults made explicit."""

from __future__ import annotations

from typing import Any

import numpy as np

from .config import (
    BetaBernoulli,
    ClusterModel,
    DirichletMultinomial,
    NormalGamma,
    NormalInverseWishart,
)
from .exceptions import InvalidParameterError

__all__ = ["explicit_model", "model_from_hyperparameters"]


def explicit_model(fit: Any) -> ClusterModel:
    """The model of a core fit with every hyperparameter given, data-driven defaults included.

    A model whose defaults come from the data (the column means and variances of the rows
    fitted first) would resolve them again from every later data set; after
    :meth:`~rosetree.BayesianRoseTree.partial_fit` the estimator's ``model_`` is this
    explicit model, so that the tree, its evidence, prediction and pickling keep to the
    model of the first fit.
    """
    family = fit.family
    if family == "callback":
        raise InvalidParameterError(
            "partial_fit needs a built-in cluster model (BetaBernoulli, NormalInverseWishart, "
            "NormalGamma or DirichletMultinomial); a Python model has no statistics to update",
            "model",
        )
    return model_from_hyperparameters(family, fit.resolved_model())


def model_from_hyperparameters(family: str, r: dict[str, Any]) -> ClusterModel:
    """The built-in model of ``family`` (a core fit's) with the hyperparameters ``r``.

    ``r`` names them as a core fit's ``resolved_model()`` does.
    """
    if family == "bernoulli":
        return BetaBernoulli(alpha=np.asarray(r["alpha"]), beta=np.asarray(r["beta"]))
    if family == "dirichlet_multinomial":
        return DirichletMultinomial(
            alpha=np.asarray(r["alpha"]),
            multinomial_coefficient=bool(r["multinomial_coefficient"]),
        )
    if family == "normal_gamma":
        shared = bool(r.get("shared_precision", False))
        return NormalGamma(
            m0=np.asarray(r["m0"]),
            kappa0=r["kappa0"],
            a0=r["a0"],
            b0=float(r["b0"][0]) if shared else np.asarray(r["b0"]),
            shared_precision=shared,
        )
    mu0 = np.asarray(r["mu0"])
    if "psi0_diagonal" in r:
        psi0 = np.asarray(r["psi0_diagonal"])
    else:
        psi0 = np.asarray(r["psi0"]).reshape(mu0.size, mu0.size)
    return NormalInverseWishart(mu0=mu0, kappa0=r["kappa0"], nu0=r["nu0"], psi0=psi0)
