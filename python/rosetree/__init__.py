"""rosetree: Bayesian rose trees and Bayesian hierarchical clustering.

Non-binary hierarchical clusterings with a probabilistic meaning (Blundell, Teh & Heller
2010), and their binary special case (Heller & Ghahramani 2005), computed by a Rust core.

>>> import rosetree as rt
>>> animals = rt.datasets.load_animals()
>>> est = rt.BayesianRoseTree(model=rt.BetaBernoulli(), mixing="brt", gamma=0.5)
>>> est = est.fit(animals.data)
>>> print(est.tree_.format(labels=animals.names))  # doctest: +SKIP
"""

from __future__ import annotations

from . import datasets, plot
from ._cinterface import get_include, get_library_dir, get_pkg_config_dir
from ._core import __version__
from .coalescent import KingmanCoalescent, coalescent_log_joint
from .config import (
    AutoModel,
    BetaBernoulli,
    ClusterModel,
    DirichletMultinomial,
    NormalGamma,
    NormalInverseWishart,
)
from .estimators import BayesianRoseTree
from .exceptions import (
    DataScaleWarning,
    DegenerateModelWarning,
    InvalidDataError,
    InvalidDataTypeError,
    InvalidParameterError,
    InvalidTreeError,
    NotFittedError,
    NumericalError,
    RoseTreeError,
)
from .functions import evaluate_tree, excess_bits, log_evidence, optimal_tree
from .gp import GPExperts
from .learning import EvidenceGradient, LearningResult, evidence_gradient, learn_hyperparameters
from .metrics import dendrogram_purity, leave_one_out_accuracy, subtree_score
from .pydt import PitmanYorDiffusionTree, pydt_log_likelihood, pydt_log_prior, sample_pydt
from .tree import RoseTree, Tree

__all__ = [
    "AutoModel",
    "BayesianRoseTree",
    "BetaBernoulli",
    "ClusterModel",
    "DataScaleWarning",
    "DegenerateModelWarning",
    "DirichletMultinomial",
    "EvidenceGradient",
    "GPExperts",
    "InvalidDataError",
    "InvalidDataTypeError",
    "InvalidParameterError",
    "InvalidTreeError",
    "KingmanCoalescent",
    "LearningResult",
    "NormalGamma",
    "NormalInverseWishart",
    "NotFittedError",
    "NumericalError",
    "PitmanYorDiffusionTree",
    "RoseTree",
    "RoseTreeError",
    "Tree",
    "__version__",
    "coalescent_log_joint",
    "datasets",
    "dendrogram_purity",
    "evaluate_tree",
    "evidence_gradient",
    "excess_bits",
    "get_include",
    "get_library_dir",
    "get_pkg_config_dir",
    "learn_hyperparameters",
    "leave_one_out_accuracy",
    "log_evidence",
    "optimal_tree",
    "plot",
    "pydt_log_likelihood",
    "pydt_log_prior",
    "sample_pydt",
    "subtree_score",
]
