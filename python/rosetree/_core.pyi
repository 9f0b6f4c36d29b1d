from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "PYDT_MEAN_SUMMARY_MAX_ROWS",
    "BrtFit",
    "BrtParams",
    "CoalescentModel",
    "CoalescentParams",
    "CoalescentPredictor",
    "ModelSpec",
    "PydtEmParams",
    "PydtMcmcParams",
    "PydtParams",
    "PydtPredictor",
    "PydtState",
    "RoseTree",
    "Tree",
    "__version__",
    "_ctrl_c_at_poll",
    "_set_progress_interval",
    "brt_cluster_log_predictive",
    "brt_fit_for_tree",
    "brt_node_stats",
    "brt_stitch",
    "brt_top_clusters",
    "evaluate_tree",
    "evidence_gradient",
    "excess_bits",
    "fit_brt",
    "learn_brt",
    "log_marginal",
    "optimal_tree",
    "pydt_greedy_em",
    "pydt_log_likelihood",
    "pydt_log_prior",
    "pydt_mcmc",
    "pydt_mean_tree",
    "pydt_partial_fit",
    "pydt_predictor",
    "pydt_probit_ep",
    "resolved_model",
    "sample_pydt",
]

__version__: str

_Csr = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], int]

@final  # a #[pyclass] without `subclass`
class Tree:
    def __new__(
        cls,
        n_leaves: int,
        internal: list[list[int]],
        heights: list[float] | None = None,
    ) -> Tree: ...
    def __getnewargs__(self) -> tuple[int, list[list[int]], list[float] | None]: ...
    @property
    def n_leaves(self) -> int: ...
    def children(self) -> list[list[int]]: ...
    def children_tuples(self) -> tuple[tuple[int, ...], ...]: ...
    def sizes(self) -> npt.NDArray[np.uintp]: ...
    def heights(self) -> npt.NDArray[np.float64] | None: ...
    def n_partitions_log10(self) -> float: ...
    def n_partitions(self) -> int: ...
    def distances(self) -> npt.NDArray[np.float64] | None: ...
    def parents(self) -> npt.NDArray[np.int64]: ...
    def leaves_of(self, node: int) -> list[int]: ...
    def depth(self) -> int: ...
    def to_newick(self, labels: list[str] | None = None, lengths: bool = False) -> str: ...
    def clusters_at_height(self, t: float) -> list[int]: ...
    def max_clusters(self, k: int) -> list[int]: ...
    def labels(self, clusters: list[int]) -> npt.NDArray[np.uintp]: ...
    def to_linkage(self) -> npt.NDArray[np.float64]: ...

@final
class RoseTree:
    def __new__(
        cls,
        n_leaves: int,
        internal: list[list[int]],
        log_f: list[float],
        log_p: list[float],
        log_pi: list[float],
        log_1m_pi: list[float],
    ) -> RoseTree: ...
    def __getnewargs__(
        self,
    ) -> tuple[int, list[list[int]], list[float], list[float], list[float], list[float]]: ...
    def tree(self) -> Tree: ...
    @property
    def log_evidence(self) -> float: ...
    def log_f(self) -> npt.NDArray[np.float64]: ...
    def log_p(self) -> npt.NDArray[np.float64]: ...
    def log_pi(self) -> npt.NDArray[np.float64]: ...
    def log_r(self) -> npt.NDArray[np.float64]: ...
    def log_1m_pi(self) -> npt.NDArray[np.float64]: ...
    def partitions(self, limit: int) -> list[tuple[list[int], float]]: ...
    def log_cluster_weights(self) -> npt.NDArray[np.float64]: ...
    def cut(self, threshold: float) -> list[int]: ...
    def remix(self, mixing: str, gamma: float, dp_alpha: float) -> RoseTree: ...
    def coarsen(self, mixing: str, gamma: float, dp_alpha: float) -> RoseTree: ...
    def cut_remixed(
        self, mixing: str, gamma: float, dp_alpha: float, threshold: float
    ) -> list[int]: ...
    def map_partition(self) -> list[int]: ...

