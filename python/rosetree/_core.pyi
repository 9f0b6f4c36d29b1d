from typing import Any

import numpy as np
import numpy.typing as npt

__version__: str

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
    @property
    def n_leaves(self) -> int: ...
    @property
    def log_evidence(self) -> float: ...
    def children(self) -> list[list[int]]: ...
    def sizes(self) -> npt.NDArray[np.uintp]: ...
    def log_f(self) -> npt.NDArray[np.float64]: ...
    def log_p(self) -> npt.NDArray[np.float64]: ...
    def log_pi(self) -> npt.NDArray[np.float64]: ...
    def log_1m_pi(self) -> npt.NDArray[np.float64]: ...
    def n_partitions_log10(self) -> float: ...
    def partitions(self, limit: int) -> list[tuple[list[int], float]]: ...
    def to_newick(self, labels: list[str] | None = None, lengths: bool = False) -> str: ...
    def heights(self) -> npt.NDArray[np.float64]: ...
    def log_cluster_weights(self) -> npt.NDArray[np.float64]: ...
    def cut(self, threshold: float) -> list[int]: ...
    def clusters_at_height(self, t: float) -> list[int]: ...
    def map_partition(self) -> list[int]: ...
    def max_clusters(self, k: int) -> list[int]: ...
    def labels(self, clusters: list[int]) -> npt.NDArray[np.uintp]: ...
    def to_linkage(self) -> npt.NDArray[np.float64]: ...

def fit_brt(
    x: npt.NDArray[np.float64],
    model: dict[str, Any],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
    binary: bool,
    contract: bool,
    merge_rule: str = "likelihood_ratio",
    n_jobs: int | None = None,
    approx: tuple[int, int, int] | None = None,
) -> RoseTree: ...
def fit_brt_csr(
    indptr: npt.NDArray[np.int64],
    indices: npt.NDArray[np.int64],
    data: npt.NDArray[np.float64],
    n_cols: int,
    model: dict[str, Any],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
    binary: bool,
    contract: bool,
    merge_rule: str = "likelihood_ratio",
    n_jobs: int | None = None,
    approx: tuple[int, int, int] | None = None,
) -> RoseTree: ...
def evaluate_tree(
    x: npt.NDArray[np.float64],
    model: dict[str, Any],
    internal: list[list[int]],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
) -> RoseTree: ...
def optimal_tree(
    x: npt.NDArray[np.float64],
    model: dict[str, Any],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
    binary: bool,
) -> RoseTree: ...
def log_marginal(x: npt.NDArray[np.float64], model: dict[str, Any]) -> float: ...
def brt_predict(
    train: npt.NDArray[np.float64]
    | tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], int],
    model: dict[str, Any],
    tree: RoseTree,
    x: npt.NDArray[np.float64],
    *,
    responsibilities: bool = False,
    clusters: list[int] | None = None,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64] | None]: ...
def brt_log_predictive_missing(
    train: npt.NDArray[np.float64]
    | tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], int],
    model: dict[str, Any],
    tree: RoseTree,
    rows: list[int],
    filled: npt.NDArray[np.float64],
    *,
    n_jobs: int | None = None,
) -> float: ...
def brt_missing_probabilities(
    train: npt.NDArray[np.float64]
    | tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], int],
    model: dict[str, Any],
    tree: RoseTree,
    *,
    n_jobs: int | None = None,
) -> tuple[npt.NDArray[np.uintp], npt.NDArray[np.uintp], npt.NDArray[np.float64]]: ...
def evidence_gradient(
    x: npt.NDArray[np.float64],
    model: dict[str, Any],
    internal: list[list[int]],
    *,
    mixing: str,
    gamma: float,
    dp_alpha: float,
) -> tuple[float, npt.NDArray[np.float64], float]: ...

# The model with its defaults filled in: "alpha"/"beta" (bernoulli), "alpha"
# (dirichlet_multinomial), "mu0"/"kappa0"/"nu0"/"psi0" (normal_inverse_wishart) or
# "m0"/"kappa0"/"a0"/"b0" (normal_gamma), plus the flat "hyperparameters" of the gradient.
def resolved_model(x: npt.NDArray[np.float64], model: dict[str, Any]) -> dict[str, Any]: ...
