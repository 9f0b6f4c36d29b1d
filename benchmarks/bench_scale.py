#!/usr/bin/env python3
r"""Large data on one machine: the approximate rose-tree search, the exact one, and SciPy.

The approximate search against the exact one and both against SciPy's and fastcluster's
average linkage.

What is measured, each job in a fresh child process (time of the fit only; peak resident
memory of the child above its baseline):

1. **Growth**: ``BayesianRoseTree(BetaBernoulli(1, 1), approximate=True)`` on binary rows
   (d = 64) from six generators, at each ``--sizes`` (default 10⁵ and 10⁶): the
   hierarchical generator of ``bench_brt.py`` (4 super-prototypes, 12 prototypes, 10 % bit
   flips), 16 and 1,000 flat prototypes, one cluster (independent bits, P(1) = 0.3), heavy
   duplicates (50 distinct rows) and skewed cluster sizes (20 prototypes, weights halving).
   The growth exponent between the two largest sizes is ln(t₂/t₁) / ln(n₂/n₁).
2. **Fidelity at n = 8,000**: the approximate tree's log evidence against the exact greedy
   tree's, per generator, and the exact search's time against SciPy's
   ``linkage(pdist(X, "hamming"), "average")`` and fastcluster's ``linkage(X, "average",
   metric="hamming")`` (one thread each) in the same run: BRT and BHC, ``n_jobs=1``.
3. **Gaussian models**: ``NormalGamma()`` and ``NormalInverseWishart()`` with
   ``approximate=True`` on a mixture of 10 Gaussians in 10 dimensions, n = 8,000 (against
   the exact search) and 10⁵.
4. **Threads**: the approximate search at the largest size and the exact search at
   n = 8,000, for each ``--threads`` count (default: 1, 2, 4, 8, 16, those the machine has),
   with the speed-up and parallel efficiency (speed-up / threads) against one thread.
5. With ``--exact N``: the exact search on N hierarchical rows (10⁵ takes minutes), all
   threads, its time and peak memory.
6. **Coalescent** (``--coalescent`` runs this part alone): ``KingmanCoalescent(
   approximate=True)`` (Greedy-Rate1 on parts) on a mixture of 16 Gaussians in 20
   dimensions (Brownian) and on binary rows (d = 16) from 16 prototypes with 10 % bit
   flips (multinomial, with ``exact_below=1000, approx_sample=500``), at each
   ``--coalescent-sizes`` (default 2·10⁴ and 10⁵), with the growth exponent; and its
   ``log_joint_`` against the exact Greedy-Rate1 tree's at
   n = 8,000.
7. With ``--huge [N]``: ``approximate=True`` on N (default 10⁷) hierarchical rows given as a
   ``bool`` array (generated in blocks, so the child never holds them as float64), its time
   and peak memory, the input's own size apart.

``--speed`` runs part 2's exact searches (BRT and BHC at n = 8,000, d = 64, one thread)
on the generators named by ``--data`` (default: the hierarchical one; ``all``: the six),
and the exact Greedy-Rate1 coalescent (Brownian, d = 20, the mixture of part 6) at each
``--speed-coalescent-sizes`` (default 4,000 and 8,000), against SciPy's and fastcluster's
average linkage on the same rows (Hamming distance for the binary rows, Euclidean for the
coalescent's), ``--repeat`` times, each tool once per round, every job in a fresh child
process on one thread. Both the wall-clock time and the CPU time (``process_time``) of each
fit are recorded; the ratios use the best of the rounds.

Usage::

    python benchmarks/bench_scale.py --json benchmarks/scale_results.json
    python benchmarks/bench_scale.py --quick          # n = 2·10⁴ and 10⁵, a smoke test
    python benchmarks/bench_scale.py --coalescent     # part 6 only
    python benchmarks/bench_scale.py --speed --repeat 3
    python benchmarks/bench_scale.py --speed --data all --speed-coalescent-sizes 4000 8000
    python benchmarks/bench_scale.py --huge 2000000   # only part 7
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_brt import SEED, machine, make_binary, make_gauss


def flat(n: int, k: int, seed: int = 0, d: int = 64) -> np.ndarray:
    """Rows from ``k`` random prototypes with 10 % of the bits flipped."""
    rng = np.random.default_rng(seed)
    protos = rng.random((k, d)) < 0.5
    return (protos[rng.integers(k, size=n)] ^ (rng.random((n, d)) < 0.1)).astype(np.float64)


def single(n: int, seed: int = 0, d: int = 64) -> np.ndarray:
    """One cluster: independent bits, each 1 with probability 0.3."""
    return (np.random.default_rng(seed).random((n, d)) < 0.3).astype(np.float64)


def duplicates(n: int, seed: int = 0, d: int = 64) -> np.ndarray:
    """Heavy duplicates: every row is one of 50 distinct random rows."""
    rng = np.random.default_rng(seed)
    distinct = (rng.random((50, d)) < 0.5).astype(np.float64)
    return distinct[rng.integers(50, size=n)]


def skewed(n: int, seed: int = 0, d: int = 64, k: int = 20) -> np.ndarray:
    """20 prototypes whose cluster sizes halve from one to the next, 10 % bit flips."""
    rng = np.random.default_rng(seed)
    protos = rng.random((k, d)) < 0.5
    w = 0.5 ** np.arange(k)
    rows = protos[rng.choice(k, size=n, p=w / w.sum())] ^ (rng.random((n, d)) < 0.1)
    return rows.astype(np.float64)


GENERATORS = {
    "hierarchical": make_binary,
    "flat, 16 prototypes": lambda n: flat(n, 16),
    "flat, 1000 prototypes": lambda n: flat(n, 1000),
    "one cluster": single,
    "duplicates": duplicates,
    "skewed sizes": skewed,
}


def gauss20(n: int, seed: int = 0, d: int = 20, k: int = 16) -> np.ndarray:
    """A mixture of ``k`` Gaussians in ``d`` dimensions, unit noise, centres N(0, 4²)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(k, d))
    return centres[rng.integers(k, size=n)] + rng.normal(size=(n, d))


