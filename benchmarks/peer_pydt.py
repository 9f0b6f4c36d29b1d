#!/usr/bin/env python3
r"""Run the reference C++ Pitman–Yor diffusion tree sampler and compare it with rosetree.

The reference implementation is Knowles & Ghahramani's own sampler
(github.com/davidaknowles/pydt). It is not part of rosetree and is not built by the test
suite: :func:`build_peer` compiles ``peer_pydt_driver.cpp`` (next to this file) against a
checkout of that repository, or takes a prebuilt binary from ``$ROSETREE_PYDT_PEER``.
Building needs ``g++`` and the Boost headers (Debian: ``apt-get install libboost-dev``);
the repository's sources only compile as C++98 with a current libstdc++ (they call
``isnan<double>``), hence ``-std=gnu++98``.

What the peer does (from its sources: ``pydtsamplers.hpp``, ``Tree.hpp``, ``TreeNode.hpp``,
``Settings.hpp``):

* Model: divergence function a(t) = c / (1 − t); Brownian motion with variance 1 per unit
  time from the origin at t = 0 to the leaves at t = 1 (no σ² parameter; :func:`run_peer`
  passes X / σ and converts the log likelihood back). Its ``theta`` is the paper's α and
  its ``alpha`` the paper's β. The structure factor of a branch point includes
  Γ(1 − β)^(K − 1) in the denominator, i.e. eq 7 *with* the erratum, like rosetree.
* One iteration: pick a node uniformly among all nodes but the root (leaves included),
  detach the subtree under it, and slice-sample where to reattach it (any point on a branch
  earlier than the subtree's root, or an existing branch point, which counts as a segment of
  width 0.1 when α + 2β ≠ 0), shrinking the slice towards the old position after each
  rejected candidate. Every iteration therefore ends in one accepted move (possibly back to
  where the subtree was); the candidates it evaluates are the "attempts". The subtree's
  own times are unchanged; only the new branch point's time is drawn.
* The log joint is updated incrementally from local message-passing factors and recomputed
  from scratch every 50 iterations. Between recomputations it drifts (the downward messages
  of the nodes off the moved path are not refreshed), by several nats over 50 moves at
  N = 100, so the slice sampler targets a slightly wrong density between refreshes.
* Learnt hyperparameters (all three together, every 50 iterations, one univariate slice
  sampling step each, step-out width 1): α ~ Exp(1) restricted to α ≥ −2β; β ~ U[0, 1);
  c ~ Exp(1). Their conditionals use the structure and time factors only. The harmonic sums
  H_n of the time factor are memoised and the memo is cleared only after all three have
  been updated, so the α and β updates evaluate the time factor with H_n of the previous
  (α, β); and each slice-sampling step works on a copy of the random number generator.
* Output: every 10 iterations (at i % 10 == 1) a line ``It i time(s) <cpu s> ML: <log
  joint> ... attempts <mean candidates per iteration since the last line>``.

Usage::

    python benchmarks/peer_pydt.py --src /path/to/pydt check
    python benchmarks/peer_pydt.py --src /path/to/pydt speed --sizes 100 200 400
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DRIVER = Path(__file__).with_name("peer_pydt_driver.cpp")
PEER_HEADERS = ("Tree.hpp", "TreeNode.hpp", "Settings.hpp", "pydtsamplers.hpp", "slice_sample.hpp")
ENV_BINARY = "ROSETREE_PYDT_PEER"

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)"
_IT_LINE = re.compile(
    rf"^It (\d+) time\(s\) ({_NUMBER}) ML: ({_NUMBER}) pred ({_NUMBER}) theta: ({_NUMBER}) "
    rf"alpha: ({_NUMBER}) c: ({_NUMBER}) # internal (\d+) branchingFactor ({_NUMBER})"
    rf"\(max (\d+)\) attempts ({_NUMBER})"
)


def build_peer(src_dir: str | os.PathLike[str] | None = None, build_dir: str | None = None) -> str:
    """Compile the peer's slice sampler and return the path of the binary.

    Parameters
    ----------
    src_dir : path, optional
        A checkout of github.com/davidaknowles/pydt (the directory holding ``Tree.hpp``).
        Not needed when ``$ROSETREE_PYDT_PEER`` names a prebuilt binary.
    build_dir : path, optional
        Where to put the binary (default: ``<src_dir>/../pydt-build``).

    Returns
    -------
    str
        The binary, ``pydt_driver``, built from ``peer_pydt_driver.cpp`` with
        ``g++ -O3 -std=gnu++98 -I <src_dir>`` (the compiler is ``$CXX`` if set).

    Raises
    ------
    FileNotFoundError
        If ``$ROSETREE_PYDT_PEER`` is set but not an executable file, if ``src_dir`` lacks
        the peer's headers, or if no C++ compiler is found.
    RuntimeError
        If compilation fails; the message names the missing Boost headers when that is why.
    """
    prebuilt = os.environ.get(ENV_BINARY)
    if prebuilt:
        if not (os.path.isfile(prebuilt) and os.access(prebuilt, os.X_OK)):
            raise FileNotFoundError(f"${ENV_BINARY}={prebuilt!r} is not an executable file")
        return prebuilt
    if src_dir is None:
        raise FileNotFoundError(
            f"no peer: set ${ENV_BINARY} to a built pydt_driver or pass the directory of a "
            "checkout of github.com/davidaknowles/pydt"
        )
    src = Path(src_dir).resolve()
    missing = [h for h in PEER_HEADERS if not (src / h).is_file()]
    if missing:
        raise FileNotFoundError(f"{src} is not a pydt checkout: missing {', '.join(missing)}")
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        raise FileNotFoundError("no C++ compiler: install g++ or set $CXX")
    out_dir = Path(build_dir) if build_dir else src.parent / "pydt-build"
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / "pydt_driver"
    cmd = [cxx, "-O3", "-std=gnu++98", "-I", str(src), str(DRIVER), "-o", str(binary)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        boost = re.search(r"fatal error: (boost/[^:]+): No such file", proc.stderr)
        if boost:
            raise RuntimeError(
                f"the Boost headers are missing ({boost.group(1)} not found): install them "
                "(Debian/Ubuntu: apt-get install libboost-dev) or add -I via $CXX"
            )
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    return str(binary)


def parse_newick(text: str) -> Any:
    """Convert the peer's tree string to rosetree's nested dicts.

    The peer writes each node as ``name:t-s`` (``t`` the node's time, ``s`` its parent's);
    leaves are named by their row. Returns ``{"t": t, "children": [...]}`` with int leaves,
    the form ``rosetree.pydt_log_prior`` and ``rosetree.pydt_log_likelihood`` accept.
    """
    pos = 0
    time_pair = re.compile(rf"({_NUMBER})-({_NUMBER})")

    def node() -> Any:
        nonlocal pos
        if text[pos] == "(":
            pos += 1
            children = [node()]
            while text[pos] == ",":
                pos += 1
                children.append(node())
            if text[pos] != ")":
                raise ValueError(f"expected ')' at {pos} in the peer's tree")
            pos += 1
            label = None
        else:
            end = text.index(":", pos)
            label = int(text[pos:end])
            pos = end
        if text[pos] != ":":
            raise ValueError(f"expected ':' at {pos} in the peer's tree")
        m = time_pair.match(text, pos + 1)
        if m is None:
            raise ValueError(f"expected 't-s' at {pos + 1} in the peer's tree")
        pos = m.end()
        t = float(m.group(1))
        if label is not None:
            if t != 1.0:
                raise ValueError(f"leaf {label} at time {t}, expected 1")
            return label
        return {"t": t, "children": children}

    tree = node()
    if pos != len(text.strip()):
        raise ValueError(f"trailing text after the peer's tree at {pos}")
    return tree


def run_peer(
    binary: str,
    X: Any,
    n_iter: int,
    alpha: float,
    beta: float,
    c: float,
    sigma2: float = 1.0,
    learn_hyperparameters: bool = False,
    seed: int = 0,
    workdir: str | os.PathLike[str] | None = None,
    init: str = "random",
    timeout: float = 3600.0,
) -> dict[str, Any]:
    r"""Run ``n_iter`` iterations of the peer's slice sampler on ``X`` and parse its output.

    Parameters
    ----------
    binary : str
        From :func:`build_peer`.
    X : array-like of shape (n, d)
        The data; row ``i`` becomes leaf ``i``.
    n_iter : int
        Iterations: each detaches one subtree and slice-samples where it goes back.
    alpha, beta, c : float
        The PYDT's α ≥ −2β, 0 ≤ β < 1 and c > 0 (fixed, or the starting values).
    sigma2 : float, default=1.0
        Brownian variance per unit time. The peer fixes it at 1, so it is given
        ``X / sqrt(sigma2)`` and ``−(n d / 2) log sigma2`` is added to its log likelihoods
        (the Jacobian), which makes them the log likelihood of ``X`` with ``sigma2``.
    learn_hyperparameters : bool, default=False
        Slice-sample α, β and c every 50 iterations (σ² is never learnt by the peer).
    seed : int, default=0
        Seeds the peer's Mersenne twister (tree moves and the initial tree).
    workdir : path, optional
        Where the data file and the peer's trace files go (default: a temporary directory
        that is removed afterwards).
    init : {"random", "flat"}, default="random"
        Initial tree: a Dirichlet diffusion tree draw with c = 1 (the peer's default) or
        all leaves on one branch point at t = 0.5.
    timeout : float, default=3600
        Seconds before the run is killed (``subprocess.TimeoutExpired``).

    Returns
    -------
    dict
        ``n``, ``d``, ``n_iter``, ``wall_s`` (the sampling loop alone, timed by the driver),
        ``process_wall_s`` (the whole subprocess, including reading the data and the
        initial tree), ``moves`` (= ``n_iter``; one accepted subtree move per iteration),
        ``moves_per_s``, ``attempts`` (candidate positions evaluated in the iterations the
        peer reported; ``None`` before the first report), ``attempts_per_move``,
        ``attempts_per_s``, ``trace`` (one dict per report: ``iteration``, ``cpu_s``,
        ``log_joint`` (the peer's running value), ``alpha``, ``beta``, ``c``,
        ``n_internal``, ``attempts_per_iteration``), ``alpha``, ``beta``, ``c`` (final),
        ``tree`` (nested dicts), ``initial`` and ``final`` (each with ``log_likelihood``,
        ``log_prior_structure``, ``log_prior_times``, ``log_prior``, ``log_joint``,
        recomputed from scratch by the peer's code; log likelihoods for ``X`` and
        ``sigma2``), ``drift`` (the peer's last running log joint minus its recomputation
        when the last iteration was reported, else ``None``), ``stdout``.
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError("X must be a 2-d array with at least 2 rows")
    if not (sigma2 > 0 and math.isfinite(sigma2)):
        raise ValueError(f"sigma2 must be finite and positive, got {sigma2!r}")
    if init not in ("random", "flat"):
        raise ValueError(f"init must be 'random' or 'flat', got {init!r}")
    n, d = X.shape
    jacobian = -0.5 * n * d * math.log(sigma2)
    cleanup = workdir is None
    work = Path(tempfile.mkdtemp(prefix="pydt_peer_") if workdir is None else workdir)
    work.mkdir(parents=True, exist_ok=True)
    try:
        data = work / "data.txt"
        np.savetxt(data, X / math.sqrt(sigma2), fmt="%.17g", delimiter="\t")
        cmd = [
            binary,
            str(data),
            str(int(n_iter)),
            repr(float(alpha)),
            repr(float(beta)),
            repr(float(c)),
            "1" if learn_hyperparameters else "0",
            str(int(seed)),
            init,
            str(work),
        ]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        process_wall = time.perf_counter() - start
        if proc.returncode != 0:
            raise RuntimeError(
                f"the peer exited with {proc.returncode}:\n{proc.stderr[-2000:]}"
                f"\n{proc.stdout[-2000:]}"
            )
    finally:
        if cleanup:
            shutil.rmtree(work, ignore_errors=True)
    return _parse_output(proc.stdout, n, d, int(n_iter), jacobian, process_wall)


def _parse_output(
    stdout: str, n: int, d: int, n_iter: int, jacobian: float, process_wall: float
) -> dict[str, Any]:
    trace = []
    values: dict[str, dict[str, float]] = {"INITIAL": {}, "FINAL": {}}
    newick = None
    for line in stdout.splitlines():
        m = _IT_LINE.match(line)
        if m:
            trace.append(
                {
                    "iteration": int(m.group(1)),
                    "cpu_s": float(m.group(2)),
                    "log_joint": float(m.group(3)) + jacobian,
                    "alpha": float(m.group(5)),
                    "beta": float(m.group(6)),
                    "c": float(m.group(7)),
                    "n_internal": int(m.group(8)),
                    "attempts_per_iteration": float(m.group(11)),
                }
            )
            continue
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] in values:
            if parts[1] == "newick":
                newick = parts[2].strip()
            else:
                values[parts[0]][parts[1]] = float(parts[2])
    final = values["FINAL"]
    if newick is None or "wall_s" not in final:
        raise RuntimeError(f"could not parse the peer's output:\n{stdout[-2000:]}")

    def components(v: dict[str, float]) -> dict[str, float]:
        ll = v["log_likelihood"] + jacobian
        prior = v["log_prior_structure"] + v["log_prior_times"]
        return {
            "log_likelihood": ll,
            "log_prior_structure": v["log_prior_structure"],
            "log_prior_times": v["log_prior_times"],
            "log_prior": prior,
            "log_joint": ll + prior,
        }

    # Each report's "attempts" is the count since the previous report divided by 10; the
    # first report (i = 1) covers iterations 0 and 1, later ones ten iterations each.
    attempts = round(sum(10 * r["attempts_per_iteration"] for r in trace)) if trace else None
    reported = trace[-1]["iteration"] + 1 if trace else 0
    wall = final["wall_s"]
    out: dict[str, Any] = {
        "n": n,
        "d": d,
        "n_iter": n_iter,
        "wall_s": wall,
        "process_wall_s": process_wall,
        "moves": n_iter,
        "moves_per_s": n_iter / wall if wall > 0 else math.inf,
        "attempts": attempts,
        "attempts_per_move": attempts / reported if attempts is not None else None,
        "trace": trace,
        "alpha": final["alpha"],
        "beta": final["beta"],
        "c": final["c"],
        "tree": parse_newick(newick),
        "initial": components(values["INITIAL"]),
        "final": components(final),
        "drift": None,
        "stdout": stdout,
    }
    if attempts is not None:
        out["attempts_per_s"] = out["attempts_per_move"] * out["moves_per_s"]
    if trace and trace[-1]["iteration"] == n_iter - 1:
        out["drift"] = trace[-1]["log_joint"] - out["final"]["log_joint"]
    return out


def compare_with_rosetree(X: Any, result: dict[str, Any], sigma2: float = 1.0) -> dict[str, float]:
    """Score the peer's final tree with rosetree and return both sides and the differences.

    Uses the final α, β, c the peer reports (the fixed values unless it learnt them).
    """
    import rosetree as rt

    tree = result["tree"]
    ll = rt.pydt_log_likelihood(X, tree, sigma2=sigma2)
    prior = rt.pydt_log_prior(tree, alpha=result["alpha"], beta=result["beta"], c=result["c"])
    peer = result["final"]
    return {
        "peer_log_likelihood": peer["log_likelihood"],
        "rosetree_log_likelihood": ll,
        "diff_log_likelihood": peer["log_likelihood"] - ll,
        "peer_log_prior": peer["log_prior"],
        "rosetree_log_prior": prior,
        "diff_log_prior": peer["log_prior"] - prior,
    }


def printed_eq7_correction(tree: Any, beta: float) -> float:
    """Log of what the printed eq 7 (without Γ(1 − β)^(K−1)) adds to the corrected prior.

    Σ over branch points of (K − 1) lnΓ(1 − β): the amount by which a log prior computed
    from eq 7 as printed would exceed rosetree's (and the peer's).
    """
    total = 0.0

    def walk(node: Any) -> None:
        nonlocal total
        if isinstance(node, dict):
            total += (len(node["children"]) - 1) * math.lgamma(1.0 - beta)
            for child in node["children"]:
                walk(child)

    walk(tree)
    return total


def _data(n: int, d: int, alpha: float, beta: float, c: float) -> np.ndarray:
    import rosetree as rt

    X, _ = rt.sample_pydt(n, d, alpha=alpha, beta=beta, c=c, sigma2=1.0, random_state=0)
    return X


def cmd_check(binary: str, args: argparse.Namespace) -> None:
    """Compare the peer's log likelihood and log prior of its final tree with rosetree's.

    Four runs on data drawn from the model: the DDT (β = 0), β > 0, β > 0 with σ² ≠ 1, and
    learnt α, β, c. The printed-eq-7 offset is Σ (K − 1) lnΓ(1 − β) over the final tree's
    branch points, what a prior without the erratum would add. The drift is the peer's
    running log joint minus its recomputation from scratch (the sampler moves on the former).
    """
    rows = []
    for beta, learn, sigma2 in [
        (0.0, False, 1.0),
        (args.beta, False, 1.0),
        (args.beta, False, 2.5),
        (args.beta, True, 1.0),
    ]:
        X = _data(args.n, args.d, args.alpha, beta, args.c)
        # n_iter = 10k + 2 puts the last iteration on a report line, so the drift of the
        # peer's running log joint since its last recomputation is visible.
        res = run_peer(binary, X, args.iters, args.alpha, beta, args.c, sigma2, learn, args.seed)
        cmp = compare_with_rosetree(X, res, sigma2)
        eq7 = printed_eq7_correction(res["tree"], res["beta"])
        rows.append((beta, learn, sigma2, res, cmp, eq7))
    print(
        "| β (start) | learnt | σ² | final α, β, c | ll peer | ll rosetree | Δll | "
        "prior peer | prior rosetree | Δprior | printed-eq-7 offset | drift |"
    )
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for beta, learn, sigma2, res, cmp, eq7 in rows:
        drift = "—" if res["drift"] is None else f"{res['drift']:.3g}"
        print(
            f"| {beta} | {learn} | {sigma2} | {res['alpha']:.4g}, {res['beta']:.4g}, "
            f"{res['c']:.4g} | {cmp['peer_log_likelihood']:.10f} | "
            f"{cmp['rosetree_log_likelihood']:.10f} | {cmp['diff_log_likelihood']:.2e} | "
            f"{cmp['peer_log_prior']:.10f} | {cmp['rosetree_log_prior']:.10f} | "
            f"{cmp['diff_log_prior']:.2e} | {eq7:.6f} | {drift} |"
        )


def cmd_speed(binary: str, args: argparse.Namespace) -> None:
    """Measure the peer's moves and candidate evaluations per second against n."""
    results = []
    print("| n | d | hyperparameters | iterations | s | moves/s | attempts/move | attempts/s |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        X = _data(n, args.d, args.alpha, args.beta, args.c)
        for learn in (False, True):
            best = None
            for _ in range(args.repeat):
                # The same seed every time: the same chain, so the repeats differ only in
                # timing noise and the fastest is kept.
                res = run_peer(
                    binary, X, args.iters, args.alpha, args.beta, args.c, 1.0, learn, args.seed
                )
                if best is None or res["moves_per_s"] > best["moves_per_s"]:
                    best = res
            assert best is not None
            label = "learnt" if learn else "fixed"
            print(
                f"| {n} | {args.d} | {label} | {args.iters} | {best['wall_s']:.3f} | "
                f"{best['moves_per_s']:.0f} | {best['attempts_per_move']:.2f} | "
                f"{best['attempts_per_s']:.0f} |",
                flush=True,
            )
            results.append({k: v for k, v in best.items() if k not in ("stdout", "tree")})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def main() -> None:
    """Build (or find) the peer, then run the check or the speed measurement."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", help="checkout of github.com/davidaknowles/pydt")
    ap.add_argument("--build-dir", help="where to put the binary")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--beta", type=float, default=0.2)
    ap.add_argument("--c", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    sub = ap.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help=cmd_check.__doc__)
    check.add_argument("--n", type=int, default=100)
    check.add_argument("--iters", type=int, default=1042)
    speed = sub.add_parser("speed", help=cmd_speed.__doc__)
    speed.add_argument("--sizes", type=int, nargs="+", default=[100, 200, 400])
    speed.add_argument("--iters", type=int, default=20000)
    speed.add_argument("--repeat", type=int, default=3)
    speed.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    binary = build_peer(args.src, args.build_dir)
    if args.command == "check":
        cmd_check(binary, args)
    else:
        cmd_speed(binary, args)


if __name__ == "__main__":
    main()
