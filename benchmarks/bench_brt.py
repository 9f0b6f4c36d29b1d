#!/usr/bin/env python3
"""Benchmark rosetree's greedy Bayesian rose tree / BHC fits against SciPy's average linkage.

What is measured
----------------
For every data set the script times

* ``rt.BayesianRoseTree(mixing="brt").fit(X)`` (greedy BRT, Blundell et al. 2010),
* for binary data also ``rt.BayesianRoseTree(mixing="gamma", binary=True).fit(X)`` (BHC-γ),
* ``scipy.cluster.hierarchy.linkage(scipy.spatial.distance.pdist(X, metric), "average")``,
  the usual non-probabilistic baseline, with metric ``"hamming"`` for binary data and
  ``"euclidean"`` for Gaussian data (both get the same float64 array).

Data sets (all seeded with ``numpy.random.default_rng``, so every run sees the same data):

* ``binary``: d = 64 bits from a known three-level hierarchy: 4 super-prototypes
  (random bits), 12 prototypes (a super-prototype with 20% of its bits flipped), and each
  row a random prototype with 10% of its bits flipped. Model: ``BetaBernoulli(1, 1)``.
* ``gauss``: d = 10, a mixture of 10 well-separated spherical Gaussians (means ~ N(0, 8²),
  unit variance). Model: ``NormalInverseWishart()`` (data-driven defaults). BRT only.
* ``newsgroups``: 3970 × 485 word presence/absence from four 20-Newsgroups groups
  (``../shared/data/newsgroups/newsgroups4_485.npz`` beside the checkout, array ``X``);
  sizes below 3970 are seeded random subsets of its rows. Model: ``BetaBernoulli(1, 1)``.
  This data is ~6% dense, so it is also fitted as a ``scipy.sparse.csr_matrix`` passed to
  ``fit`` unchanged, and the sparse/dense ratios of time and memory are reported.

How
---
Every timed job (one method on one data set) runs in its own freshly *spawned* child
process, which imports only what the job needs, builds the data, and then:

1. runs ``gc.collect()`` and notes its resident set size (RSS) as the baseline; on Linux it
   first resets the kernel's RSS high-water mark (``/proc/self/clear_refs``), so the
   baseline is exactly "interpreter + imports + data";
2. runs the fit ``--repeat`` times, timing only the call with ``time.perf_counter()``, and
   keeps the best time;
3. reads ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` and sends the best time, the peak
   RSS and the baseline back to the parent through a pipe.

"peak MiB" in the tables is the child's peak RSS minus that baseline: the extra memory
the fit (or pdist + linkage) needed. Where the high-water mark cannot be reset, the
baseline is the high-water mark before the fit (the ``ru_maxrss`` difference), which can
under-count a fit whose peak stays below the data-generation peak; the header says which.

The growth exponent is the least-squares slope of log(time) against log(n) over a data
family's sizes (2 ≈ quadratic, 3 ≈ cubic).

Reading the numbers
-------------------
Absolute seconds depend on the machine, its load and the core count (rosetree scores pairs
on ``--n-jobs`` threads, every core by default; SciPy's linkage is single-threaded). Compare
the **ratios** (rosetree/SciPy, sparse/dense) and the growth exponents between runs and
builds, not the seconds. The log evidence column is a check that a faster build still finds
the same tree.

Usage::

    python3 benchmarks/bench_brt.py                 # full sizes
    python3 benchmarks/bench_brt.py --quick         # n in {500, 1000}: a smoke test
    python3 benchmarks/bench_brt.py --sizes 1000 2000 --repeat 5 --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import multiprocessing as mp
import os
import platform
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20240601
# The offline data sets live in ``shared/data`` beside the checkout (``../shared/data``);
# ``ROSETREE_DATA`` points elsewhere.
DATA_DIR = Path(
    os.environ.get("ROSETREE_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
NEWSGROUPS = DATA_DIR / "newsgroups" / "newsgroups4_485.npz"
MILLION = 1_000_000

BINARY_SIZES = (1000, 2000, 4000, 8000)
GAUSS_SIZES = (1000, 2000, 4000)
QUICK_SIZES = (500, 1000)

METRIC = {"binary": "hamming", "newsgroups": "hamming", "gauss": "euclidean"}
# (label, BayesianRoseTree keyword arguments besides the model)
METHODS = {
    "BRT": {"mixing": "brt", "gamma": 0.5, "binary": False},
    "BHC": {"mixing": "gamma", "gamma": 0.5, "binary": True},
}


# --------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------


def make_binary(n: int, seed: int = SEED, d: int = 64) -> np.ndarray:
    """Rows from a known hierarchy: super-prototypes → prototypes → rows (10% bit flips)."""
    rng = np.random.default_rng(seed)
    n_super, n_proto = 4, 12
    supers = rng.random((n_super, d)) < 0.5
    protos = supers[np.arange(n_proto) % n_super] ^ (rng.random((n_proto, d)) < 0.2)
    rows = protos[rng.integers(n_proto, size=n)] ^ (rng.random((n, d)) < 0.1)
    return rows.astype(np.float64)


def make_gauss(n: int, seed: int = SEED, d: int = 10, k: int = 10) -> np.ndarray:
    """A mixture of ``k`` well-separated unit-variance Gaussians in ``d`` dimensions."""
    rng = np.random.default_rng(seed)
    means = rng.normal(scale=8.0, size=(k, d))
    return means[rng.integers(k, size=n)] + rng.normal(size=(n, d))


def newsgroups_rows() -> int | None:
    """Number of rows of the newsgroups matrix, or None when the file is missing."""
    if not NEWSGROUPS.is_file():
        return None
    with np.load(NEWSGROUPS) as f:
        return int(f["X"].shape[0])


def load_newsgroups(n: int, seed: int = SEED) -> np.ndarray:
    """The newsgroups word-presence matrix, or a seeded random subset of ``n`` of its rows."""
    with np.load(NEWSGROUPS) as f:
        X = f["X"].astype(np.float64)
    if n < X.shape[0]:
        idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], size=n, replace=False))
        X = X[idx]
    return np.ascontiguousarray(X)


def make_data(family: str, n: int) -> np.ndarray:
    """The dense float64 data of one benchmark case."""
    if family == "binary":
        return make_binary(n)
    if family == "gauss":
        return make_gauss(n)
    if family == "newsgroups":
        return load_newsgroups(n)
    raise ValueError(f"unknown data family {family!r}")


# --------------------------------------------------------------------------------------
# Child process: one timed job
# --------------------------------------------------------------------------------------


def _maxrss_kib() -> float:
    """Peak RSS of this process in KiB (``ru_maxrss`` is bytes on macOS, KiB elsewhere)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 if sys.platform == "darwin" else float(rss)