def huge_binary(n: int, d: int = 64, block: int = 250_000) -> np.ndarray:
    """``make_binary``'s hierarchy (same prototypes) as a bool array, ``block`` rows at a time."""
    rng = np.random.default_rng(SEED)
    supers = rng.random((4, d)) < 0.5
    protos = supers[np.arange(12) % 4] ^ (rng.random((12, d)) < 0.2)
    out = np.empty((n, d), dtype=bool)
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        r = np.random.default_rng([SEED, lo])
        out[lo:hi] = protos[r.integers(12, size=hi - lo)] ^ (r.random((hi - lo, d)) < 0.1)
    return out


def _data(job: dict[str, Any]) -> np.ndarray:
    if job["data"] == "gauss20":
        return gauss20(job["n"])
    if job["data"] == "binary16":
        return flat(job["n"], 16, d=16)
    if job["data"] == "gauss":
        return make_gauss(job["n"])
    if job.get("dtype") == "bool":
        return huge_binary(job["n"])
    return GENERATORS[job["data"]](job["n"])


def _child(job: dict[str, Any], out: Any) -> None:
    """Runs one job; sends (seconds, peak MiB above the baseline, result) back."""
    if job.get("threads"):
        os.environ["RAYON_NUM_THREADS"] = str(job["threads"])
    X = _data(job)
    job_input_mib = X.nbytes / 2**20
    tool = job["tool"]
    metric = job.get("metric", "hamming")
    if tool == "scipy":
        from scipy.cluster.hierarchy import linkage
        from scipy.spatial.distance import pdist

        def fit() -> Any:
            return linkage(pdist(X, metric), "average")
    elif tool == "fastcluster":
        import fastcluster

        def fit() -> Any:
            return fastcluster.linkage(X, "average", metric=metric)
    elif tool == "coalescent":
        import rosetree as rt

        coal = rt.KingmanCoalescent(
            likelihood=job["likelihood"],
            approximate=job.get("approximate", False),
            exact_below=job.get("exact_below", 4000),
            approx_sample=job.get("approx_sample", 1000),
            n_jobs=job.get("n_jobs"),
        )

        def fit() -> Any:
            return coal.fit(X).log_joint_
    else:
        import rosetree as rt

        model = {
            "bernoulli": lambda: rt.BetaBernoulli(1.0, 1.0),
            "normal_gamma": rt.NormalGamma,
            "niw": rt.NormalInverseWishart,
        }[job["model"]]()
        est = rt.BayesianRoseTree(
            model=model,
            binary=job.get("binary", False),
            approximate=job.get("approximate", False),
            n_jobs=job.get("n_jobs"),
        )

        def fit() -> Any:
            return est.fit(X).log_evidence_

    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cpu = time.process_time()
    start = time.perf_counter()
    result = fit()
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024
    scored = tool in ("rosetree", "coalescent")
    out.send((seconds, peak, float(result) if scored else None, job_input_mib, cpu))


