r"""Flat clusters of any family's tree, and where new rows go among them.

The coalescent and the diffusion tree read their default ``labels_`` off their tree the way
the rose tree does: the tree is evaluated as a Bayesian hierarchical clustering under the
Dirichlet-process prior over its consistent partitions, with a conjugate cluster model, and
cut top-down where a node's posterior probability of being one cluster reaches the
threshold. A new row then joins cluster :math:`c` with probability
:math:`\propto n_c f(x \mid D_c)` under the same cluster model
(:meth:`BayesianRoseTree.predict_proba`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core
from ._selection import choose_model
from .config import AutoModel, ClusterModel, NormalGamma, NormalInverseWishart
from .functions import evaluate_tree
from .tree import RoseTree, Tree


def category_indicators(X: np.ndarray, n_categories: list[int]) -> np.ndarray:
    """One 0/1 column per category of each column of ``X`` (NaN stays missing).

    Categorical rows as the beta-Bernoulli clusters of flat clusters read them.
    """
    columns = []
    for j, k in enumerate(n_categories):
        col = X[:, j]
        ind = (col[:, None] == np.arange(k)[None, :]).astype(np.float64)
        ind[np.isnan(col)] = np.nan
        columns.append(ind)
    return np.hstack(columns)


def choose_cluster_model(
    data: np.ndarray, tree: Tree, dp_alpha: float = 1.0
) -> tuple[ClusterModel, dict[str, Any]]:
    """The Gaussian cluster model of the flat clusters of ``tree``, with why it was chosen.

    :class:`NormalGamma` (diagonal; NaN marginalised) or :class:`NormalInverseWishart`
    (full covariance; a candidate without NaN and with more rows than columns), each with
    its data-driven defaults, whichever shows the stronger cluster structure on ``tree``:
    :class:`AutoModel`'s ``"structure"`` rule, the log Bayes factor of the tree under DP
    mixing against one cluster of all rows. ``data`` are the real-valued rows the clusters
    read (standardized, constant columns left out); every row is scored.
    """

    def structure(model: ClusterModel, rows: np.ndarray) -> float:
        return evaluate_tree(rows, tree, model=model, mixing="dp", dp_alpha=dp_alpha).log_evidence

    # The candidates of the rose tree before its shared precision: with it (tried beside a
    # full covariance limited to five rows per column), the coalescent's flat clusters of
    # MNIST PCA-100 and of three groups in 20 columns came out as one
    # (benchmarks/bench_many_columns.py).
    auto = AutoModel(real=(NormalGamma(), NormalInverseWishart()), sample=max(data.shape[0], 2))
    model, record = choose_model(auto, data, structure, 0)
    if record["data"] != "real":  # standardized columns: real unless degenerate
        model, record = NormalGamma(), {**record, "chosen": "NormalGamma"}
    return model, record


@dataclass(frozen=True)
class FlatClusters:
    """Flat clusters of a tree under a cluster model.

    Attributes
    ----------
    model : ClusterModel
        The cluster model the tree was evaluated under.
    tree : RoseTree
        The family's tree with every node's quantities under ``model`` and DP mixing.
    labels : ndarray of shape (n_samples,)
        Cluster labels ``0 .. K-1``, numbered by first row.
    nodes : ndarray of shape (K,)
        The node of ``tree`` whose leaves are each cluster.
    """

    model: ClusterModel
    tree: RoseTree
    labels: np.ndarray
    nodes: np.ndarray

    @classmethod
    def cut(
        cls,
        data: np.ndarray,
        tree: Tree,
        model: ClusterModel,
        dp_alpha: float = 1.0,
        threshold: float = 0.5,
    ) -> FlatClusters:
        """The clusters of the top-down cut ``r_T >= threshold`` of ``tree`` over ``data``."""
        rose = evaluate_tree(data, tree.to_nested(), model=model, mixing="dp", dp_alpha=dp_alpha)
        nodes = rose.cut_nodes(threshold)
        labels = rose.labels_of(nodes)
        # Labels are numbered by first row; cut_nodes lists nodes by id.
        order = np.argsort([rose.leaves(v)[0] for v in nodes])
        return cls(model, rose, labels, np.asarray(nodes, dtype=np.int64)[order])

    @classmethod
    def of_labels(
        cls,
        data: np.ndarray,
        tree: Tree,
        model: ClusterModel,
        labels: np.ndarray,
        dp_alpha: float = 1.0,
    ) -> FlatClusters:
        """Given ``labels`` whose clusters are nodes of ``tree``, the same under ``model``."""
        rose = evaluate_tree(data, tree.to_nested(), model=model, mixing="dp", dp_alpha=dp_alpha)
        by_leaves = {frozenset(rose.leaves(v)): v for v in range(rose.n_nodes)}
        nodes = [
            by_leaves[frozenset(np.flatnonzero(labels == k).tolist())]
            for k in range(int(labels.max()) + 1)
        ]
        return cls(model, rose, np.asarray(labels, dtype=np.int64), np.asarray(nodes, np.int64))

    @property
    def n_clusters(self) -> int:
        return len(self.nodes)

    def predict_proba(self, train: np.ndarray, new: np.ndarray, n_jobs: Any = None) -> np.ndarray:
        """``P(c | x)`` of each row of ``new`` (rows sum to one; column ``k`` is label ``k``).

        ``train`` is the data the clusters were fitted to, in the form the cluster model
        reads (the fitted state of the core does not pickle, so it is rebuilt here in
        O(n d)).
        """
        fit = _core.brt_fit_for_tree(train, self.model._spec(), self.tree._core)
        _, proba = fit.predict(
            new, responsibilities=True, clusters=[int(v) for v in self.nodes], n_jobs=n_jobs
        )
        return np.asarray(proba)