def _reset_peak_rss() -> bool:
    """Reset the kernel's RSS high-water mark of this process (Linux ≥ 4.0); True if done."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return True


def _build_estimator(job: dict[str, Any]) -> Any:
    import rosetree as rt

    model = rt.NormalInverseWishart() if job["family"] == "gauss" else rt.BetaBernoulli(1.0, 1.0)
    params = dict(METHODS[job["method"]], n_jobs=job["n_jobs"])
    if job.get("approximate"):
        params["approximate"] = True
    return rt.BayesianRoseTree(model=model, **params)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Build the data, run the job ``repeat`` times, return best time and memory figures."""
    X = make_data(job["family"], job["n"]) if job["family"] != "million" else make_binary(MILLION)
    if job.get("sparse"):
        import scipy.sparse

        X = scipy.sparse.csr_matrix(X)
    if job["tool"] == "scipy":
        from scipy.cluster.hierarchy import linkage
        from scipy.spatial.distance import pdist

        def fit() -> Any:
            return linkage(pdist(X, metric=job["metric"]), method="average")
    else:
        import rosetree  # noqa: F401  (import before the baseline is taken)

        def fit() -> Any:
            return _build_estimator(job).fit(X)

    gc.collect()
    reset = _reset_peak_rss()
    base = _maxrss_kib()
    times, result = [], None
    for _ in range(job["repeat"]):
        result = None
        gc.collect()
        t0 = time.perf_counter()
        result = fit()
        times.append(time.perf_counter() - t0)
    peak = _maxrss_kib()
    out: dict[str, Any] = {
        "times_s": times,
        "best_s": min(times),
        "peak_mib": (peak - base) / 1024,
        "child_peak_mib": peak / 1024,
        "baseline_mib": base / 1024,
        "hwm_reset": reset,
    }
    if job["tool"] == "rosetree":
        tree = result.tree_
        out.update(
            log_evidence=float(result.log_evidence_),
            n_nodes=int(tree.n_nodes),
            n_leaves=int(tree.n_leaves),
            log10_partitions=float(tree.n_partitions(log10=True)),
        )
    return out


def _child_main(job: dict[str, Any], conn: Any) -> None:
    try:
        conn.send(("ok", run_job(job)))
    except BaseException as exc:  # report anything, including MemoryError, to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