@final
class ModelSpec:
    @staticmethod
    def beta_bernoulli(
        alpha: list[float] | None = None, beta: list[float] | None = None
    ) -> ModelSpec: ...
    @staticmethod
    def normal_inverse_wishart(
        mu0: list[float] | None = None,
        kappa0: float | None = None,
        nu0: float | None = None,
        psi0: list[float] | None = None,
        psi0_diagonal: list[float] | None = None,
    ) -> ModelSpec: ...
    @staticmethod
    def normal_gamma(
        m0: list[float] | None = None,
        kappa0: float | None = None,
        a0: float | None = None,
        b0: list[float] | None = None,
        shared_precision: bool = False,
    ) -> ModelSpec: ...
    @staticmethod
    def dirichlet_multinomial(
        alpha: list[float], multinomial_coefficient: bool = False
    ) -> ModelSpec: ...
    @staticmethod
    def callback(object: Any) -> ModelSpec: ...

@final
class BrtParams:
    def __new__(
        cls,
        *,
        mixing: str,
        gamma: float,
        dp_alpha: float,
        binary: bool = False,
        contract: bool = False,
        merge_rule: str = "likelihood_ratio",
        n_jobs: int | None = None,
        approx: tuple[int, int, int] | None = None,
    ) -> BrtParams: ...

@final
class BrtFit:
    def tree(self) -> RoseTree: ...
    @property
    def family(self) -> str: ...
    def predict(
        self,
        x: npt.NDArray[np.float64],
        *,
        responsibilities: bool = False,
        clusters: list[int] | None = None,
        n_jobs: int | None = None,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]: ...
    def log_predictive_missing(
        self, rows: list[int], filled: npt.NDArray[np.float64], *, n_jobs: int | None = None
    ) -> float: ...
    def missing_probabilities(
        self, *, n_jobs: int | None = None
    ) -> tuple[npt.NDArray[np.uintp], npt.NDArray[np.uintp], npt.NDArray[np.float64]]: ...
    def training_rows(self, start: int, stop: int) -> npt.NDArray[np.float64]: ...
    def training(self) -> npt.NDArray[np.float64] | npt.NDArray[np.bool_] | _Csr: ...
    def partial_fit(
        self,
        x: npt.NDArray[np.float64] | _Csr,
        *,
        mixing: str,
        gamma: float,
        dp_alpha: float,
        binary: bool = False,
    ) -> BrtFit: ...
    def resolved_model(self) -> dict[str, Any]: ...

def fit_brt(
    train: npt.NDArray[np.float64]
    | npt.NDArray[np.bool_]
    | npt.NDArray[np.uint8]
    | npt.NDArray[np.float32]
    | _Csr,
    model: ModelSpec,
    params: BrtParams,
    *,
    verbose: bool = False,
) -> BrtFit: ...
def brt_fit_for_tree(
    train: npt.NDArray[np.float64] | _Csr, model: ModelSpec, tree: RoseTree
) -> BrtFit: ...
def evaluate_tree(
    x: npt.NDArray[np.float64],
    model: ModelSpec,
    internal: list[list[int]],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
) -> RoseTree: ...
def optimal_tree(
    x: npt.NDArray[np.float64],
    model: ModelSpec,
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
    binary: bool,
) -> RoseTree: ...
def log_marginal(x: npt.NDArray[np.float64], model: ModelSpec) -> float: ...
def excess_bits(optimal: list[float], found: list[float], l: int) -> float: ...
def evidence_gradient(
    x: npt.NDArray[np.float64],
    model: ModelSpec,
    internal: list[list[int]],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
) -> tuple[float, npt.NDArray[np.float64], float]: ...

# The model with its defaults filled in: "alpha"/"beta" (bernoulli), "alpha"
# (dirichlet_multinomial), "mu0"/"kappa0"/"nu0"/"psi0" (normal_inverse_wishart) or
# "m0"/"kappa0"/"a0"/"b0" (normal_gamma), plus the flat "hyperparameters" of the gradient.
def resolved_model(x: npt.NDArray[np.float64], model: ModelSpec) -> dict[str, Any]: ...

# Hyperparameter learning with the tree: (fit of the learnt model and tree, the learnt gamma
# or DP concentration, the trace, each start's final ln p(D | T)). ``fit_tree(family,
# hyperparameters, value)`` returns a RoseTree; ``hyperparameters`` as BrtFit.resolved_model.
def learn_brt(
    x: npt.NDArray[np.float64],
    model: ModelSpec,
    params: BrtParams,
    *,
    tie: bool,
    n_restarts: int,
    max_iter: int,
    tol: float,
    seed: int,
    fit_tree: Callable[[str, dict[str, Any], float], RoseTree] | None = None,
    verbose: bool = False,
) -> tuple[BrtFit, float, list[float], list[float]]: ...

