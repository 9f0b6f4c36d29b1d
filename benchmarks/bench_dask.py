"""rosetree.dask on a LocalCluster against the single-machine approximate fit.

Binary rows (d = 64, ``bool``, a byte an entry) from the hierarchical prototype generator
of ``bench_brt.py`` (4 super-prototypes → 12 prototypes, 10 % of the bits flipped),
generated chunk by chunk on the workers (each chunk from its own seed, so nothing is read or
sent from the client).
Compared, on the same rows:

- ``rosetree.dask.BayesianRoseTree(BetaBernoulli(1, 1))`` on a ``LocalCluster`` of
  ``--workers`` worker processes with one thread each;
- ``rosetree.BayesianRoseTree(BetaBernoulli(1, 1), approximate=True)`` in one process
  (``n_jobs=--workers`` threads), the rows generated there by the same chunk seeds.

For each: wall time, peak resident memory per process (``ru_maxrss``: client, scheduler,
each worker; the single-machine process), ``ln p(D | T)`` per row, and the dendrogram
purity of the tree against the prototype labels. Then a cost model from the measured task
times (routing per row and level, subtree fits per row, the client's sample fits per
split): the time for 10⁹ rows on 100 workers, an estimate, with its assumptions printed.

With ``--family coalescent``: real rows (d = 20) around 12 Gaussian centres in 4
super-clusters (super-centres N(0, 6²), centres 2 apart from theirs, unit noise), chunk by
chunk the same way, and ``rosetree.dask.KingmanCoalescent()`` (Greedy-Rate1, Brownian,
``Lambda="auto"``) against ``rosetree.KingmanCoalescent(approximate=True)``: wall time, peak
memory, ``ln p(x, π)`` per row and dendrogram purity (no cost model).

Usage::

    python benchmarks/bench_dask.py                      # 10⁶ rows, a few minutes on 2 cores
    python benchmarks/bench_dask.py --rows 200000        # a quick check
    python benchmarks/bench_dask.py --full               # 10⁷ × 64, the issue's size
    python benchmarks/bench_dask.py --family coalescent --rows 100000
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import resource
import time
from typing import Any

import numpy as np
import rosetree as rt

D = 64
SEED = 0


def hierarchy(d: int = D, seed: int = SEED) -> np.ndarray:
    """The 12 prototypes (3 per super-prototype, 20 % of their bits flipped)."""
    rng = np.random.default_rng(seed)
    supers = rng.random((4, d)) < 0.5
    return supers[np.arange(12) % 4] ^ (rng.random((12, d)) < 0.2)


def block(k: int, rows: int, d: int = D, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ``k``: ``rows`` ``bool`` rows and their prototype labels, from its own seed.

    The rose tree reads ``bool`` rows in place and keeps them so on the workers.
    """
    rng = np.random.default_rng([seed, k])
    y = rng.integers(12, size=rows)
    X = hierarchy(d, seed)[y] ^ (rng.random((rows, d)) < 0.1)
    return X, y


#: Columns of the coalescent's real-valued rows.
D_COAL = 20


def gaussian_block(
    k: int, rows: int, d: int = D_COAL, seed: int = SEED
) -> tuple[np.ndarray, np.ndarray]:
    """Chunk ``k`` of the coalescent's rows: ``rows`` rows and their centre labels."""
    rng = np.random.default_rng(seed)
    supers = rng.normal(scale=6.0, size=(4, d))
    centres = supers[np.arange(12) % 4] + rng.normal(scale=2.0, size=(12, d))
    rng = np.random.default_rng([seed, k])
    y = rng.integers(12, size=rows)
    return centres[y] + rng.normal(size=(rows, d)), y


