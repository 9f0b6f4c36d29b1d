r"""Rose trees of data sets larger than one machine, fitted and used on Dask.

Install with ``pip install "bayesian-rosetree[dask]"``. :class:`BayesianRoseTree` here takes
a ``dask.array.Array``, a ``dask.dataframe.DataFrame`` or an in-memory array (which
it cuts into chunks) and fits on the workers of a ``dask.distributed`` cluster:

1. **The top of the tree on the client**, from a sample of at most ``sample_size`` rows with
   the single-machine fit. The sample is the same for any chunking: each row gets a
   pseudo-random key from its global row number and ``random_state``, and the rows of
   smallest key are taken (chunks send their own smallest, merged on the workers).
2. **Routing on the workers**: chunk by chunk, each row goes to the group of the sample tree
   (the nodes where its rows become plausibly one cluster, as in the single-machine
   approximate search) under which its predictive probability
   :math:`f(x \mid D_g) = f(D_g \cup \{x\}) / f(D_g)` is highest (the cluster term of BRT
   eq 1.25).
3. **Subtrees on the workers**: each group's rows are brought together on one worker and
   fitted there with the single-machine search (exact, or approximate above
   ``exact_below`` rows), one task per group; a group of more than ``part_rows`` rows is
   split again the same way.
4. **Stitching**: the nodes above the groups are scored from the subtrees' summaries (their
   trees with :math:`\ln f` at every node, and their rows' sufficient statistics), never
   from rows, so :attr:`BayesianRoseTree.log_evidence_` is the exact
   :math:`\ln p(D \mid T)` of the tree returned.

What is approximated is the search, as in the single-machine ``approximate=True``: rows sent
to different groups are never siblings below the top of the tree. The tree does not depend
on the number of workers, on the chunking, or on a worker that dies during the fit (Dask
computes its tasks again).

:class:`KingmanCoalescent` fits the Greedy-Rate1 coalescent the same way: rows are routed
to the lineage of the sample tree they most probably join, and the joins above the parts
are timed and scored from each part's root message and summed :math:`\ln Z`, so its
``log_joint_`` is the exact :math:`\ln p(x, \pi)` of the tree returned.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _core
from ._base import ParamsMixin
from ._choices import ROSE_FLAT_CLUSTERS
from ._selection import equal_valued_columns
from ._validation import (
    check_choice,
    check_cut_threshold,
    check_flag,
    check_int,
    check_seed,
    mixing_args,
)
from .coalescent import _refuse_non_categories, non_category
from .config import (
    AutoModel,
    BetaBernoulli,
    ClusterModel,
    DirichletMultinomial,
    NormalGamma,
    NormalInverseWishart,
    resolve_model,
)
from .estimators import BayesianRoseTree as _LocalRoseTree
from .estimators import check_merge_rule
from .exceptions import (
    InvalidDataError,
    InvalidDataTypeError,
    InvalidParameterError,
    NotFittedError,
    RoseTreeError,
)
from .tree import RoseTree

try:
    import dask.array as da
    from dask.base import tokenize
    from dask.delayed import delayed
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError('rosetree.dask needs Dask: pip install "bayesian-rosetree[dask]"') from exc

__all__ = ["BayesianRoseTree", "KingmanCoalescent"]

#: The models whose statistics travel between machines.
_CONJUGATE = (BetaBernoulli, NormalInverseWishart, NormalGamma, DirichletMultinomial)
#: Levels of sample-and-split before a part is fitted whatever its size.
_MAX_DEPTH = 8
#: Rows sampled to find the groups of a part in the single-machine approximate search.
_APPROX_SAMPLE = 1000
#: Samples merged by one task of the sample's reduction.
_MERGE_FAN_IN = 8
_MASK64 = (1 << 64) - 1


# ---------------------------------------------------------------------- keys and seeds
def _mix(value: int) -> int:
    """SplitMix64's finaliser of a 64-bit integer (Python integers: no overflow warnings)."""
    z = (value + 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _child_seed(seed: int, index: int) -> int:
    """The seed of part ``index`` of a part seeded by ``seed``."""
    return _mix(_mix(seed) ^ (index + 1))


def _row_keys(ids: np.ndarray, seed: int) -> np.ndarray:
    """A pseudo-random 64-bit key per global row id: SplitMix64 of ``id + mix(seed)``.

    Depends on nothing but the row and the seed, so a sample of smallest keys is the same
    however the rows are chunked. (Unsigned array arithmetic wraps around silently.)
    """
    z = ids.astype(np.uint64) + np.uint64(_mix(seed) + 0x9E3779B97F4A7C15 & _MASK64)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


# ---------------------------------------------------------------------- where a row lives
class _Chunks:
    """The row ranges of the input's chunks, to name the chunk of a global row in errors."""

    def __init__(self, sizes: Sequence[int]) -> None:
        self.starts = [0, *np.cumsum(sizes).tolist()]

    def describe(self, row: int) -> str:
        k = bisect.bisect_right(self.starts, row) - 1
        return f"chunk {k} (rows {self.starts[k]}..{self.starts[k + 1]}), row {row}"


def _located(exc: RoseTreeError, ids: np.ndarray, chunks: _Chunks) -> RoseTreeError:
    """``exc`` of the core about row ``exc.row`` of a part, about its global row and chunk."""
    if isinstance(exc, InvalidDataError) and exc.row is not None and exc.row < len(ids):
        row = int(ids[exc.row])
        column = "" if exc.column is None else f", column {exc.column}"
        out = type(exc)(f"{chunks.describe(row)}{column}: {exc}", row, exc.column)
        return out
    return exc


# ---------------------------------------------------------------------- worker tasks
def _piece(
    block: Any,
    k: int,
    start: int,
    n_features: int,
    dtype: Any,
    allow_nan: bool,
    keep: Any,
    compact: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ``k`` (rows from ``start``) as ``(global ids, float64 rows)``, checked.

    ``compact``: ``bool`` rows stay ``bool`` (a byte an entry, where float64 takes eight),
    for a rose tree's parts, whose fit reads them in place.
    """
    where = f"chunk {k} (rows {start}..{start + len(block)})"
    block = np.asarray(block)
    if block.dtype != dtype:
        raise InvalidDataTypeError(
            f"{where} has dtype {block.dtype}, the collection declares {dtype}: every chunk "
            "must have the collection's dtype"
        )
    if block.ndim != 2 or block.shape[1] != n_features:
        raise InvalidDataError(f"{where} has shape {block.shape}; expected {n_features} columns")
    if compact and block.dtype == np.bool_:
        rows = block if keep is None else block[:, keep]
        return np.arange(start, start + len(rows), dtype=np.int64), np.ascontiguousarray(rows)
    rows = np.ascontiguousarray(block, dtype=np.float64)
    bad = np.isinf(rows) if allow_nan else ~np.isfinite(rows)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        what = "an infinite value" if np.isinf(rows[i, j]) else "NaN, which the model forbids"
        raise InvalidDataError(f"{where}: row {start + i}, column {j} holds {what}", start + i, j)
    if keep is not None:
        rows = np.ascontiguousarray(rows[:, keep])
    return np.arange(start, start + len(rows), dtype=np.int64), rows


def _sample_piece(
    piece: tuple[np.ndarray, np.ndarray], seed: int, size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``size`` rows of a piece with the smallest keys: ``(keys, ids, rows)``."""
    ids, rows = piece
    keys = _row_keys(ids, seed)
    take = np.lexsort((ids, keys))[:size]
    return keys[take], ids[take], rows[take]


def _merge_samples(size: int, *samples: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """The ``size`` rows of smallest key among several samples."""
    keys, ids, rows = (np.concatenate([s[i] for s in samples]) for i in range(3))
    take = np.lexsort((ids, keys))[:size]
    return keys[take], ids[take], rows[take]


def _worker_params(params: dict[str, Any]) -> Any:
    """``_core.BrtParams`` of ``params`` with as many threads as this worker has.

    A worker runs one task per thread, so a fit that took every core of the machine (the
    core's default) would oversubscribe it. The tree does not depend on the thread count.
    """
    threads = None
    try:
        from distributed import get_worker

        threads = int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        pass
    return _core.BrtParams(**params, n_jobs=threads)


def _f64(rows: np.ndarray) -> np.ndarray:
    """Rows as float64 (no copy if they are), for the core's functions that read float64."""
    return np.ascontiguousarray(rows, dtype=np.float64)


def _in_row_order(sample: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A sample ``(keys, ids, rows)`` sorted by row."""
    keys, ids, rows = sample
    order = np.argsort(ids)
    return keys[order], ids[order], np.ascontiguousarray(rows[order])


def _split(
    sample: tuple[np.ndarray, ...], model: ClusterModel, params: dict[str, Any]
) -> tuple[list[list[int]], list[int], list[np.ndarray]]:
    """The split of a group by its sample.

    Returns the sample tree's children lists, its groups (``brt_top_clusters``) and their
    statistics.
    """
    _, _, rows = _in_row_order(sample)
    spec = model._spec()
    tree = _core.fit_brt(rows, spec, _worker_params(params)).tree()
    groups = _core.brt_top_clusters(tree)
    stats = _core.brt_node_stats(_f64(rows), spec, tree, groups)
    return tree.tree().children(), groups, list(stats)


def _route(
    piece: tuple[np.ndarray, np.ndarray],
    model: ClusterModel,
    split: tuple[Any, Any, list[np.ndarray]],
    chunks: _Chunks,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The rows of a piece by group: each row to the group of highest predictive."""
    ids, rows = piece
    group_stats = split[2]
    try:
        log_pred = _core.brt_cluster_log_predictive(_f64(rows), model._spec(), group_stats)
    except RoseTreeError as exc:
        raise _located(exc, ids, chunks) from None
    # argmax takes the first of tied groups, as the single-machine search does.
    labels = np.argmax(log_pred, axis=1)
    return [(ids[labels == g], rows[labels == g]) for g in range(len(group_stats))]


def _split_blocks(
    piece: tuple[np.ndarray, np.ndarray], seed: int, n_blocks: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The rows of a piece in ``n_blocks`` blocks by their keys (rows the sample cannot split)."""
    ids, rows = piece
    block = _row_keys(ids, seed) % np.uint64(n_blocks)
    return [(ids[block == b], rows[block == b]) for b in range(n_blocks)]


def _take(routed: list[Any], g: int) -> Any:
    return routed[g]


def _lengths(routed: list[tuple[np.ndarray, np.ndarray]]) -> list[int]:
    return [len(ids) for ids, _ in routed]


def _gather_part(*pieces: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A part's rows from its pieces, in global row order (so the same for any chunking)."""
    ids = np.concatenate([p[0] for p in pieces])
    rows = np.concatenate([p[1] for p in pieces])
    order = np.argsort(ids, kind="stable")
    return ids[order], np.ascontiguousarray(rows[order])


def _fit_part(
    part: tuple[np.ndarray, np.ndarray],
    model: ClusterModel,
    params: dict[str, Any],
    chunks: _Chunks,
) -> tuple[Any, np.ndarray, np.ndarray, int]:
    """The single-machine fit of a part.

    Returns ``(tree or None for one row, ids, statistics, number of nodes)``.
    """
    ids, rows = part
    spec = model._spec()
    try:
        if len(ids) == 1:
            return None, ids, _core.brt_node_stats(_f64(rows), spec, None, [0])[0], 1
        tree = _core.fit_brt(rows, spec, _worker_params(params)).tree()
        n_nodes = len(tree.tree().children())
        stats = _core.brt_node_stats(_f64(rows), spec, tree, [n_nodes - 1])[0]
    except RoseTreeError as exc:
        raise _located(exc, ids, chunks) from None
    return tree, ids, stats, n_nodes


def _part_node_stats(
    part: tuple[np.ndarray, np.ndarray], model: ClusterModel, tree: Any, nodes: list[int]
) -> list[np.ndarray]:
    return list(_core.brt_node_stats(_f64(part[1]), model._spec(), tree, nodes))


def _predict_block(
    block: Any,
    model: ClusterModel,
    stats: list[np.ndarray],
    log_weights: np.ndarray,
    what: str,
    dtype: Any,
    n_features: int,
    keep: Any,
    chunks: _Chunks,
    starts: np.ndarray | None,
    block_info: Any = None,
    encode: Any = None,
) -> np.ndarray:
    """``what`` ("proba", "labels" or "score") of the rows of one chunk.

    ``stats`` and ``log_weights`` are per member node of the flat clusters; ``starts``
    (None: one node per cluster) is where each cluster's members begin among them.
    ``encode``, if given, turns the rows into what ``model`` reads.
    """
    k, start = 0, 0
    if block_info is not None and 0 in block_info:
        k = block_info[0]["chunk-location"][0]
        start = block_info[0]["array-location"][0][0]
    ids, rows = _piece(block, k, start, n_features, dtype, True, keep)
    try:
        if encode is not None:
            rows = encode(rows)
        terms = _core.brt_cluster_log_predictive(rows, model._spec(), stats) + log_weights
    except RoseTreeError as exc:
        raise _located(exc, ids, chunks) from None
    if starts is not None:  # a cluster's terms: the log-sum-exp of its members'
        top = terms.max(axis=1, keepdims=True)
        terms = np.log(np.add.reduceat(np.exp(terms - top), starts, axis=1)) + top
    if what == "labels":
        return np.asarray(np.argmax(terms, axis=1), dtype=np.int64)
    top = terms.max(axis=1, keepdims=True)
    log_p = np.asarray((top + np.log(np.exp(terms - top).sum(axis=1, keepdims=True)))[:, 0])
    if what == "score":
        return log_p
    return np.asarray(np.exp(terms - log_p[:, None]))


class _Node:
    """A group of rows while the fit is split.

    It holds its pieces (futures of ``(ids, rows)``) and what it becomes: a part
    (``part``), or a split into ``children``, by ``split`` (the sample tree's ``(children
    lists, groups, statistics)``) or into ``blocks``.
    """

    def __init__(self, pieces: list[Any], count: int, depth: int, seed: int) -> None:
        self.pieces = pieces
        self.count = count
        self.depth = depth
        self.seed = seed
        self.part: tuple[Any, Any] | None = None
        self.split: Any = None
        self.blocks = False
        self.routed: list[Any] = []
        self.lengths: list[Any] = []
        self.children: list[_Node | None] = []


# ---------------------------------------------------------------------- the input
def _as_dask_array(X: Any, chunk_rows: int, client: Any = None, name: str = "X") -> tuple[Any, Any]:
    """``X`` as a Dask array of rows with one chunk across the columns, and its dtype.

    A DataFrame's partition lengths are counted on the cluster of ``client`` (the default
    scheduler without one); only the counts come back.
    """
    if hasattr(X, "to_dask_array") and hasattr(X, "columns"):  # dask DataFrame
        dtypes = X.dtypes
        for j, (c, t) in enumerate(dtypes.items()):
            if getattr(t, "kind", "O") not in "biuf":
                raise InvalidDataTypeError(
                    f"{name} column {c!r} (position {j}) must be numeric, got dtype {t}",
                    column=j,
                )
        counted = X.map_partitions(len)
        counts = counted.compute() if client is None else client.compute(counted).result()
        lengths = tuple(int(v) for v in counts)
        X = X.to_dask_array(lengths=lengths)
    if isinstance(X, da.Array):
        arr = X
    else:
        from ._validation import check_array

        local = check_array(X, allow_nan=True, min_rows=1, name=name)
        arr = da.from_array(local, chunks=(chunk_rows, -1))
    if arr.ndim != 2:
        raise InvalidDataError(f"{name} must be a 2-D array of rows, got {arr.ndim}-D")
    unknown = [k for k, size in enumerate(arr.chunks[0]) if math.isnan(size)]
    if unknown:
        raise InvalidDataError(
            f"{name} has chunks of unknown length (chunk {unknown[0]} first): call "
            f"{name}.compute_chunk_sizes(), or pass the DataFrame itself"
        )
    if not (np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)):
        raise InvalidDataTypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise InvalidDataTypeError(f"Complex data not supported: {name} must be real-valued")
    if len(arr.chunks[1]) > 1:
        arr = arr.rechunk({1: -1})
    return arr, arr.dtype


def _client(client: Any) -> Any:
    """The client to use, checked to be open."""
    from distributed import get_client

    if client is None:
        try:
            client = get_client()
        except ValueError:
            raise InvalidParameterError(
                "no dask.distributed Client is running: start one (Client(LocalCluster()) or "
                "Client('tcp://scheduler:8786')) or pass client=",
                "client",
            ) from None
    if client.status in ("closing", "closed"):
        raise InvalidParameterError(
            f"the dask.distributed client is {client.status}: fit needs a running one",
            "client",
        )
    return client


def _stats_of_nodes(
    client: Any,
    nodes: Any,
    model: ClusterModel,
    fits: list[tuple[Any, np.ndarray, np.ndarray, int]],
    parts: list[tuple[Any, Any]],
    top_stats: list[np.ndarray],
    n: int,
) -> dict[int, np.ndarray]:
    """The statistics of each node of ``nodes`` of a stitched rose tree.

    From the stitch, or from its part (``fits[p]`` is ``(tree, ids, statistics, number of
    nodes)``, ``parts[p]`` ``(fit future, rows future)``).
    """
    n_part_internal = [n_nodes - len(ids) for _, ids, _, n_nodes in fits]
    first_top = n + sum(n_part_internal)
    part_of_row = np.empty(n, dtype=np.int64)
    local_of_row = np.empty(n, dtype=np.int64)
    for p, (_, ids, _, _) in enumerate(fits):
        part_of_row[ids] = p
        local_of_row[ids] = np.arange(len(ids))
    offsets = np.cumsum([n, *n_part_internal])
    out: dict[int, np.ndarray] = {}
    wanted: dict[int, list[tuple[int, int]]] = {}
    for v in (int(v) for v in nodes):
        if v >= first_top:
            out[v] = top_stats[v - first_top]
            continue
        if v < n:
            p, local = int(part_of_row[v]), int(local_of_row[v])
        else:
            p = int(np.searchsorted(offsets, v, side="right") - 1)
            local = len(fits[p][1]) + (v - int(offsets[p]))
        if fits[p][0] is None or local == fits[p][3] - 1:
            out[v] = fits[p][2]
        else:
            wanted.setdefault(p, []).append((v, local))
    futures = {
        p: client.submit(_part_node_stats, parts[p][1], model, fits[p][0], [lo for _, lo in local])
        for p, local in wanted.items()
    }
    for p, stats in zip(futures, client.gather(list(futures.values())), strict=True):
        for (v, _), s in zip(wanted[p], stats, strict=True):
            out[v] = s
    return out


# ---------------------------------------------------------------------- the estimators
class _SplitFit(ParamsMixin):
    """What the estimators of this module share.

    The sample of smallest keys, and the split of the rows into parts, level by level, on
    the workers. A family gives ``_submit_split`` (the split of a group by its sample),
    ``_route_task`` (the task that routes a piece's rows by a split, whose first two
    entries are the sample tree's children lists and its groups), ``_submit_part`` (the
    fit of a part) and ``_join_blocks``.
    """

    sample_size: int
    split_sample: int
    part_rows: int
    chunk_rows: int
    # Set by fit.
    n_features_in_: int
    cluster_nodes_: np.ndarray
    cluster_stats_: list[np.ndarray]
    _log_weights: np.ndarray

    def _sample_future(self, client: Any, pieces: list[Any], seed: int, size: int) -> Any:
        """A future of the rows of smallest key among ``pieces``, reduced on the workers."""
        level = [client.submit(_sample_piece, p, seed, size, pure=True) for p in pieces]
        while len(level) > 1:
            level = [
                client.submit(_merge_samples, size, *level[i : i + _MERGE_FAN_IN], pure=True)
                for i in range(0, len(level), _MERGE_FAN_IN)
            ]
        return level[0]

    def _sample(
        self, client: Any, pieces: list[Any], seed: int, size: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rows of smallest key among ``pieces``, in row order, on the client."""
        return _in_row_order(self._sample_future(client, pieces, seed, size).result())

    def _expand(self, client: Any, root: _Node, model: Any, chunks: _Chunks) -> None:
        """Splits ``root`` into parts, level by level, each part's fit submitted as found.

        Within a level every group is sampled, split (on a worker) and routed at once;
        the client waits only for the level's row counts, which decide the next level.
        """
        frontier = [root]
        while frontier:
            splitting: list[_Node] = []
            for node in frontier:
                if node.count <= self.part_rows or node.depth >= _MAX_DEPTH:
                    self._submit_part(client, node, model, chunks)
                    continue
                if node.blocks:
                    n_blocks = max(2, math.ceil(node.count / self.part_rows))
                    node.routed = [
                        client.submit(_split_blocks, p, node.seed, n_blocks, pure=True)
                        for p in node.pieces
                    ]
                else:
                    if node.split is None:
                        size = min(int(self.sample_size), int(self.split_sample))
                        sample = self._sample_future(client, node.pieces, node.seed, size)
                        node.split = self._submit_split(client, sample, model, node, size)
                    node.routed = [
                        client.submit(self._route_task, p, model, node.split, chunks, pure=True)
                        for p in node.pieces
                    ]
                node.lengths = [client.submit(_lengths, r, pure=True) for r in node.routed]
                splitting.append(node)
            counts = client.gather([node.lengths for node in splitting])
            frontier = []
            for node, c in zip(splitting, counts, strict=True):
                c = np.asarray(c, dtype=np.int64)
                if not node.blocks and np.count_nonzero(c.sum(axis=0)) < 2:
                    # The sample's groups do not separate these rows (they look alike).
                    node.blocks, node.split = True, None
                    frontier.append(node)
                    continue
                if not node.blocks and not isinstance(node.split, tuple):
                    node.split = node.split.result()
                for g in range(c.shape[1]):
                    holding = [r for r, k in zip(node.routed, c[:, g], strict=True) if k > 0]
                    if not holding:
                        node.children.append(None)
                        continue
                    pieces = [client.submit(_take, r, g, pure=True) for r in holding]
                    child = _Node(
                        pieces, int(c[:, g].sum()), node.depth + 1, _child_seed(node.seed, g)
                    )
                    node.children.append(child)
                    frontier.append(child)
                # The children hold what they need; the scheduler keeps the lineage.
                node.pieces, node.routed, node.lengths = [], [], []

    def _shape(self, node: _Node, parts: list[tuple[Any, Any]]) -> Any:
        """The shape of ``node``'s tree: a part index, or a list of shapes.

        Parts are numbered in this depth-first order, the same for any timing.
        """
        if node.part is not None:
            parts.append(node.part)
            return len(parts) - 1
        kids = [None if c is None else self._shape(c, parts) for c in node.children]
        if node.blocks:
            kids = [k for k in kids if k is not None]
            return kids[0] if len(kids) == 1 else self._join_blocks(kids)
        children, groups = node.split[0], node.split[1]
        return _assemble(children, len(children) - 1, dict(zip(groups, kids, strict=True)))

    def _join_blocks(self, kids: list[Any]) -> Any:
        """The shape joining the blocks of rows a sample does not split."""
        return _balanced(kids)

    def _check_fitted(self) -> None:
        if not hasattr(self, "tree_"):
            raise NotFittedError(
                f"This {type(self).__name__} instance is not fitted yet; call fit(X) before "
                "using it for prediction."
            )

    # ------------------------------------------------------------------ prediction
    def _predictor(self) -> tuple[ClusterModel, Any, np.ndarray | None, Any]:
        """What prediction reads besides the clusters' statistics.

        The flat clusters' model, the columns kept (None: all), where each cluster's member
        nodes begin among them (None: one node per cluster), and the encoding of new rows
        (None: as given).
        """
        raise NotImplementedError

    def fit(self, X: Any, y: Any = None, *, client: Any = None) -> Any:
        raise NotImplementedError

    def score_samples(self, X: Any) -> Any:
        raise NotImplementedError

    def _map(self, X: Any, what: str) -> Any:
        """``what`` ("proba", "labels" or "score") of every row of ``X``, lazily."""
        self._check_fitted()
        X, dtype = _as_dask_array(X, int(self.chunk_rows))
        if X.shape[1] != self.n_features_in_:
            raise InvalidDataError(
                f"X has {X.shape[1]} columns; the estimator was fitted with {self.n_features_in_}"
            )
        model, keep, starts, encode = self._predictor()
        stats, weights, d = self.cluster_stats_, self._log_weights, self.n_features_in_
        args = (model, stats, weights, what, dtype, d, keep, _Chunks(X.chunks[0]), starts)
        if what == "proba":
            out = {"dtype": np.float64, "chunks": (X.chunks[0], (len(self.cluster_nodes_),))}
        else:
            out = {"dtype": np.int64 if what == "labels" else np.float64, "drop_axis": 1}
        return X.map_blocks(_predict_block, *args, encode=encode, **out)

    def predict(self, X: Any) -> Any:
        """The flat cluster each row most probably joins, lazily (a Dask array of int64)."""
        return self._map(X, "labels")

    def score(self, X: Any, y: Any = None) -> float:
        """Mean of :meth:`score_samples` over the rows of ``X``, reduced on the workers.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array_like
        y : ignored

        Returns
        -------
        float
        """
        return float(self.score_samples(X).mean().compute())

    def fit_predict(self, X: Any, y: Any = None, *, client: Any = None) -> Any:
        """Fit and return ``labels_``."""
        return self.fit(X, client=client).labels_

    def _submit_split(self, client: Any, sample: Any, model: Any, node: _Node, size: int) -> Any:
        raise NotImplementedError

    def _submit_part(self, client: Any, node: _Node, model: Any, chunks: _Chunks) -> None:
        raise NotImplementedError

    #: ``(piece, model, split, chunks) -> pieces by group``, a static method of the family.
    _route_task: Any = None


class BayesianRoseTree(_SplitFit):
    r"""Greedy Bayesian rose tree of a Dask collection, fitted on a ``dask.distributed`` cluster.

    See the module documentation for how the fit is split; the tree's evidence is exact
    and the tree is the same for any number of workers and any chunking.

    Parameters
    ----------
    model : ClusterModel, AutoModel or "auto", default="auto"
        A conjugate cluster model (:class:`~rosetree.BetaBernoulli`,
        :class:`~rosetree.NormalInverseWishart`, :class:`~rosetree.NormalGamma`,
        :class:`~rosetree.DirichletMultinomial`), or ``"auto"`` to choose one on the
        sample as the single-machine estimator does. Data-driven defaults are computed
        from the sample (every row when there are at most ``sample_size``), and every
        part is fitted with that one resolved model (:attr:`model_`). A model written in
        Python is not supported: its statistics are its rows.
    mixing, gamma, dp_alpha, binary, merge_rule
        As :class:`rosetree.BayesianRoseTree`.
    approximate : bool, default=True
        Fit parts of more than ``exact_below`` rows with the single-machine approximate
        search (otherwise exactly, which is quadratic in ``part_rows``).
    exact_below : int, default=4000
        As :class:`rosetree.BayesianRoseTree`, within each part.
    sample_size : int, default=20000
        Rows fitted on the client to find the top of the tree (and of each part split
        again): the client's work is bounded by it, whatever the size of the data.
    part_rows : int, default=20000
        Largest part fitted by one task; larger groups are split again.
    split_sample : int, default=1000
        Rows sampled (at most ``sample_size``) to split a group of more than
        ``part_rows`` rows, as the single-machine approximate search samples; the sample
        is fitted on a worker.
    chunk_rows : int, default=100000
        Rows per chunk when ``X`` is an in-memory array.
    random_state : int, default=None
        Seed of the samples and of the approximate searches (``None`` means 0).
    flat_clusters, n_clusters, cut_threshold
        How :attr:`labels_` is read off the tree, as :class:`rosetree.BayesianRoseTree`.

    Attributes
    ----------
    tree_ : RoseTree
        The fitted tree over all rows (leaf *i* is row *i*).
    log_evidence_ : float
        :math:`\ln p(D \mid T)` of :attr:`tree_` (eq 1.5), exact.
    labels_ : dask.array.Array of shape (n_samples,)
        Flat clusters, chunked as the input's rows.
    cluster_nodes_ : ndarray of shape (K,)
        The node of :attr:`tree_` that is each flat cluster; -1 for a union of sibling
        subtrees (only with ``n_clusters``, as :class:`rosetree.BayesianRoseTree`).
    cluster_members_ : list of ndarray
        The nodes whose leaves make up each flat cluster (one, but for such a union).
    cluster_stats_ : list of ndarray
        The sufficient statistics (the model's encoding) of each node of
        :attr:`cluster_members_`, in order: what prediction uses.
    model_ : ClusterModel
        The cluster model with every hyperparameter given.
    constant_features_ : ndarray of int
        Columns left out (constant in the sample, for Gaussian models with a data-driven
        scale).
    n_parts_ : int
        Subtrees fitted on the workers.
    n_features_in_ : int
        Columns of ``X``.

    Examples
    --------
    >>> from distributed import Client, LocalCluster  # doctest: +SKIP
    >>> import dask.array as da, rosetree.dask  # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2))  # doctest: +SKIP
    >>> X = da.random.random((1_000_000, 32), chunks=100_000) < 0.3  # doctest: +SKIP
    >>> est = rosetree.dask.BayesianRoseTree(random_state=0).fit(X)  # doctest: +SKIP
    >>> est.predict(X).compute()  # doctest: +SKIP
    """

    def __init__(
        self,
        model: ClusterModel | AutoModel | str | None = "auto",
        *,
        mixing: str = "brt",
        gamma: float = 0.5,
        dp_alpha: float = 1.0,
        binary: bool = False,
        merge_rule: str = "likelihood_ratio",
        approximate: bool = True,
        exact_below: int = 4000,
        sample_size: int = 20000,
        part_rows: int = 20000,
        split_sample: int = 1000,
        chunk_rows: int = 100_000,
        random_state: int | None = None,
        flat_clusters: str = "dp",
        n_clusters: int | None = None,
        cut_threshold: float = 0.5,
    ) -> None:
        self.model = model
        self.mixing = mixing
        self.gamma = gamma
        self.dp_alpha = dp_alpha
        self.binary = binary
        self.merge_rule = merge_rule
        self.approximate = approximate
        self.exact_below = exact_below
        self.sample_size = sample_size
        self.part_rows = part_rows
        self.split_sample = split_sample
        self.chunk_rows = chunk_rows
        self.random_state = random_state
        self.flat_clusters = flat_clusters
        self.n_clusters = n_clusters
        self.cut_threshold = cut_threshold

    # ------------------------------------------------------------------ checks
    def _local(self, random_state: int, approximate: bool) -> _LocalRoseTree:
        """The single-machine estimator with this one's settings."""
        return _LocalRoseTree(
            model=self.model,
            mixing=self.mixing,
            gamma=self.gamma,
            dp_alpha=self.dp_alpha,
            binary=self.binary,
            merge_rule=self.merge_rule,
            approximate=approximate,
            exact_below=self.exact_below,
            random_state=random_state,
            flat_clusters=self.flat_clusters,
            n_clusters=self.n_clusters,
            cut_threshold=self.cut_threshold,
        )

    def _check_params(self) -> None:
        mixing_args(self.mixing, self.gamma, self.dp_alpha)
        check_merge_rule(self.merge_rule)
        check_flag(self.binary, "binary")
        check_flag(self.approximate, "approximate")
        check_choice(self.flat_clusters, "flat_clusters", ROSE_FLAT_CLUSTERS)
        check_cut_threshold(self.cut_threshold)
        for name in ("exact_below", "sample_size", "part_rows", "split_sample", "chunk_rows"):
            value = getattr(self, name)
            check_int(value, name, low=2)
        model = self.model
        if isinstance(model, ClusterModel):
            resolve_model(model)
            if not isinstance(model, _CONJUGATE):
                raise InvalidParameterError(
                    "rosetree.dask needs a conjugate cluster model (BetaBernoulli, "
                    "NormalInverseWishart, NormalGamma, DirichletMultinomial): a model "
                    "written in Python keeps its rows as statistics",
                    "model",
                )

    def _params(self, seed: int, n_rows: int) -> dict[str, Any]:
        """The core's options for the single-machine fit of ``n_rows`` rows.

        A dict of ``_core.BrtParams``'s arguments, which travels to the workers.
        """
        approx = None
        if self.approximate and n_rows > self.exact_below:
            approx = (int(self.exact_below), min(_APPROX_SAMPLE, int(self.exact_below)), seed)
        return dict(
            **mixing_args(self.mixing, self.gamma, self.dp_alpha),
            binary=bool(self.binary),
            merge_rule=self.merge_rule,
            approx=approx,
        )

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any = None, *, client: Any = None) -> BayesianRoseTree:
        """Build the tree over the rows of ``X`` on the cluster of ``client``.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array_like
            Rows to cluster. In-memory arrays are cut into chunks of ``chunk_rows``.
        y : ignored
        client : distributed.Client, optional
            The client of the cluster to fit on; by default the current one
            (``distributed.get_client()``).

        Returns
        -------
        self : BayesianRoseTree

        Raises
        ------
        InvalidDataError
            For a chunk with values the model does not accept (NaN where it forbids them,
            infinite values), naming the chunk, row and column; for chunks of unknown
            length. :class:`~rosetree.exceptions.InvalidDataTypeError` for a chunk whose
            dtype differs from the collection's.
        InvalidParameterError
            When the client is closed or there is none (``parameter == "client"``).
        """
        self._check_params()
        seed = check_seed(self.random_state)
        client = _client(client)
        X, dtype = _as_dask_array(X, int(self.chunk_rows), client)
        n, d = (int(v) for v in X.shape)
        if n < 2:
            raise InvalidDataError(f"X needs at least 2 rows, got n_samples = {n}")
        chunks = _Chunks(X.chunks[0])
        spec_in = self._local(seed, False)._model_spec()
        allow_nan = bool(spec_in._accepts_missing)

        def pieces_of(keep: Any) -> list[Any]:
            starts = chunks.starts
            tasks = [
                delayed(_piece, pure=True)(b, k, starts[k], d, dtype, allow_nan, keep, True)
                for k, b in enumerate(X.to_delayed().ravel())
            ]
            return list(client.compute(tasks))

        pieces = pieces_of(None)
        size = int(self.sample_size)
        _, ids, sample = self._sample(client, pieces, seed, size)
        # The model: chosen and resolved on the sample, then fixed for every part.
        local = self._local(seed, len(ids) > self.exact_below and bool(self.approximate))
        try:
            local.fit(sample)
        except RoseTreeError as exc:
            raise _located(exc, ids, chunks) from None
        keep = None
        self.constant_features_ = local.constant_features_
        if local.constant_features_.size:
            keep = np.delete(np.arange(d), local.constant_features_)
            sample = np.ascontiguousarray(sample[:, keep])
            pieces = pieces_of(keep)
        self.model_ = _resolved(local.model_, sample)
        model = self.model_
        root = _Node(pieces, n, 0, seed)
        if n > self.part_rows:
            top = local.tree_._core
            groups = _core.brt_top_clusters(top)
            stats = list(_core.brt_node_stats(_f64(sample), model._spec(), top, groups))
            root.split = (top.tree().children(), groups, stats)
        self._expand(client, root, model, chunks)
        parts: list[tuple[Any, Any]] = []
        shape = self._shape(root, parts)
        fits = client.gather([f for f, _ in parts])
        n_parts = len(fits)
        top_nodes: list[list[int]] = []
        _flatten(shape, n_parts, top_nodes)
        mixing = mixing_args(self.mixing, self.gamma, self.dp_alpha)
        core, top_stats = _core.brt_stitch(
            model._spec(),
            d if keep is None else len(keep),
            n,
            [(t, part_ids.tolist(), s) for t, part_ids, s, _ in fits],
            top_nodes,
            **mixing,
        )
        self.tree_ = RoseTree(core)
        self.log_evidence_ = float(self.tree_.log_evidence)
        self.gamma_, self.dp_alpha_ = float(self.gamma), float(self.dp_alpha)
        flat = _LocalRoseTree._flat_groups(self, self.tree_)  # type: ignore[arg-type]
        labels = self.tree_._labels_of_groups(flat)
        self.cluster_members_ = [np.asarray(g, dtype=np.int64) for g in flat]
        self.cluster_nodes_ = np.asarray([g[0] if len(g) == 1 else -1 for g in flat], np.int64)
        members = np.concatenate(self.cluster_members_)
        by_node = _stats_of_nodes(client, members, self.model_, fits, parts, top_stats, n)
        self.cluster_stats_ = [by_node[int(v)] for v in members]
        sizes = self.tree_.sizes[members].astype(np.float64)
        self._log_weights = np.log(sizes / n)
        # Where each cluster's members begin among them (None: one node per cluster).
        self._starts: np.ndarray | None = None
        if len(members) > len(flat):
            self._starts = np.cumsum([0, *(len(g) for g in flat[:-1])])
        self.labels_ = da.from_array(np.asarray(labels, dtype=np.int64), chunks=(X.chunks[0],))
        self.n_parts_ = n_parts
        self.n_features_in_ = d
        self._keep = keep
        return self

    def _submit_part(self, client: Any, node: _Node, model: ClusterModel, chunks: _Chunks) -> None:
        """Submits the fit of the part ``node``: its rows together, then one task."""
        keys = [p.key for p in node.pieces]
        rows = client.submit(_gather_part, *node.pieces, key=f"rosetree-rows-{tokenize(keys)}")
        fit = client.submit(
            _fit_part,
            rows,
            model,
            self._params(node.seed, node.count),
            chunks,
            pure=True,
            key=f"rosetree-part-{tokenize(rows.key, node.seed)}",
        )
        node.part = (fit, rows)
        node.pieces = []

    def _submit_split(
        self, client: Any, sample: Any, model: ClusterModel, node: _Node, size: int
    ) -> Any:
        """A future of the split of ``node`` by its sample (a future of ``size`` rows)."""
        params = self._params(node.seed, min(size, node.count))
        return client.submit(_split, sample, model, params, pure=True)

    #: The task that routes the rows of a piece by a split.
    _route_task = staticmethod(_route)

    def _join_blocks(self, kids: list[Any]) -> Any:
        return _balanced(kids) if self.binary else kids

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, X: Any) -> Any:
        r"""Posterior probability of each flat cluster given each row, lazily.

        :math:`P(c \mid x) \propto n_c\, f(x \mid D_c)`, as
        :meth:`rosetree.BayesianRoseTree.predict_proba`.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array_like

        Returns
        -------
        dask.array.Array of shape (n_rows, n_clusters)
        """
        return self._map(X, "proba")

    def score_samples(self, X: Any) -> Any:
        r"""Log predictive probability of each row under the flat clusters, lazily.

        :math:`\ln \sum_c (n_c / n) f(x \mid D_c)`: the mixture of the flat clusters that
        :meth:`predict_proba` normalises. The single-machine estimator's
        ``score_samples`` sums eq 1.25 over every node of the tree, leaves included,
        which needs every training row; this one keeps only the clusters' statistics.

        Returns
        -------
        dask.array.Array of shape (n_rows,)
        """
        return self._map(X, "score")

    def _predictor(self) -> tuple[ClusterModel, Any, np.ndarray | None, Any]:
        return self.model_, self._keep, self._starts, None


def _resolved(model: ClusterModel, sample: np.ndarray) -> ClusterModel:
    """``model`` with its data-driven defaults filled in from ``sample``."""
    import dataclasses

    values = dict(_core.resolved_model(_f64(sample), model._spec()))
    values.pop("hyperparameters", None)
    # Only the defaults are filled in: given values stay as given.
    values = {
        k: np.asarray(v, dtype=np.float64) if isinstance(v, list) else float(v)
        for k, v in values.items()
        if getattr(model, k, None) is None
    }
    if "psi0" in values:
        d = sample.shape[1]
        values["psi0"] = values["psi0"].reshape(d, d)
    if "b0" in values and getattr(model, "shared_precision", False) is True:
        values["b0"] = float(values["b0"][0])  # the one rate of the shared precision
    return dataclasses.replace(model, **values)  # type: ignore[type-var]


def _assemble(children: Sequence[Sequence[int]], root: int, built: dict[int, Any]) -> Any:
    """The sample tree's structure above its groups, each group replaced by its shape.

    Empty groups (``None``) are dropped, and so are nodes left with one child.
    """

    def go(v: int) -> Any:
        if v in built:
            return built[v]
        kids = [s for s in (go(c) for c in children[v]) if s is not None]
        if not kids:
            return None
        return kids[0] if len(kids) == 1 else kids

    return go(root)


def _balanced(shapes: list[Any]) -> Any:
    """The shapes as the leaves of a balanced binary tree."""
    if len(shapes) == 1:
        return shapes[0]
    half = len(shapes) // 2
    return [_balanced(shapes[:half]), _balanced(shapes[half:])]


def _flatten(shape: Any, n_parts: int, top: list[list[int]]) -> int:
    """Appends the internal nodes of ``shape`` to ``top`` in post-order; returns its id."""
    if isinstance(shape, int):
        return shape
    ids = [_flatten(s, n_parts, top) for s in shape]
    top.append(ids)
    return n_parts + len(top) - 1


# ---------------------------------------------------------------------- the coalescent
#: Rows fitted exactly in a sample tree of the coalescent's approximate search.
_COAL_APPROX_SAMPLE = 1000


def _coal_column_stats(
    piece: tuple[np.ndarray, np.ndarray], likelihood: str, chunks: _Chunks
) -> dict[str, Any]:
    """What the model needs of a piece's rows.

    Observed entries per column and, for the multinomial likelihood, each column's state
    counts (codes checked here, naming the chunk).
    """
    ids, rows = piece
    observed = ~np.isnan(rows)
    out: dict[str, Any] = {"observed": observed.sum(axis=0), "counts": None}
    if likelihood == "multinomial":
        where = non_category(rows)
        if where is not None:
            i, j = where
            row = int(ids[i])
            raise InvalidDataError(
                f"{chunks.describe(row)}, column {j}: value {rows[i, j]} is not a category: "
                "the multinomial likelihood needs whole numbers 0, 1, 2, … (NaN for missing)",
                row,
                j,
            )
        out["counts"] = [
            np.bincount(col[~np.isnan(col)].astype(np.int64), minlength=2) for col in rows.T
        ]
    return out


def _coal_merge_stats(*stats: dict[str, Any]) -> dict[str, Any]:
    """The column statistics of several pieces together."""
    observed = sum(s["observed"] for s in stats)
    counts = None
    if stats[0]["counts"] is not None:
        counts = []
        for cols in zip(*(s["counts"] for s in stats), strict=True):
            width = max(len(c) for c in cols)
            counts.append(sum(np.pad(c, (0, width - len(c))) for c in cols))
    return {"observed": observed, "counts": counts}


def _coal_encode(
    rows: np.ndarray,
    center: np.ndarray | None,
    scale: np.ndarray | None,
    k: list[int] | None,
    keep: np.ndarray | None = None,
) -> np.ndarray:
    """Rows as the flat clusters' model reads them (``KingmanCoalescent._cluster_data``).

    Brownian rows are centred and scaled, and only the columns ``keep`` are kept.
    """
    if k is None:
        assert center is not None and scale is not None and keep is not None
        return np.ascontiguousarray(((rows - center) / scale)[:, keep])
    columns = []
    for j, kj in enumerate(k):
        col = rows[:, j]
        ind = (col[:, None] == np.arange(kj)[None, :]).astype(np.float64)
        ind[np.isnan(col)] = np.nan
        columns.append(ind)
    return np.ascontiguousarray(np.hstack(columns))


def _coal_threads() -> int | None:
    """The threads of this worker (``None`` off a worker: every core)."""
    try:
        from distributed import get_worker

        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return None


def _coal_model(spec: dict[str, Any]) -> Any:
    """The core's model shared by every part, from ``CoalescentModel.shared``'s options."""
    return _core.CoalescentModel.shared(**spec)


def _coal_params(approx: Any) -> Any:
    """Greedy-Rate1 on this worker's threads, approximate with ``approx``."""
    return _core.CoalescentParams(n_jobs=_coal_threads(), approx=approx)


def _coal_split(
    sample: tuple[np.ndarray, ...],
    spec: dict[str, Any],
    approx: Any,
    max_leaves: int,
) -> tuple[list[list[int]], list[int], float, list[list[float]]]:
    """The split of a group by its sample.

    The sample tree's children lists, its groups, the time they are told apart and their
    posteriors there (``coalescent::Router``).
    """
    _, _, rows = _in_row_order(sample)
    model = _coal_model(spec)
    tree = model.fit_part(rows, _coal_params(approx))[0]
    assert tree is not None  # a sample has at least two rows
    groups, tau, posteriors = model.router(rows, tree, max_leaves=max_leaves)
    return tree.children(), groups, tau, posteriors


def _coal_route(
    piece: tuple[np.ndarray, np.ndarray],
    spec: dict[str, Any],
    split: tuple[Any, ...],
    chunks: _Chunks,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The rows of a piece by group: each to the lineage it most probably joins."""
    ids, rows = piece
    _, groups, tau, posteriors = split
    try:
        labels = _coal_model(spec).route(rows, posteriors, tau)
    except RoseTreeError as exc:
        raise _located(exc, ids, chunks) from None
    return [(ids[labels == g], rows[labels == g]) for g in range(len(groups))]


def _coal_fit_part(
    part: tuple[np.ndarray, np.ndarray],
    spec: dict[str, Any],
    approx: Any,
    flat: tuple[Any, ClusterModel, float],
    chunks: _Chunks,
) -> tuple[Any, ...]:
    """The single-machine Greedy-Rate1 fit of a part and its summaries.

    Returns ``(tree or None, ids, root message, Σ ln Z, evidence of every node, the tree as
    a rose tree under the flat clusters' model or None, that model's statistics of all
    rows, number of nodes)``.
    """
    ids, rows = part
    encode, model, dp_alpha = flat
    try:
        tree, message, log_z, evidence = _coal_model(spec).fit_part(rows, _coal_params(approx))
        data = encode(rows)
        cspec = model._spec()
        if tree is None:
            return (
                None,
                ids,
                message,
                log_z,
                evidence,
                None,
                _core.brt_node_stats(data, cspec, None, [0])[0],
                1,
            )
        children = tree.children()
        mixing = mixing_args("dp", 0.5, dp_alpha)
        rose = _core.evaluate_tree(data, cspec, children[len(ids) :], **mixing)
        stats = _core.brt_node_stats(data, cspec, rose, [len(children) - 1])[0]
    except RoseTreeError as exc:
        raise _located(exc, ids, chunks) from None
    return tree, ids, message, log_z, evidence, rose, stats, len(children)


def _coal_cluster_rows(
    part: tuple[np.ndarray, np.ndarray], encode: Any
) -> tuple[np.ndarray, np.ndarray]:
    """A part's rows as the flat clusters' model reads them."""
    return part[0], encode(part[1])


class KingmanCoalescent(_SplitFit):
    r"""Greedy-Rate1 coalescent tree of a Dask collection, fitted on a ``dask.distributed`` cluster.

    The split is :class:`BayesianRoseTree`'s, with the coalescent's pieces (see "Large
    data" in the coalescent guide for the single-machine ``approximate=True`` it extends):

    1. **The top of the tree on the client**: the rows of smallest key (at most
       ``sample_size``, the same for any chunking) are fitted by Greedy-Rate1 (approximate
       above ``exact_below`` rows), and the sample tree is cut into groups, the lineages
       alive at one time :math:`\tau`, its oldest merges undone first until each group is
       expected to hold at most ``part_rows`` rows (at most 64 groups).
    2. **Routing on the workers**, chunk by chunk: each row goes to the lineage it most
       probably joins at :math:`\tau` (the coalescent's attachment density there, against
       each group's posterior given the whole sample), as the single-machine approximate
       search routes. Only the groups' posterior messages travel.
    3. **Subtrees on the workers**: each group's rows are fitted by Greedy-Rate1 in one task
       (approximate above ``exact_below`` rows); a group of more than ``part_rows`` rows is
       sampled (``split_sample`` rows, on a worker) and split again.
    4. **Stitching** from each subtree's root message (Gaussian mean and variance, or the
       mutation model's message), its time and the sum of its merges' :math:`\ln Z`: the
       joins above the groups are timed by the Greedy-Rate1 rule, and
       :attr:`log_joint_` is the exact :math:`\ln p(x, \pi)` (eq 7) of :attr:`tree_`.

    The model is the same on every machine: ``Lambda="auto"`` (one rate, the mean of the
    columns' variances, or each column's own for columns in different units) is computed
    **from the sample**, as are the flat clusters'
    standardization, the columns they leave out (those constant in the sample) and
    cluster-model defaults; whether any entry is missing, the columns
    with no observed entry and the multinomial's categories and equilibrium frequencies
    come from a reduction over **all** chunks on the workers (a category that only a few
    rows have must still be a state). With at most ``sample_size`` rows the sample is every
    row, and the tree is the single-machine ``KingmanCoalescent(approximate=True)``'s. The
    flat clusters' model is :class:`~rosetree.NormalGamma` on the standardized columns
    (the single-machine estimator chooses between it and
    :class:`~rosetree.NormalInverseWishart` on its fitted tree, which the parts' flat
    trees would need before the tree exists).

    Parameters
    ----------
    likelihood, Lambda, noise, root
        As :class:`rosetree.KingmanCoalescent` (NaN marks a missing entry).
    approximate : bool, default=True
        Fit parts of more than ``exact_below`` rows with the single-machine approximate
        search (otherwise exactly, quadratic in ``part_rows``).
    exact_below, approx_sample
        As :class:`rosetree.KingmanCoalescent`, within each part and sample.
    sample_size : int, default=20000
        Rows fitted on the client to find the top of the tree.
    part_rows : int, default=20000
        Largest part fitted by one task; larger groups are split again.
    split_sample : int, default=1000
        Rows sampled (at most ``sample_size``) to split a group of more than ``part_rows``.
    chunk_rows : int, default=100000
        Rows per chunk when ``X`` is an in-memory array.
    random_state : int, default=None
        Seed of the samples and of the approximate searches (``None`` means 0).
    dp_alpha, cut_threshold
        The flat clusters (:attr:`labels_`), as :class:`rosetree.KingmanCoalescent`'s
        ``flat_clusters="dp"``; ``llr_threshold`` is :meth:`cluster_labels`' default.
    llr_threshold : float, default=0.0

    Attributes
    ----------
    tree_ : Tree
        The coalescent tree over all rows (leaf *i* is row *i*), heights its times.
    log_joint_ : float
        :math:`\ln p(x, \pi)` of :attr:`tree_` (eq 7), exact.
    split_llr_ : ndarray of shape (n_nodes,)
        As :class:`rosetree.KingmanCoalescent`.
    Lambda_, noise_
        The model's rate and observation noise.
    labels_ : dask.array.Array of shape (n_samples,)
        Flat clusters (``flat_clusters="dp"``), chunked as the input's rows.
    cluster_tree_ : RoseTree
        :attr:`tree_` under the flat clusters' model with DP mixing (stitched as
        :class:`BayesianRoseTree`'s tree is).
    cluster_nodes_ : ndarray of int
        The node of :attr:`cluster_tree_` that is each flat cluster.
    cluster_stats_ : list of ndarray
        Each flat cluster's statistics under the flat clusters' model (prediction's state).
    n_clusters_, n_parts_, n_features_in_ : int

    Examples
    --------
    >>> from distributed import Client, LocalCluster  # doctest: +SKIP
    >>> import dask.array as da, rosetree.dask  # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2))  # doctest: +SKIP
    >>> X = da.random.normal(size=(1_000_000, 20), chunks=100_000)  # doctest: +SKIP
    >>> est = rosetree.dask.KingmanCoalescent(random_state=0).fit(X)  # doctest: +SKIP
    >>> est.log_joint_, est.predict(X).compute()  # doctest: +SKIP
    """

    def __init__(
        self,
        likelihood: str = "brownian",
        Lambda: Any = "auto",
        *,
        noise: float | None = None,
        root: Any = "flat",
        approximate: bool = True,
        exact_below: int = 4000,
        approx_sample: int = 1000,
        sample_size: int = 20000,
        part_rows: int = 20000,
        split_sample: int = 1000,
        chunk_rows: int = 100_000,
        random_state: int | None = None,
        dp_alpha: float = 1.0,
        cut_threshold: float = 0.5,
        llr_threshold: float = 0.0,
    ) -> None:
        self.likelihood = likelihood
        self.Lambda = Lambda
        self.noise = noise
        self.root = root
        self.approximate = approximate
        self.exact_below = exact_below
        self.approx_sample = approx_sample
        self.sample_size = sample_size
        self.part_rows = part_rows
        self.split_sample = split_sample
        self.chunk_rows = chunk_rows
        self.random_state = random_state
        self.dp_alpha = dp_alpha
        self.cut_threshold = cut_threshold
        self.llr_threshold = llr_threshold

    # ------------------------------------------------------------------ checks
    def _approx(self, seed: int, n_rows: int) -> tuple[int, int, int] | None:
        """The core's approximate-search options for ``n_rows`` rows, or ``None``."""
        from ._validation import check_approx

        approx = check_approx(self.approximate, self.exact_below, self.approx_sample, seed)
        if approx is None or n_rows <= approx[0]:
            return None
        return approx

    def _check_params(self) -> tuple[str, float, float | None]:
        from ._validation import check_positive
        from .coalescent import _likelihood, _noise, _root, _threshold

        likelihood = _likelihood(self.likelihood)
        noise = _noise(self.noise, likelihood)
        root = _root(self.root)
        self._approx(0, 0)
        check_positive(self.dp_alpha, "dp_alpha")
        check_cut_threshold(self.cut_threshold)
        _threshold(self.llr_threshold)
        for name in ("sample_size", "part_rows", "split_sample", "chunk_rows"):
            check_int(getattr(self, name), name, low=2)
        return likelihood, noise, root

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any = None, *, client: Any = None) -> KingmanCoalescent:
        """Build the coalescent tree over the rows of ``X`` on the cluster of ``client``.

        Parameters
        ----------
        X : dask.array.Array, dask.dataframe.DataFrame or array_like
            Rows to cluster (NaN for missing). In-memory arrays are cut into chunks of
            ``chunk_rows``.
        y : ignored
        client : distributed.Client, optional
            The client of the cluster to fit on; by default the current one.

        Returns
        -------
        self : KingmanCoalescent

        Raises
        ------
        InvalidDataError
            For a chunk with a value the likelihood does not take (an infinite value, a
            multinomial entry that is not a category), naming the chunk, row and column;
            for a column with no observed entry under Brownian diffusion with the flat
            root.
        InvalidParameterError
            For bad options, or a closed or missing client (``parameter == "client"``).
        """
        from .coalescent import _auto_lambda, _auto_rate, _lambda

        likelihood, noise, root_s0 = self._check_params()
        seed = check_seed(self.random_state)
        client = _client(client)
        X, dtype = _as_dask_array(X, int(self.chunk_rows), client)
        n, d = (int(v) for v in X.shape)
        if n < 2:
            raise InvalidDataError(f"X needs at least 2 rows, got n_samples = {n}")
        chunks = _Chunks(X.chunks[0])
        starts = chunks.starts
        pieces = list(
            client.compute(
                [
                    delayed(_piece, pure=True)(b, k, starts[k], d, dtype, True, None)
                    for k, b in enumerate(X.to_delayed().ravel())
                ]
            )
        )
        # What the model needs of all rows, reduced on the workers.
        level = [
            client.submit(_coal_column_stats, p, likelihood, chunks, pure=True) for p in pieces
        ]
        while len(level) > 1:
            level = [
                client.submit(_coal_merge_stats, *level[i : i + _MERGE_FAN_IN], pure=True)
                for i in range(0, len(level), _MERGE_FAN_IN)
            ]
        columns = level[0].result()
        _, ids, sample = self._sample(client, pieces, seed, int(self.sample_size))
        observed = np.asarray(columns["observed"])
        masked = bool((observed < n).any())
        counts = None
        if likelihood == "brownian":
            empty = np.flatnonzero(observed == 0)
            if root_s0 is None and empty.size:
                raise InvalidDataError(
                    f"column {empty[0]} has no observed value: with the flat root its "
                    "predictive distribution is improper (drop the column or give a proper "
                    "root)"
                )
            if isinstance(self.Lambda, str) and self.Lambda == "auto":
                lam = _auto_rate(sample)
            else:
                lam = _lambda(self.Lambda)
            center = np.nanmean(np.where(np.isnan(sample).all(axis=0), 0.0, sample), axis=0)
            # Columns constant in the sample are left out of the flat clusters, as
            # KingmanCoalescent leaves out those constant in its rows.
            encode = functools.partial(
                _coal_encode,
                center=center,
                scale=np.sqrt(_auto_lambda(sample)),
                k=None,
                keep=np.delete(np.arange(d), equal_valued_columns(sample)),
            )
            cluster_model: ClusterModel = NormalGamma()
        else:
            lam = _lambda(
                1.0 if isinstance(self.Lambda, str) and self.Lambda == "auto" else self.Lambda
            )
            k = [max(len(c), 2) for c in columns["counts"]]
            counts = [
                (np.pad(c, (0, kj - len(c))) + 1.0).tolist()
                for c, kj in zip(columns["counts"], k, strict=True)
            ]
            encode = functools.partial(_coal_encode, center=None, scale=None, k=k)
            cluster_model = BetaBernoulli()
        spec: dict[str, Any] = dict(
            n_features=d,
            likelihood=likelihood,
            lambda_=lam,
            root=root_s0,
            noise=noise,
            masked=masked,
            counts=counts,
        )
        # The model is checked here (Lambda's shape and values), before any work is sent.
        _coal_model(spec)
        self._spec = spec
        self._encode = encode
        self.cluster_model_ = _resolved(cluster_model, encode(sample))
        flat = (encode, self.cluster_model_, float(self.dp_alpha))
        self._flat_args = flat
        root = _Node(pieces, n, 0, seed)
        if n > self.part_rows:
            try:
                root.split = _coal_split(
                    (ids, ids, sample),
                    spec,
                    self._approx(seed, len(ids)),
                    max(1, len(ids) * int(self.part_rows) // n),
                )
            except RoseTreeError as exc:
                raise _located(exc, ids, chunks) from None
        self._expand(client, root, spec, chunks)
        parts: list[tuple[Any, Any]] = []
        shape = self._shape(root, parts)
        fits = client.gather([f for f, _ in parts])
        top: list[list[int]] = []
        _flatten(shape, len(fits), top)
        tree, log_joint, part_nodes, top_nodes, top_evidence = _coal_model(spec).stitch(
            n, [(f[0], f[1].tolist(), f[2], f[3]) for f in fits], top
        )
        from .coalescent import _split_llr, _wrap

        self.tree_ = _wrap(tree)
        self.log_joint_ = float(log_joint)
        evidence = np.empty(2 * n - 1)
        for f, nodes in zip(fits, part_nodes, strict=True):
            ev = np.asarray(f[4])
            evidence[f[1]] = ev[: len(f[1])]
            evidence[np.asarray(nodes, dtype=np.int64)] = ev[len(f[1]) :]
        evidence[np.asarray(top_nodes, dtype=np.int64)] = top_evidence
        self.split_llr_ = _split_llr(self.tree_, evidence)
        self.Lambda_ = lam.copy() if lam.ndim else float(lam)
        self.noise_ = noise
        # The flat clusters: the parts' rose trees joined by the same top nodes.
        rose_core, top_stats = _core.brt_stitch(
            self.cluster_model_._spec(),
            int(encode(sample[:1]).shape[1]),
            n,
            [(f[5], f[1].tolist(), f[6]) for f in fits],
            top,
            **mixing_args("dp", 0.5, float(self.dp_alpha)),
        )
        self.cluster_tree_ = RoseTree(rose_core)
        nodes = self.cluster_tree_.cut_nodes(float(self.cut_threshold))
        order = np.argsort([self.cluster_tree_.leaves(v)[0] for v in nodes])
        self.cluster_nodes_ = np.asarray(nodes, dtype=np.int64)[order]
        labels = self.cluster_tree_.labels_of(self.cluster_nodes_.tolist())
        brt_fits = [(f[5], f[1], f[6], f[7]) for f in fits]
        brt_parts = [
            (fit, client.submit(_coal_cluster_rows, rows, encode, pure=True)) for fit, rows in parts
        ]
        by_node = _stats_of_nodes(
            client, self.cluster_nodes_, self.cluster_model_, brt_fits, brt_parts, top_stats, n
        )
        self.cluster_stats_ = [by_node[int(v)] for v in self.cluster_nodes_]
        sizes = self.cluster_tree_.sizes[self.cluster_nodes_].astype(np.float64)
        self._log_weights = np.log(sizes / n)
        self.labels_ = da.from_array(np.asarray(labels, dtype=np.int64), chunks=(X.chunks[0],))
        self.n_clusters_ = len(self.cluster_nodes_)
        self.n_parts_ = len(fits)
        self.n_features_in_ = d
        return self

    def _submit_split(self, client: Any, sample: Any, model: Any, node: _Node, size: int) -> Any:
        rows = min(size, node.count)
        max_leaves = max(1, rows * int(self.part_rows) // node.count)
        approx = self._approx(node.seed, rows)
        return client.submit(_coal_split, sample, model, approx, max_leaves, pure=True)

    _route_task = staticmethod(_coal_route)

    def _submit_part(self, client: Any, node: _Node, model: Any, chunks: _Chunks) -> None:
        """Submits the fit of the part ``node``: its rows together, then one task."""
        keys = [p.key for p in node.pieces]
        rows = client.submit(_gather_part, *node.pieces, key=f"rosetree-rows-{tokenize(keys)}")
        fit = client.submit(
            _coal_fit_part,
            rows,
            model,
            self._approx(node.seed, node.count),
            self._flat_args,
            chunks,
            pure=True,
            key=f"rosetree-part-{tokenize(rows.key, node.seed)}",
        )
        node.part = (fit, rows)
        node.pieces = []

    # ------------------------------------------------------------------ the tree
    def cluster_labels(self, llr_threshold: float | None = None) -> np.ndarray:
        """Flat clusters of :attr:`tree_` by the log-likelihood-ratio rule (Teh et al. §5).

        As :meth:`rosetree.KingmanCoalescent.cluster_labels`: read off the tree on the
        client (a NumPy array).
        """
        from .coalescent import KingmanCoalescent as _Local

        self._check_fitted()
        return _Local.cluster_labels(self, llr_threshold)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ prediction
    def _predictor(self) -> tuple[ClusterModel, Any, np.ndarray | None, Any]:
        encode = functools.partial(_coal_checked, spec=self._spec, encode=self._encode)
        return self.cluster_model_, None, None, encode

    def predict_proba(self, X: Any) -> Any:
        r"""Posterior probability of each flat cluster given each row, lazily.

        :math:`P(c \mid x) \propto n_c f(x \mid D_c)` under the flat clusters' model, as
        :meth:`rosetree.KingmanCoalescent.predict_proba`.

        Returns
        -------
        dask.array.Array of shape (n_rows, n_clusters)
        """
        return self._map(X, "proba")

    def score_samples(self, X: Any) -> Any:
        r"""Log predictive probability of each row under the flat clusters, lazily.

        :math:`\ln \sum_c (n_c / n) f(x \mid D_c)` under the flat clusters' model, the
        mixture :meth:`predict_proba` normalises. The single-machine estimator's
        ``score_samples`` is the coalescent's own predictive density, which integrates over
        every branch of the tree and needs every training row's message; this one keeps
        only the clusters' statistics.

        Returns
        -------
        dask.array.Array of shape (n_rows,)
        """
        return self._map(X, "score")


def _coal_checked(rows: np.ndarray, spec: dict[str, Any], encode: Any) -> np.ndarray:
    """New rows checked as the likelihood takes them, then encoded for the flat clusters."""
    if spec["likelihood"] == "multinomial":
        _refuse_non_categories(rows)
    return np.asarray(encode(rows))