_CoalescentRun = tuple[Tree, float] | tuple[list[Tree], list[float], float, list[float], int, float]

@final
class CoalescentParams:
    def __new__(
        cls,
        *,
        inference: str = "greedy-rate1",
        n_jobs: int | None = None,
        approx: tuple[int, int, int] | None = None,
        n_particles: int = 1,
        seed: int = 0,
    ) -> CoalescentParams: ...

@final
class CoalescentPredictor:
    def log_density(
        self, x: npt.NDArray[np.float64], *, n_jobs: int | None
    ) -> tuple[list[float], npt.NDArray[np.float64]]: ...
    def leaf_posteriors(self) -> npt.NDArray[np.float64]: ...

@final
class CoalescentModel:
    def __new__(
        cls,
        x: npt.NDArray[np.float64],
        *,
        likelihood: str,
        lambda_: npt.NDArray[np.float64],
        root: float | None = None,
        noise: float = 0.0,
    ) -> CoalescentModel: ...
    @staticmethod
    def shared(
        n_features: int,
        *,
        likelihood: str,
        lambda_: npt.NDArray[np.float64],
        root: float | None = None,
        noise: float = 0.0,
        masked: bool = False,
        counts: list[list[float]] | None = None,
    ) -> CoalescentModel: ...
    @property
    def likelihood(self) -> str: ...
    @property
    def n_features(self) -> int: ...
    def fit(
        self, x: npt.NDArray[np.float64], params: CoalescentParams, *, verbose: float | None = None
    ) -> _CoalescentRun: ...
    def learn(
        self,
        x: npt.NDArray[np.float64],
        params: CoalescentParams,
        *,
        rounds: int,
        prior: tuple[float, npt.NDArray[np.float64]] | None = None,
        verbose: float | None = None,
    ) -> tuple[_CoalescentRun, npt.NDArray[np.float64], list[float]]: ...
    def log_joint(self, x: npt.NDArray[np.float64], tree: Tree) -> float: ...
    def subtree_evidence(self, x: npt.NDArray[np.float64], tree: Tree) -> list[float]: ...
    def predictor(self, x: npt.NDArray[np.float64], tree: Tree) -> CoalescentPredictor: ...
    def lambda_map(
        self,
        x: npt.NDArray[np.float64],
        tree: Tree,
        *,
        prior: tuple[float, npt.NDArray[np.float64]] | None = None,
        n_jobs: int | None = None,
    ) -> npt.NDArray[np.float64]: ...
    def insert(
        self,
        x: npt.NDArray[np.float64],
        tree: Tree,
        *,
        join_rule: str = "density",
        balance: bool = True,
        repair: bool = False,
        retime: bool = False,
        rotate: bool = False,
    ) -> tuple[Tree, float, list[tuple[int, float]]]: ...
    def fit_part(
        self, x: npt.NDArray[np.float64], params: CoalescentParams
    ) -> tuple[Tree | None, list[float], float, list[float]]: ...
    def router(
        self, x: npt.NDArray[np.float64], tree: Tree, *, max_leaves: int
    ) -> tuple[list[int], float, list[list[float]]]: ...
    def route(
        self, x: npt.NDArray[np.float64], posteriors: list[list[float]], tau: float
    ) -> npt.NDArray[np.int64]: ...
    def stitch(
        self,
        n_rows: int,
        parts: list[tuple[Tree | None, list[int], list[float], float]],
        top: list[list[int]],
    ) -> tuple[Tree, float, list[list[int]], list[int], list[float]]: ...

@final
class PydtState:
    @property
    def tree(self) -> Tree: ...
    @property
    def alpha(self) -> float: ...
    @property
    def beta(self) -> float: ...
    @property
    def c(self) -> float: ...
    @property
    def sigma2(self) -> float: ...
    @property
    def log_joint(self) -> float: ...
    def with_log_joint(self, log_joint: float) -> PydtState: ...

@final
class PydtPredictor:
    def components(
        self,
    ) -> tuple[
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
    ]: ...
    def log_density(
        self, x: npt.NDArray[np.float64], *, n_jobs: int | None = None
    ) -> npt.NDArray[np.float64]: ...