def local_data(n: int, chunk: int, make: Any = block) -> tuple[np.ndarray, np.ndarray]:
    """All ``n`` rows and labels in memory, chunk by chunk as the workers make them."""
    parts = [make(k, min(chunk, n - k * chunk)) for k in range(math.ceil(n / chunk))]
    return np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def coalescent_single_machine(n: int, chunk: int, threads: int, out: Any) -> None:
    """The single-machine approximate coalescent, in a process of its own."""
    X, y = local_data(n, chunk, gaussian_block)
    before = peak_mib()
    start = time.perf_counter()
    est = rt.KingmanCoalescent(approximate=True, random_state=0, n_jobs=threads).fit(X)
    seconds = time.perf_counter() - start
    out.send(
        dict(
            seconds=seconds,
            peak_mib=peak_mib(),
            data_mib=X.nbytes / 2**20,
            peak_before_fit_mib=before,
            log_joint_per_row=est.log_joint_ / n,
            dendrogram_purity=rt.dendrogram_purity(est.tree_, y),
            n_clusters=est.n_clusters_,
        )
    )


def coalescent_distributed_fit(n: int, chunk: int, workers: int, args: argparse.Namespace) -> dict:
    """``rosetree.dask.KingmanCoalescent`` on a LocalCluster: time, memory, quality."""
    import dask.array as da
    import rosetree.dask as rtd
    from distributed import Client, LocalCluster

    sizes = [min(chunk, n - k * chunk) for k in range(math.ceil(n / chunk))]
    with (
        LocalCluster(
            n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        X = da.map_blocks(
            lambda block_id=None: gaussian_block(block_id[0], sizes[block_id[0]])[0],
            chunks=(tuple(sizes), (D_COAL,)),
            dtype=np.float64,
        )
        y = da.map_blocks(
            lambda block_id=None: gaussian_block(block_id[0], sizes[block_id[0]])[1],
            chunks=(tuple(sizes),),
            dtype=np.int64,
        )
        est = rtd.KingmanCoalescent(
            sample_size=args.sample_size, part_rows=args.part_rows, random_state=0
        )
        start, cpu = time.perf_counter(), time.process_time()
        est.fit(X)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        client_peak = peak_mib()
        worker_peaks = client.run(peak_mib)
        scheduler_peak = client.run_on_scheduler(peak_mib)
        labels = client.compute(y).result()
    return dict(
        seconds=seconds,
        client_peak_mib=client_peak,
        scheduler_peak_mib=scheduler_peak,
        worker_peak_mib=sorted(worker_peaks.values()),
        log_joint_per_row=est.log_joint_ / n,
        dendrogram_purity=rt.dendrogram_purity(est.tree_, labels),
        n_clusters=est.n_clusters_,
        n_parts=est.n_parts_,
        client_and_scheduler_cpu_seconds=cpu,
        estimator_pickle_bytes_per_row=len(__import__("pickle").dumps(est)) / n,
    )


def peak_mib() -> float:
    """Peak resident memory of this process, MiB.

    Linux's ``VmHWM``, the peak of the process's own memory since it started its program:
    ``ru_maxrss`` keeps the peak of the process it was forked from across ``exec`` (a
    spawned child reported its parent's 8.5 GiB). Elsewhere ``ru_maxrss`` (KiB on Linux).
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def local_bool_data(n: int, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`local_data` of :func:`block` as a ``bool`` array, filled chunk by chunk.

    One byte an entry: the rose tree reads ``bool`` rows in place and fits the same tree.
    """
    X = np.empty((n, D), dtype=bool)
    y = np.empty(n, dtype=np.int64)
    for k in range(math.ceil(n / chunk)):
        lo = k * chunk
        rows, labels = block(k, min(chunk, n - lo))
        X[lo : lo + len(rows)] = rows.astype(bool)
        y[lo : lo + len(rows)] = labels
    return X, y


def single_machine(n: int, chunk: int, threads: int, out: Any) -> None:
    """The single-machine approximate fit, in a process of its own (for its peak memory).

    The rows are a ``bool`` array, the input a user with binary data would give it.
    """
    X, y = local_bool_data(n, chunk)
    before = peak_mib()
    start = time.perf_counter()
    est = rt.BayesianRoseTree(
        model=rt.BetaBernoulli(alpha=1.0, beta=1.0), approximate=True, n_jobs=threads
    ).fit(X)
    seconds = time.perf_counter() - start
    out.send(
        dict(
            seconds=seconds,
            peak_mib=peak_mib(),
            data_mib=X.nbytes / 2**20,
            peak_before_fit_mib=before,
            log_evidence_per_row=est.log_evidence_ / n,
            dendrogram_purity=rt.dendrogram_purity(est.tree_, y),
        )
    )


def distributed_fit(n: int, chunk: int, workers: int, args: argparse.Namespace) -> dict:
    """The fit on a LocalCluster: times, peak memory per process, evidence, purity, tasks."""
    import dask.array as da
    import rosetree.dask as rtd
    from distributed import Client, LocalCluster, get_task_stream

    # The client's own sample fits (the top of each split), timed in this process only.
    client_fits: list[float] = []
    fit_brt = rtd._core.fit_brt

    def timed_fit(*a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        try:
            return fit_brt(*a, **k)
        finally:
            client_fits.append(time.perf_counter() - start)

    stitch_seconds: list[float] = []
    brt_stitch = rtd._core.brt_stitch

    def timed_stitch(*a: Any, **k: Any) -> Any:
        start = time.perf_counter()
        try:
            return brt_stitch(*a, **k)
        finally:
            stitch_seconds.append(time.perf_counter() - start)

    rtd._core.fit_brt = timed_fit
    rtd._core.brt_stitch = timed_stitch
    sizes = [min(chunk, n - k * chunk) for k in range(math.ceil(n / chunk))]
    with (
        LocalCluster(
            n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        X = da.map_blocks(
            lambda block_id=None: block(block_id[0], sizes[block_id[0]])[0],
            chunks=(tuple(sizes), (D,)),
            dtype=np.bool_,
        )
        y = da.map_blocks(
            lambda block_id=None: block(block_id[0], sizes[block_id[0]])[1],
            chunks=(tuple(sizes),),
            dtype=np.int64,
        )
        est = rtd.BayesianRoseTree(
            model=rt.BetaBernoulli(alpha=1.0, beta=1.0),
            sample_size=args.sample_size,
            part_rows=args.part_rows,
            random_state=0,
        )
        start, cpu = time.perf_counter(), time.process_time()
        with get_task_stream(client) as stream:
            est.fit(X)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        client_peak = peak_mib()
        worker_peaks = client.run(peak_mib)
        scheduler_peak = client.run_on_scheduler(peak_mib)
        labels = client.compute(y).result()
        tasks: dict[str, list[float]] = {}
        for t in stream.data:
            key = str(t["key"])
            name = {"rosetree-part": "_fit_part", "rosetree-rows": "_gather_part"}.get(
                key[:13], key.split("-")[0]
            )
            compute = [s for s in t["startstops"] if s["action"] == "compute"]
            tasks.setdefault(name, []).extend(s["stop"] - s["start"] for s in compute)
    rtd._core.fit_brt, rtd._core.brt_stitch = fit_brt, brt_stitch
    tree_bytes = len(__import__("pickle").dumps(est.tree_))
    return dict(
        seconds=seconds,
        client_peak_mib=client_peak,
        scheduler_peak_mib=scheduler_peak,
        worker_peak_mib=sorted(worker_peaks.values()),
        log_evidence_per_row=est.log_evidence_ / n,
        dendrogram_purity=rt.dendrogram_purity(est.tree_, labels),
        n_parts=est.n_parts_,
        client_top_fit_seconds=sum(client_fits),
        client_stitch_seconds=sum(stitch_seconds),
        client_and_scheduler_cpu_seconds=cpu,
        tree_pickle_bytes_per_row=tree_bytes / n,
        task_seconds={k: (len(v), sum(v)) for k, v in sorted(tasks.items())},
    )


def cost_model(n: int, result: dict, n_big: int = 10**9, workers_big: int = 100) -> dict:
    """Time for ``n_big`` rows on ``workers_big`` workers from the measured task times.

    Assumptions: the work of the workers scales with the rows, the routing (sampling,
    splitting, routing, moving rows) once per level and the subtree fits once; the number
    of levels grows as log_G(parts) with G the measured parts per split; the work divides
    evenly over the workers (no waiting between levels); the client's top fit is the same
    at any n (its sample is bounded), while its stitching and the tree it holds grow with
    n as measured here.
    """
    tasks = result["task_seconds"]

    def total(*names: str) -> float:
        return sum(tasks.get(k, (0, 0.0))[1] for k in names)

    splits = 1 + tasks.get("_split", (0, 0.0))[0]
    parts = result["n_parts"]
    growth = max((parts - 1) / splits + 1, 2.0)
    levels_here = max(math.log(max(parts, 2)) / math.log(growth), 1.0)
    levels_big = max(math.log(parts * n_big / n) / math.log(growth), 1.0)
    per_row = {
        "generate and check": total("_piece") / n,
        "sample, split and route, per level": total(
            "_sample_piece", "_merge_samples", "_split", "_route", "_split_blocks", "_take"
        )
        / n
        / levels_here,
        "gather and fit the parts": total("_fit_part", "_gather_part") / n,
    }
    worker_seconds = n_big * (
        per_row["generate and check"]
        + per_row["sample, split and route, per level"] * levels_big
        + per_row["gather and fit the parts"]
    )
    return dict(
        per_row_seconds=per_row,
        parts_per_split=growth,
        levels_here=levels_here,
        levels_at_1e9=levels_big,
        worker_hours_at_1e9=worker_seconds / 3600,
        wall_hours_on_100_workers=worker_seconds / workers_big / 3600,
        client_stitch_hours_at_1e9=result["client_stitch_seconds"] * n_big / n / 3600,
        client_tree_gib_at_1e9=result["tree_pickle_bytes_per_row"] * n_big / 2**30,
    )


def main() -> None:
    """Runs both fits and the cost model; prints (and with ``--json`` writes) the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--full", action="store_true", help="10⁷ rows (the issue's size)")
    parser.add_argument("--chunk-rows", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sample-size", type=int, default=20_000)
    parser.add_argument("--part-rows", type=int, default=20_000)
    parser.add_argument("--skip-single", action="store_true")
    parser.add_argument(
        "--skip-dask", action="store_true", help="only the single-machine fit (rose tree)"
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--family", choices=("rose-tree", "coalescent"), default="rose-tree")
    args = parser.parse_args()
    n = 10_000_000 if args.full else args.rows
    if args.family == "coalescent":
        coalescent_main(n, args)
        return
    print(f"n = {n:,} rows × {D} binary columns, chunks of {args.chunk_rows:,}")
    results: dict[str, Any] = dict(rows=n, features=D, chunk_rows=args.chunk_rows)
    if not args.skip_dask:
        results["dask"] = distributed_fit(n, args.chunk_rows, args.workers, args)
        print(json.dumps(results["dask"], indent=1))
    if not args.skip_single:
        ctx = mp.get_context("spawn")
        recv, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=single_machine, args=(n, args.chunk_rows, args.workers, send))
        child.start()
        results["single_machine"] = recv.recv()
        child.join()
        print(json.dumps(results["single_machine"], indent=1))
    if not args.skip_dask:
        results["cost_model"] = cost_model(n, results["dask"])
        print(json.dumps(results["cost_model"], indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def coalescent_main(n: int, args: argparse.Namespace) -> None:
    """The coalescent's comparison; prints (and with ``--json`` writes) the results."""
    print(f"n = {n:,} rows × {D_COAL} real columns, chunks of {args.chunk_rows:,}")
    results: dict[str, Any] = dict(rows=n, features=D_COAL, chunk_rows=args.chunk_rows)
    results["dask"] = coalescent_distributed_fit(n, args.chunk_rows, args.workers, args)
    print(json.dumps(results["dask"], indent=1))
    if not args.skip_single:
        ctx = mp.get_context("spawn")
        recv, send = ctx.Pipe(duplex=False)
        child = ctx.Process(
            target=coalescent_single_machine, args=(n, args.chunk_rows, args.workers, send)
        )
        child.start()
        results["single_machine"] = recv.recv()
        child.join()
        print(json.dumps(results["single_machine"], indent=1))
        ratio = results["dask"]["seconds"] / results["single_machine"]["seconds"]
        results["time_ratio_dask_over_single"] = ratio
        print(f"time ratio (dask / single machine): {ratio:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