def run(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` in a fresh process; the job with its seconds, peak MiB and log evidence."""
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(job, there))
    proc.start()
    seconds, peak, log_evidence, input_mib, cpu = here.recv()
    proc.join()
    res = {
        **job,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_mib": peak,
        "input_mib": input_mib,
        "log_evidence": log_evidence,
    }
    shown = {k: v for k, v in job.items() if k != "tool"}
    ev = "" if log_evidence is None else f", ln p(D|T)/n = {log_evidence / job['n']:.4f}"
    print(
        f"  {job['tool']} {shown}: {seconds:.2f} s ({cpu:.2f} s CPU), {peak:.0f} MiB{ev}",
        flush=True,
    )
    return res


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the four parts; print each and optionally write the results as JSON."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--threads", type=int, nargs="+")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--exact", type=int, help="also the exact search on this many rows")
    p.add_argument("--json", type=Path)
    p.add_argument("--coalescent", action="store_true", help="only the coalescent part")
    p.add_argument("--coalescent-sizes", type=int, nargs="+", default=[20_000, 100_000])
    p.add_argument("--speed", action="store_true", help="only the exact searches at 8,000")
    p.add_argument("--repeat", type=int, default=1, help="rounds of --speed")
    p.add_argument(
        "--data",
        nargs="+",
        default=["hierarchical"],
        help="generators for --speed's BRT and BHC ('all': the six)",
    )
    p.add_argument(
        "--speed-coalescent-sizes",
        type=int,
        nargs="*",
        default=[4000, 8000],
        help="sizes for --speed's Greedy-Rate1 (none: leave it out)",
    )
    p.add_argument("--huge", type=int, nargs="?", const=10_000_000, help="only part 7")
    p.add_argument(
        "--fidelity", action="store_true", help="only the evidence against the exact search"
    )
    args = p.parse_args(argv)
    header = {**machine(), "command": " ".join(["python", *sys.argv])}
    if args.speed:
        data = list(GENERATORS) if args.data == ["all"] else args.data
        for name in data:
            if name not in GENERATORS:
                p.error(f"--data: unknown generator {name!r}; choose from {list(GENERATORS)}")
        return _speed(args.repeat, data, args.speed_coalescent_sizes, header, args.json)
    if args.huge:
        job = {"tool": "rosetree", "model": "bernoulli", "data": "hierarchical"}
        res = run({**job, "n": args.huge, "dtype": "bool", "approximate": True})
        print(f"  {args.huge:,} bool rows: input {res['input_mib']:.0f} MiB")
        if args.json:
            args.json.write_text(json.dumps({"header": header, "huge": res}, indent=1) + "\n")
        return {"huge": res}
    if args.quick:
        args.sizes = [20_000, 100_000]
    cores = os.cpu_count() or 1
    threads = args.threads or [t for t in (1, 2, 4, 8, 16) if t <= cores]
    results: dict[str, Any] = {
        "header": {**machine(), "command": " ".join(["python", *sys.argv])},
        "growth": [],
        "fidelity": [],
        "gaussian": [],
        "threads": [],
    }
    if args.coalescent:
        results["coalescent"] = coalescent(args.coalescent_sizes)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
        return results
    print("growth of approximate=True")
    for name in [] if args.fidelity else GENERATORS:
        rows = [
            run(
                {
                    "tool": "rosetree",
                    "model": "bernoulli",
                    "data": name,
                    "n": n,
                    "approximate": True,
                }
            )
            for n in args.sizes
        ]
        a, b = rows[-2], rows[-1]
        exponent = math.log(b["seconds"] / a["seconds"]) / math.log(b["n"] / a["n"])
        print(f"  {name}: growth exponent {exponent:.2f}")
        results["growth"].append({"data": name, "runs": rows, "exponent": exponent})

    print("fidelity and speed at n = 8,000")
    base = {"n": 8000}
    scipy = run({**base, "tool": "scipy", "data": "hierarchical"})
    fast = run({**base, "tool": "fastcluster", "data": "hierarchical"})
    results["fidelity_baselines"] = {"scipy": scipy, "fastcluster": fast}
    for name in GENERATORS:
        job = {**base, "tool": "rosetree", "model": "bernoulli", "data": name, "n_jobs": 1}
        exact = run(job)
        approx = run({**job, "approximate": True})
        gap = (approx["log_evidence"] - exact["log_evidence"]) / abs(exact["log_evidence"])
        entry = {"data": name, "exact": exact, "approximate": approx, "gap": gap}
        if name == "hierarchical":
            bhc = run({**job, "binary": True})
            entry["bhc"] = bhc
            for label, res in (("BRT", exact), ("BHC", bhc)):
                print(
                    f"  {label} exact, one thread: {res['seconds'] / scipy['seconds']:.2f}x "
                    f"SciPy, {res['seconds'] / fast['seconds']:.2f}x fastcluster"
                )
        print(f"  {name}: approximate evidence {100 * gap:+.3f}% of the exact tree's")
        results["fidelity"].append(entry)

    if args.fidelity:
        if args.json:
            args.json.write_text(json.dumps(results, indent=1) + "\n")
        return results
    print("Gaussian cluster models")
    for model in ("normal_gamma", "niw"):
        job = {"tool": "rosetree", "model": model, "data": "gauss"}
        exact = run({**job, "n": 8000})
        approx = run({**job, "n": 8000, "approximate": True})
        big = run({**job, "n": 100_000, "approximate": True})
        gap = (approx["log_evidence"] - exact["log_evidence"]) / abs(exact["log_evidence"])
        print(f"  {model}: approximate evidence {100 * gap:+.3f}% of the exact tree's at 8,000")
        results["gaussian"].append(
            {"model": model, "exact": exact, "approximate": approx, "large": big, "gap": gap}
        )

    print(f"threads (this machine has {cores} cores)")
    for label, job in (
        (
            "approximate",
            {
                "tool": "rosetree",
                "model": "bernoulli",
                "data": "hierarchical",
                "n": args.sizes[-1],
                "approximate": True,
            },
        ),
        ("exact", {"tool": "rosetree", "model": "bernoulli", "data": "hierarchical", "n": 8000}),
    ):
        rows = [run({**job, "threads": t, "n_jobs": t}) for t in threads]
        one = rows[0]["seconds"]
        for r in rows:
            r["speedup"] = one / r["seconds"]
            r["efficiency"] = r["speedup"] / r["threads"]
            print(
                f"  {label}, {r['threads']} threads: speed-up {r['speedup']:.2f}, "
                f"efficiency {100 * r['efficiency']:.0f}%"
            )
        results["threads"].append({"search": label, "runs": rows})
    if args.exact:
        print("exact search at scale")
        results["exact_large"] = run(
            {"tool": "rosetree", "model": "bernoulli", "data": "hierarchical", "n": args.exact}
        )
    results["coalescent"] = coalescent(args.coalescent_sizes)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return results


def coalescent(sizes: list[int]) -> list[dict[str, Any]]:
    """Part 6: growth of KingmanCoalescent(approximate=True) and its fidelity at 8,000."""
    print("coalescent, approximate=True (Greedy-Rate1 on parts)")
    out = []
    # The exact multinomial Greedy-Rate1 solves each pair's time by Newton's method over
    # every feature (6 s for 1,000 rows of 64 bits on 2 cores): its parts are smaller.
    for likelihood, data, parts in (
        ("brownian", "gauss20", {}),
        ("multinomial", "binary16", {"exact_below": 1000, "approx_sample": 500}),
    ):
        job = {"tool": "coalescent", "likelihood": likelihood, "data": data, **parts}
        exact = run({**job, "n": 8000})
        approx = run({**job, "n": 8000, "approximate": True})
        gap = (approx["log_evidence"] - exact["log_evidence"]) / abs(exact["log_evidence"])
        print(f"  {likelihood}: approximate log joint {100 * gap:+.3f}% of the exact tree's")
        rows = [run({**job, "n": n, "approximate": True}) for n in sizes]
        a, b = rows[-2], rows[-1]
        exponent = math.log(b["seconds"] / a["seconds"]) / math.log(b["n"] / a["n"])
        print(f"  {likelihood}: growth exponent {exponent:.2f}")
        out.append(
            {
                "likelihood": likelihood,
                "exact": exact,
                "approximate": approx,
                "gap": gap,
                "runs": rows,
                "exponent": exponent,
            }
        )
    return out


def _speed(
    repeat: int,
    data: list[str],
    coalescent_sizes: list[int],
    header: dict[str, Any],
    out: Path | None,
) -> dict[str, Any]:
    """Exact BRT, BHC and Greedy-Rate1 on one thread against SciPy and fastcluster."""
    # One thread everywhere, NumPy's BLAS included: CPU time then measures one core.
    for var in ("RAYON_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = "1"
    cases: list[tuple[str, dict[str, Any], list[str]]] = []
    for name in data:
        base = {"n": 8000, "data": name, "threads": 1}
        brt = {**base, "tool": "rosetree", "model": "bernoulli", "n_jobs": 1}
        jobs = {
            "scipy": {**base, "tool": "scipy"},
            "fastcluster": {**base, "tool": "fastcluster"},
            "BRT": brt,
            "BHC": {**brt, "binary": True},
        }
        cases.append((f"{name}, n = 8,000, d = 64", jobs, ["BRT", "BHC"]))
    for n in coalescent_sizes:
        base = {"n": n, "data": "gauss20", "threads": 1, "metric": "euclidean"}
        jobs = {
            "scipy": {**base, "tool": "scipy"},
            "fastcluster": {**base, "tool": "fastcluster"},
            "Greedy-Rate1": {
                **base,
                "tool": "coalescent",
                "likelihood": "brownian",
                "n_jobs": 1,
            },
        }
        cases.append((f"Gaussian mixture, n = {n:,}, d = 20", jobs, ["Greedy-Rate1"]))
    results: dict[str, Any] = {"header": header, "cases": []}
    rounds: list[list[dict[str, dict[str, float]]]] = [[] for _ in cases]
    for _ in range(repeat):
        for k, (_, jobs, _) in enumerate(cases):
            rounds[k].append(
                {
                    name: {key: r[key] for key in ("seconds", "cpu_seconds", "log_evidence")}
                    for name, r in ((name, run(job)) for name, job in jobs.items())
                }
            )
    print(f"best of {repeat}, one thread, time / SciPy's and / fastcluster's (wall; CPU)")
    for (label, jobs, ours), runs in zip(cases, rounds, strict=True):
        best = {
            name: {key: min(r[name][key] for r in runs) for key in ("seconds", "cpu_seconds")}
            for name in jobs
        }
        entry = {"case": label, "rounds": runs, "best": best, "ratios": {}}
        for name in ours:
            ratios = {
                f"{other}_{key}": best[name][key] / best[other][key]
                for other in ("scipy", "fastcluster")
                for key in ("seconds", "cpu_seconds")
            }
            entry["ratios"][name] = ratios
            print(
                f"  {label}, {name}: {best[name]['seconds']:.2f} s "
                f"({best[name]['cpu_seconds']:.2f} s CPU); "
                f"{ratios['scipy_seconds']:.2f}x; {ratios['scipy_cpu_seconds']:.2f}x SciPy "
                f"({best['scipy']['seconds']:.2f} s), "
                f"{ratios['fastcluster_seconds']:.2f}x; "
                f"{ratios['fastcluster_cpu_seconds']:.2f}x fastcluster "
                f"({best['fastcluster']['seconds']:.2f} s)",
                flush=True,
            )
        results["cases"].append(entry)
    results["load_average_after"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    if out:
        out.write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