def run_in_child(job: dict[str, Any], timeout: float | None) -> dict[str, Any]:
    """Run ``job`` in a fresh spawned process; the result, or ``{"error": ...}``."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(job, child), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(timeout):
            proc.terminate()
            return {"error": f"timed out after {timeout:g} s"}
        status, payload = parent.recv()
    except EOFError:
        proc.join()
        return {"error": f"child died (exit code {proc.exitcode})"}
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join()
    return payload if status == "ok" else {"error": payload}


# --------------------------------------------------------------------------------------
# Reporting helpers
# --------------------------------------------------------------------------------------


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo, else platform.processor()."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith(("model name", "hardware", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """Machine, software versions, command line and load average at the start."""
    import rosetree as rt
    import scipy

    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "rosetree": rt.__version__,
        "rosetree_path": str(Path(rt.__file__).parent),
        "argv": sys.argv,
        "load_average_1_5_15": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def header(args: argparse.Namespace) -> dict[str, Any]:
    """Machine and software description, printed and stored in the JSON."""
    return {
        **machine(),
        "n_jobs": args.n_jobs,
        "seed": SEED,
        "peak_rss_method": "clear_refs reset" if _reset_peak_rss() else "ru_maxrss difference",
    }


def growth_exponent(ns: list[int], ts: list[float]) -> float | None:
    """Least-squares slope of log t against log n (None with fewer than two sizes)."""
    pts = [(n, t) for n, t in zip(ns, ts, strict=True) if t is not None and t > 0]
    if len({n for n, _ in pts}) < 2:
        return None
    x = np.log([n for n, _ in pts])
    y = np.log([t for _, t in pts])
    return float(np.polyfit(x, y, 1)[0])


def _fmt(value: Any, spec: str, width: int) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—".rjust(width)
    return format(value, spec).rjust(width)


def repeats_for(n: int, args: argparse.Namespace) -> int:
    """``--repeat`` if given, else 3 below n = 4000 and 1 from there."""
    return args.repeat if args.repeat is not None else (3 if n < 4000 else 1)


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def plan_cases(args: argparse.Namespace) -> list[tuple[str, int]]:
    """The (family, n) pairs to run, in order."""
    if args.sizes:
        bin_sizes = gauss_sizes = tuple(args.sizes)
    elif args.quick:
        bin_sizes = gauss_sizes = QUICK_SIZES
    else:
        bin_sizes, gauss_sizes = BINARY_SIZES, GAUSS_SIZES
    cases = [("binary", n) for n in bin_sizes] + [("gauss", n) for n in gauss_sizes]
    n_news = newsgroups_rows()
    if n_news is None:
        print(f"note: {NEWSGROUPS} not found; skipping the newsgroups case\n")
    else:
        cases += [("newsgroups", n) for n in sorted({min(n, n_news) for n in bin_sizes})]
    return cases


def run_case(family: str, n: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Run SciPy and every rosetree method (and sparse variant) on one data set."""
    d = {"binary": 64, "gauss": 10, "newsgroups": 485}[family]
    repeat = repeats_for(n, args)
    common = {"family": family, "n": n, "repeat": repeat, "n_jobs": args.n_jobs}
    scipy_res = run_in_child(
        dict(common, tool="scipy", metric=METRIC[family], method=None), args.timeout
    )
    methods = ["BRT"] if family == "gauss" else ["BRT", "BHC"]
    variants = [False, True] if family == "newsgroups" else [False]
    rows = []
    for method in methods:
        for sparse in variants:
            res = run_in_child(
                dict(common, tool="rosetree", method=method, sparse=sparse), args.timeout
            )
            row = {
                "case": f"{family} {method}" + (" sparse" if sparse else ""),
                "family": family,
                "method": method,
                "sparse": sparse,
                "n": n,
                "d": d,
                "repeat": repeat,
                "metric": METRIC[family],
                "rosetree": res,
                "scipy": scipy_res,
            }
            rt_s, sp_s = res.get("best_s"), scipy_res.get("best_s")
            row["ratio"] = rt_s / sp_s if rt_s and sp_s else None
            print_row(row)
            rows.append(row)
    return rows


TABLE_HEAD = (
    f"{'case':<24}{'n':>6}{'d':>5}{'rosetree s':>12}{'scipy s':>10}{'ratio':>9}"
    f"{'rt MiB':>9}{'scipy MiB':>10}{'log evidence':>16}"
)