@final
class PydtParams:
    def __new__(cls, *, alpha: float, beta: float, c: float, sigma2: float = 1.0) -> PydtParams: ...
    @property
    def alpha(self) -> float: ...
    @property
    def beta(self) -> float: ...
    @property
    def c(self) -> float: ...
    @property
    def sigma2(self) -> float: ...

@final
class PydtMcmcParams:
    def __new__(
        cls,
        *,
        n_iter: int,
        burn_in: int,
        thin: int = 1,
        learn: Sequence[str],
        priors: Mapping[str, tuple[float, float]],
        likelihood: str = "gaussian",
        subtree_move: str = "auto",
    ) -> PydtMcmcParams: ...

@final
class PydtEmParams:
    def __new__(
        cls,
        *,
        max_iter: int,
        k_best: int = 10,
        learn: Sequence[str],
        priors: Mapping[str, tuple[float, float]],
        likelihood: str = "gaussian",
        em_steps: int = 10,
        n_candidates: int = 3,
    ) -> PydtEmParams: ...

def pydt_predictor(
    x: npt.NDArray[np.float64],
    tree: Tree,
    params: PydtParams,
    *,
    n_points: int,
    likelihood: str = "gaussian",
) -> PydtPredictor: ...
def pydt_log_prior(tree: Tree, *, alpha: float, beta: float, c: float) -> float: ...
def pydt_log_likelihood(x: npt.NDArray[np.float64], tree: Tree, *, sigma2: float) -> float: ...
def pydt_mean_tree(samples: Sequence[Tree]) -> Tree: ...

PYDT_MEAN_SUMMARY_MAX_ROWS: int

def sample_pydt(
    n: int, d: int, params: PydtParams, *, seed: int
) -> tuple[npt.NDArray[np.float64], Tree]: ...
def pydt_greedy_em(
    x: npt.NDArray[np.float64],
    tree: Tree | None,
    params: PydtParams,
    search: PydtEmParams,
    *,
    seed: int,
    verbose: bool = False,
) -> tuple[
    list[PydtState],
    npt.NDArray[np.float64],
]: ...
def pydt_mcmc(
    x: npt.NDArray[np.float64],
    tree: Tree | None,
    params: PydtParams,
    chain: PydtMcmcParams,
    *,
    seed: int,
    verbose: bool = False,
) -> tuple[
    list[PydtState],
    npt.NDArray[np.float64],
    PydtState,
    int,
    int,
]: ...
def pydt_partial_fit(
    x: npt.NDArray[np.float64],
    x_new: npt.NDArray[np.float64],
    tree: Tree,
    params: PydtParams,
    chain: PydtMcmcParams,
    *,
    seed: int,
) -> tuple[
    npt.NDArray[np.float64],
    PydtState,
    int,
    int,
]: ...
def pydt_probit_ep(
    x: npt.NDArray[np.float64],
    tree: Tree,
    *,
    sigma2: float = 1.0,
    max_iter: int = 200,
    tol: float = 1e-10,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], float]: ...

# Fitting in parts (rosetree.dask): statistics travel as float64 arrays in the model's
# encoding; the model's hyperparameters must all be given.
def brt_node_stats(
    x: npt.NDArray[np.float64], model: ModelSpec, tree: RoseTree | None, nodes: list[int]
) -> list[npt.NDArray[np.float64]]: ...
def brt_cluster_log_predictive(
    x: npt.NDArray[np.float64], model: ModelSpec, stats: list[npt.NDArray[np.float64]]
) -> npt.NDArray[np.float64]: ...
def brt_top_clusters(tree: RoseTree) -> list[int]: ...
def brt_stitch(
    model: ModelSpec,
    n_features: int,
    n_rows: int,
    parts: list[tuple[RoseTree | None, list[int], npt.NDArray[np.float64]]],
    top: list[list[int]],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
) -> tuple[RoseTree, list[npt.NDArray[np.float64]]]: ...

# Test hooks (rust/src/python/testing.rs), not API: lines of progress every `seconds`
# (returns the previous interval); Ctrl-C at the next computation's k-th look for it.
def _set_progress_interval(seconds: float) -> float: ...
def _ctrl_c_at_poll(k: int) -> None: ...
