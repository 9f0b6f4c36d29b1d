#!/usr/bin/env python3
r"""Thread scaling of the rose-tree searches, against SciPy and fastcluster in the same run.

Binary rows (d = 64) from the hierarchical generator of ``bench_brt.py`` (4
super-prototypes, 12 prototypes, 10 % bit flips), ``BetaBernoulli(1, 1)``; each fit in a
fresh child process, the time of the fit only:

1. SciPy's ``linkage(pdist(X, "hamming"), "average")`` and fastcluster's
   ``linkage(X, "average", metric="hamming")`` at n = 8,000 (one thread each; fastcluster
   is skipped where it is not installed);
2. the exact search (BRT, and BHC with one thread and all of them) at n = 8,000, and BRT at
   ``--exact-n`` (default 30,000), for each ``--threads`` count;
3. ``approximate=True`` on ``--approx-n`` rows (default 10⁶) for each thread count.

Each ``--build LABEL=PATH`` runs every rose-tree job with the ``rosetree`` package found in
``PATH`` (a directory holding ``rosetree/``), so that two builds can be compared on one
machine in one run; by default the installed package. Speed-up and parallel efficiency
(speed-up / threads) are printed against one thread of the same build; a job that would
exceed ``--timeout`` seconds is recorded as such.

Usage::

    python benchmarks/bench_threads.py --json benchmarks/threads_results.json
    python benchmarks/bench_threads.py --threads 1 16 --build new=python --build old=/tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

JOB = r"""
import json, sys, time
job = json.loads(sys.argv[1])
if job.get("path"):
    sys.path.insert(0, job["path"])
sys.path.insert(0, job["here"])
from bench_brt import make_binary
X = make_binary(job["n"], seed=0)
t = time.perf_counter()
log_evidence = None
if job["tool"] == "scipy":
    from scipy.cluster.hierarchy import linkage
    from scipy.spatial.distance import pdist
    linkage(pdist(X, "hamming"), "average")
elif job["tool"] == "fastcluster":
    import fastcluster
    fastcluster.linkage(X, "average", metric="hamming")
else:
    import rosetree as rt
    est = rt.BayesianRoseTree(
        rt.BetaBernoulli(1, 1),
        n_jobs=job["threads"],
        binary=job["binary"],
        approximate=job["approximate"],
    ).fit(X)
    log_evidence = est.log_evidence_
print(json.dumps({"seconds": time.perf_counter() - t, "log_evidence": log_evidence}))
"""


def run(job: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One job in a fresh interpreter: its time, or why there is none."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", JOB, json.dumps({**job, "here": str(HERE)})],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        result = {**job, "timeout": timeout}
    else:
        lines = out.stdout.strip().splitlines()
        result = {**job, **json.loads(lines[-1])} if lines else {**job, "error": out.stderr[-300:]}
    print(json.dumps(result), flush=True)
    return result


def scaling(rows: list[dict[str, Any]]) -> None:
    """Speed-up and efficiency against the one-thread run of the same build and job."""
    ones = {
        (r["build"], r["n"], r["binary"], r["approximate"]): r["seconds"]
        for r in rows
        if r.get("threads") == 1 and "seconds" in r
    }
    for r in rows:
        one = ones.get((r["build"], r["n"], r["binary"], r["approximate"]))
        if one is not None and "seconds" in r:
            r["speedup"] = one / r["seconds"]
            r["efficiency"] = r["speedup"] / r["threads"]
            print(
                f"  {r['build']}, n = {r['n']}, binary={r['binary']}, "
                f"approximate={r['approximate']}, {r['threads']} threads: "
                f"speed-up {r['speedup']:.2f}, efficiency {100 * r['efficiency']:.0f}%"
            )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the jobs; print them and optionally write them as JSON."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    cores = os.cpu_count() or 1
    p.add_argument("--threads", type=int, nargs="+")
    p.add_argument("--exact-n", type=int, default=30_000)
    p.add_argument("--approx-n", type=int, default=1_000_000)
    p.add_argument("--build", action="append", default=[], metavar="LABEL=PATH")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    threads = args.threads or [t for t in (1, 2, 4, 8, 16) if t <= cores]
    builds = [b.split("=", 1) for b in args.build] or [["installed", ""]]
    results: dict[str, Any] = {
        "header": {"cpu_count": cores, "command": " ".join(["python", *sys.argv])},
        "baselines": [run({"tool": t, "n": 8000}, args.timeout) for t in ("scipy", "fastcluster")],
        "rosetree": [],
    }
    for label, path in builds:
        for n, binary, approximate, counts in (
            (8000, False, False, threads),
            (8000, True, False, sorted({1, threads[-1]})),
            (args.exact_n, False, False, threads),
            (args.approx_n, False, True, threads),
        ):
            for t in counts:
                job = {
                    "tool": "rosetree",
                    "build": label,
                    "path": path,
                    "n": n,
                    "threads": t,
                    "binary": binary,
                    "approximate": approximate,
                }
                results["rosetree"].append(run(job, args.timeout))
    scaling(results["rosetree"])
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