def print_row(row: dict[str, Any]) -> None:
    """One line of the main table (flushed, so progress shows while the run goes on)."""
    r, s = row["rosetree"], row["scipy"]
    line = (
        f"{row['case']:<24}{row['n']:>6}{row['d']:>5}"
        f"{_fmt(r.get('best_s'), '.3f', 12)}{_fmt(s.get('best_s'), '.3f', 10)}"
        f"{_fmt(row['ratio'], '.1f', 8)}{'x' if row['ratio'] else ' '}"
        f"{_fmt(r.get('peak_mib'), '.1f', 9)}{_fmt(s.get('peak_mib'), '.1f', 10)}"
        f"{_fmt(r.get('log_evidence'), '.2f', 16)}"
    )
    for tool, res in (("rosetree", r), ("scipy", s)):
        if "error" in res:
            line += f"  [{tool}: {res['error']}]"
    print(line, flush=True)


def sparse_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pair each sparse fit with its dense twin: time and memory ratios, evidence check."""
    dense = {(r["family"], r["method"], r["n"]): r for r in rows if not r["sparse"]}
    out = []
    for r in rows:
        twin = dense.get((r["family"], r["method"], r["n"])) if r["sparse"] else None
        if twin is None:
            continue
        sp, de = r["rosetree"], twin["rosetree"]
        entry = {"case": f"{r['family']} {r['method']}", "n": r["n"]}
        if "error" not in sp and "error" not in de:
            entry.update(
                dense_s=de["best_s"],
                sparse_s=sp["best_s"],
                time_ratio=sp["best_s"] / de["best_s"],
                dense_mib=de["peak_mib"],
                sparse_mib=sp["peak_mib"],
                mem_ratio=sp["peak_mib"] / de["peak_mib"] if de["peak_mib"] > 0 else None,
                log_evidence_diff=abs(sp["log_evidence"] - de["log_evidence"]),
            )
        out.append(entry)
    return out


def exponents(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Growth exponents of time in n per family for BRT, BHC and SciPy (dense fits)."""
    out = []
    for family in dict.fromkeys(r["family"] for r in rows):
        fam = [r for r in rows if r["family"] == family and not r["sparse"]]
        series: dict[str, dict[int, float | None]] = {}
        for r in fam:
            series.setdefault(r["method"], {})[r["n"]] = r["rosetree"].get("best_s")
        series["SciPy"] = {r["n"]: r["scipy"].get("best_s") for r in fam}
        for name, by_n in series.items():
            ns = sorted(by_n)
            out.append(
                {
                    "family": family,
                    "method": name,
                    "sizes": ns,
                    "exponent": growth_exponent(ns, [by_n[n] for n in ns]),
                }
            )
    return out


#: Size at which --million compares the approximate search with the exact one.
APPROX_CHECK_N = 8000


def million(args: argparse.Namespace) -> dict[str, Any]:
    """The reserved ``--million`` case: BRT on 10^6 binary rows with ``approximate=True``."""
    import rosetree as rt

    if "approximate" not in rt.BayesianRoseTree().get_params():
        msg = (
            "--million: rt.BayesianRoseTree has no 'approximate' parameter in this build; "
            "the approximate mode is not available, skipping"
        )
        print(msg)
        return {"skipped": msg}
    print(f"--million: BRT, approximate=True, binary d = 64, n = {MILLION} (no SciPy baseline)")
    job = {
        "family": "million",
        "tool": "rosetree",
        "method": "BRT",
        "n": MILLION,
        "repeat": 1,
        "n_jobs": args.n_jobs,
        "approximate": True,
    }
    res = run_in_child(job, args.timeout)
    if "error" in res:
        print(f"  error: {res['error']}")
    else:
        print(
            f"  {res['best_s']:.1f} s, peak {res['peak_mib']:.0f} MiB, "
            f"log evidence {res['log_evidence']:.2f}"
        )
    # How close the approximation is where the exact search is still affordable.
    quality = {}
    for approximate in (False, True):
        small = dict(job, family="binary", n=APPROX_CHECK_N, approximate=approximate)
        quality[approximate] = run_in_child(small, args.timeout)
    exact, approx = quality[False], quality[True]
    if "error" not in exact and "error" not in approx:
        rel = (approx["log_evidence"] - exact["log_evidence"]) / abs(exact["log_evidence"])
        print(
            f"  n = {APPROX_CHECK_N}: exact {exact['best_s']:.2f} s, log evidence "
            f"{exact['log_evidence']:.2f}; approximate {approx['best_s']:.2f} s, log evidence "
            f"{approx['log_evidence']:.2f} ({100 * rel:+.2f}%)"
        )
        res["check"] = {"n": APPROX_CHECK_N, "exact": exact, "approximate": approx, "relative": rel}
    return {"n": MILLION, "d": 64, "rosetree": res}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="n in {500, 1000} only (smoke test)")
    p.add_argument("--sizes", type=int, nargs="+", help="sizes n for every family")
    p.add_argument("--repeat", type=int, help="best of this many runs (default 3, 1 for n>=4000)")
    p.add_argument("--n-jobs", type=int, default=None, help="rosetree threads (default: all)")
    p.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds per job, child start-up included"
    )
    p.add_argument("--json", metavar="PATH", help="also write all results as JSON")
    p.add_argument("--million", action="store_true", help="also run the approximate 10^6 case")
    args = p.parse_args(argv)
    if args.repeat is not None and args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.sizes and min(args.sizes) < 2:
        p.error("--sizes must be at least 2")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (1 if any job failed)."""
    args = parse_args(argv)
    start = time.perf_counter()
    info = header(args)
    print("rosetree benchmark: greedy BRT / BHC vs SciPy average linkage")
    for key in ("platform", "cpu_model", "cpu_count", "python", "numpy", "scipy", "rosetree"):
        print(f"  {key:<16}{info[key]}")
    print(f"  {'rosetree path':<16}{info['rosetree_path']}")
    if info["load_average_1_5_15"] is not None:
        load = ", ".join(f"{x:.2f}" for x in info["load_average_1_5_15"])
        print(f"  {'load average':<16}{load}  (1/5/15 min, at start; a busy machine skews times)")
    print(f"  {'command':<16}{' '.join([sys.executable, *sys.argv])}")
    print(f"  {'n_jobs':<16}{args.n_jobs if args.n_jobs is not None else 'all cores'}")
    print(f"  {'peak RSS':<16}{info['peak_rss_method']}")
    print(
        "  SciPy baseline: pdist + linkage(method='average'); metric hamming for binary "
        "and newsgroups, euclidean for gauss"
    )
    print(
        "  time: best of repeats, fit only; MiB: child peak RSS above its pre-fit baseline; "
        "ratio = rosetree / scipy\n"
    )

    cases = plan_cases(args)
    print(TABLE_HEAD)
    print("-" * len(TABLE_HEAD))
    rows: list[dict[str, Any]] = []
    for family, n in cases:
        rows += run_case(family, n, args)

    sparse = sparse_summary(rows)
    if sparse:
        print("\nsparse input (scipy.sparse.csr_matrix passed to fit) vs the same data dense")
        print(
            f"{'case':<18}{'n':>6}{'dense s':>10}{'sparse s':>10}{'s/d time':>10}"
            f"{'dense MiB':>11}{'sparse MiB':>12}{'s/d mem':>9}{'|Δ log ev|':>12}"
        )
        for e in sparse:
            print(
                f"{e['case']:<18}{e['n']:>6}{_fmt(e.get('dense_s'), '.3f', 10)}"
                f"{_fmt(e.get('sparse_s'), '.3f', 10)}{_fmt(e.get('time_ratio'), '.2f', 10)}"
                f"{_fmt(e.get('dense_mib'), '.1f', 11)}{_fmt(e.get('sparse_mib'), '.1f', 12)}"
                f"{_fmt(e.get('mem_ratio'), '.2f', 9)}{_fmt(e.get('log_evidence_diff'), '.2g', 12)}"
            )

    growth = exponents(rows)
    print("\ngrowth exponent of time in n (slope of log t on log n)")
    for g in growth:
        sizes = ",".join(str(n) for n in g["sizes"])
        print(f"  {g['family']:<12}{g['method']:<7}{_fmt(g['exponent'], '.2f', 6)}   n = {sizes}")

    million_res = None
    if args.million:
        print()
        million_res = million(args)

    elapsed = time.perf_counter() - start
    print(f"\ntotal wall time {elapsed:.1f} s")
    failed = sum("error" in r["rosetree"] or "error" in r["scipy"] for r in rows)
    if failed:
        print(f"{failed} row(s) had a failed job; see the messages above")

    if args.json:
        payload = {
            "header": info,
            "rows": rows,
            "sparse_vs_dense": sparse,
            "growth_exponents": growth,
            "million": million_res,
            "total_wall_s": elapsed,
        }
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n")
        print(f"results written to {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
