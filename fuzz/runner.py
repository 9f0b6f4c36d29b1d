"""The parent process: runs cases in long-lived workers, catches crashes and hangs.

The report is built here too.

Each worker (:mod:`fuzz.worker`) runs one case at a time. When a worker's pipe closes while
a case is in flight, the case is a ``crash`` (with the exit status or signal and the end of
the worker's stderr, where :mod:`faulthandler` and Rust write their messages); when a case
runs past the timeout, the worker is killed and the case is a ``hang``. A fresh worker then
takes the next case.
"""

from __future__ import annotations

import os
import pickle
import platform
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from . import OUTCOMES
from .spec import Case
from .worker import write_message

__all__ = ["FINDING_OUTCOMES", "Pool", "finding_key", "fuzz", "run_one"]

ROOT = Path(__file__).resolve().parent.parent
#: Outcomes that are findings: everything but ``ok`` and ``documented``.
FINDING_OUTCOMES = ("other_exception", "non_finite", "crash", "hang", "harness_error")


def _worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("MPLBACKEND", "Agg")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    env["PYTHONFAULTHANDLER"] = "1"
    return env


class Worker:
    """One child process and the case it is running."""

    def __init__(self, workdir: str, number: int) -> None:
        self.stderr_path = os.path.join(workdir, f"worker{number}.stderr")
        self.stderr = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fuzz.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            cwd=str(ROOT),
            env=_worker_env(),
            bufsize=0,
        )
        self.buffer = b""
        self.job: dict[str, Any] | None = None

    def fileno(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    def send(self, message: Any) -> None:
        assert self.proc.stdin is not None
        write_message(self.proc.stdin, message)

    def receive(self) -> list[Any] | None:
        """Messages that have arrived (None once the worker has closed its end)."""
        data = os.read(self.fileno(), 1 << 20)
        if not data:
            return None
        self.buffer += data
        messages = []
        while len(self.buffer) >= 8:
            size = int.from_bytes(self.buffer[:8], "little")
            if len(self.buffer) < 8 + size:
                break
            messages.append(pickle.loads(self.buffer[8 : 8 + size]))
            self.buffer = self.buffer[8 + size :]
        return messages

    def stderr_text(self) -> str:
        """What the worker wrote to stderr during its last case."""
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stderr_tail(self, limit: int = 3000) -> str:
        """The end of the worker's stderr, from the last fatal error or Rust panic on."""
        text = self.stderr_text()
        start = max(text.rfind("Fatal Python error"), text.rfind("panicked at"))
        if start >= 0:
            return text[max(start - 200, 0) : start + limit]
        return text[-limit:]

    def death(self) -> str:
        """How the process ended: ``"signal SIGSEGV"``, ``"exit status 134"``..."""
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        if code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit status {code}"

    def close(self, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        else:
            try:
                self.send(("quit",))
            except OSError:
                pass
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


class Pool:
    """Workers that run cases with a timeout; crashed or hung workers are replaced."""

    def __init__(self, n_workers: int = 1, timeout: float = 20.0) -> None:
        self.timeout = timeout
        self.workdir = tempfile.mkdtemp(prefix="rosetree-fuzz-")
        self.started = 0
        self.workers = [self._new() for _ in range(n_workers)]
        self.restarts = 0

    def _new(self) -> Worker:
        self.started += 1
        return Worker(self.workdir, self.started)

    def _replace(self, worker: Worker, kill: bool) -> None:
        worker.close(kill=kill)
        self.workers[self.workers.index(worker)] = self._new()
        self.restarts += 1

    def idle(self) -> list[Worker]:
        """The workers without a case."""
        return [w for w in self.workers if w.job is None]

    def submit(
        self, worker: Worker, message: Any, index: int | None, target: str | None = None
    ) -> None:
        """Give ``worker`` a message that starts a case."""
        worker.job = {
            "index": index,
            "target": target,
            "repr": None,
            "blob": None,
            "deadline": time.monotonic() + self.timeout + 30.0,  # drawing the case takes time too
        }
        worker.send(message)

    def wait(self) -> list[dict[str, Any]]:
        """Block until some case ends; return the finished cases' records."""
        busy = [w for w in self.workers if w.job is not None]
        if not busy:
            return []
        now = time.monotonic()
        wait_for = max(0.0, min(w.job["deadline"] for w in busy) - now)  # type: ignore[index]
        ready, _, _ = select.select(busy, [], [], wait_for)
        done: list[dict[str, Any]] = []
        for worker in ready:
            messages = worker.receive()
            if messages is None:  # the process died
                if worker.job is None:
                    self._replace(worker, kill=False)
                    continue
                job = worker.job
                result = {
                    "outcome": "crash",
                    "death": worker.death(),
                    "detail": crash_detail(worker.stderr_text()),
                    "stderr": worker.stderr_tail(),
                }
                done.append({**job, "result": result})
                self._replace(worker, kill=False)
                continue
            for message in messages:
                if message[0] == "start":
                    _, index, target, text, blob = message
                    assert worker.job is not None
                    worker.job.update(index=index, target=target, repr=text, blob=blob)
                    worker.job["deadline"] = time.monotonic() + self.timeout
                elif message[0] == "result":
                    assert worker.job is not None
                    done.append({**worker.job, "result": message[2]})
                    worker.job = None
        now = time.monotonic()
        for worker in list(self.workers):
            if worker.job is not None and worker.job["deadline"] <= now:
                result = {
                    "outcome": "hang",
                    "timeout_s": self.timeout,
                    "stderr": worker.stderr_tail(),
                }
                done.append({**worker.job, "result": result})
                self._replace(worker, kill=True)
        return done

    def run_case(self, case: Case) -> dict[str, Any]:
        """Run one given case on the first worker and wait for its outcome."""
        worker = self.workers[0]
        self.submit(
            worker,
            ("case", pickle.dumps(case, protocol=pickle.HIGHEST_PROTOCOL)),
            case.index,
            case.target,
        )
        while True:
            for record in self.wait():
                return record["result"]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Stop every worker and remove their stderr files."""
        for worker in self.workers:
            worker.close(kill=worker.job is not None)
        shutil.rmtree(self.workdir, ignore_errors=True)


_CRASH_LINES = re.compile(
    r"memory allocation of \d+ bytes failed|panicked at [^\n]*\n[^\n]*|Fatal Python error: [^\n]*"
)


def crash_detail(stderr: str) -> str:
    """The line of a crashed worker's stderr that says why.

    Rust's allocation failure or panic message if there is one, else Python's fatal error.
    """
    lines = _CRASH_LINES.findall(stderr)
    rust = [line for line in lines if not line.startswith("Fatal")]
    line = " ".join((rust or lines or [""])[0].split())[:200]
    return re.sub(r"\d+ bytes", "N bytes", line)


def finding_key(target: str, result: dict[str, Any]) -> str:
    """What makes two findings the same.

    The target, the outcome, and the exception type and place (or the output and its value,
    or the way the process ended).
    """
    outcome = result["outcome"]
    if outcome in ("other_exception", "documented"):
        detail = f"{result.get('exc_type')} at {result.get('where')}"
    elif outcome == "non_finite":
        detail = str(result.get("detail"))
    elif outcome == "crash":
        detail = f"{result.get('death')}: {result.get('detail') or '?'}"
    else:
        detail = ""
    return f"{target} | {outcome} | {detail}"


def run_one(case: Case, timeout: float = 20.0) -> dict[str, Any]:
    """Run one case in a fresh worker."""
    pool = Pool(1, timeout)
    try:
        return pool.run_case(case)
    finally:
        pool.close()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def _installed_at() -> str | None:
    """When the installed rosetree was last written (it changes on a reinstall)."""
    import rosetree

    folder = Path(rosetree.__file__).parent
    try:
        stamp = max(p.stat().st_mtime for p in (folder, *folder.iterdir()))
    except (OSError, ValueError):
        return None
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))


def _versions() -> dict[str, Any]:
    import hypothesis
    import numpy
    import rosetree

    return {
        "rosetree": rosetree.__version__,
        "rosetree_path": os.path.dirname(rosetree.__file__),
        "rosetree_installed_at": _installed_at(),
        "numpy": numpy.__version__,
        "hypothesis": hypothesis.__version__,
        "python": platform.python_version(),
    }


def fuzz(
    cases: int,
    seed: int = 0,
    start: int = 0,
    targets: list[str] | None = None,
    timeout: float = 20.0,
    workers: int = 1,
    shrink_findings: int = 20,
    shrink_runs: int = 150,
    progress: bool = False,
) -> dict[str, Any]:
    """Run ``cases`` cases of run ``seed`` from index ``start`` and return the report.

    Parameters
    ----------
    cases : int
        Number of cases to run (of the selected targets).
    seed : int
        The run's seed; case ``(seed, index)`` is the same on every machine with the same
        hypothesis version.
    start : int
        First case index.
    targets : list of str, optional
        Run only cases of these targets (indices of other targets are skipped).
    timeout : float
        Seconds a case may run before it counts as a hang.
    workers : int
        Worker processes running cases side by side.
    shrink_findings, shrink_runs
        Shrink the first example of up to ``shrink_findings`` distinct findings, with at most
        ``shrink_runs`` runs each (hangs are not shrunk).
    progress : bool
        Print a line to stderr every 30 seconds.
    """
    from .shrink import shrink
    from .targets import TARGETS, cycle

    names = cycle()
    if targets:
        unknown = set(targets) - set(TARGETS)
        if unknown:
            raise SystemExit(f"unknown targets {sorted(unknown)}; known: {sorted(TARGETS)}")
    wanted = set(targets or TARGETS)
    commit, versions = _git_commit(), _versions()
    began = time.monotonic()
    pool = Pool(workers, timeout)
    counts: Counter[str] = Counter()
    per_target: dict[str, Counter[str]] = defaultdict(Counter)
    documented: dict[str, Counter[str]] = defaultdict(Counter)
    warning_counts: dict[str, Counter[str]] = defaultdict(Counter)
    warning_examples: dict[str, str] = {}
    seconds: Counter[str] = Counter()
    findings: dict[str, dict[str, Any]] = {}
    index = start
    submitted = finished = 0
    last_report = began
    try:
        while finished < cases:
            for worker in pool.idle():
                if submitted >= cases:
                    break
                while names[index % len(names)] not in wanted:
                    index += 1
                pool.submit(worker, ("gen", seed, index), index, names[index % len(names)])
                index += 1
                submitted += 1
            for record in pool.wait():
                finished += 1
                result, target = record["result"], record.get("target") or "?"
                outcome = result["outcome"]
                counts[outcome] += 1
                per_target[target][outcome] += 1
                seconds[target] += result.get("seconds", 0.0)
                if outcome == "documented":
                    documented[target][result["exc_type"]] += 1
                for category, where, message in result.get("warnings", []):
                    warning_counts[target][f"{category} at {where}"] += 1
                    warning_examples.setdefault(f"{category} at {where}", message)
                if outcome in FINDING_OUTCOMES:
                    key = finding_key(target, result)
                    entry = findings.setdefault(
                        key,
                        {
                            "key": key,
                            "target": target,
                            "outcome": outcome,
                            "count": 0,
                            "cases": [],
                            "replay": f"python3 -m fuzz --replay {seed}:{record['index']}",
                            "case": record.get("repr"),
                            "result": {k: v for k, v in result.items() if k != "warnings"},
                            "_blob": record.get("blob"),
                        },
                    )
                    entry["count"] += 1
                    if len(entry["cases"]) < 10:
                        entry["cases"].append(f"{seed}:{record['index']}")
            if progress and time.monotonic() - last_report > 30:
                last_report = time.monotonic()
                rate = finished / max(last_report - began, 1e-9)
                found = sum(counts[o] for o in FINDING_OUTCOMES)
                print(
                    f"[fuzz] {finished}/{cases} cases, {rate:.1f}/s, {found} findings, "
                    f"{dict(counts)}",
                    file=sys.stderr,
                    flush=True,
                )
        duration = time.monotonic() - began
        shrunk = 0
        for entry in sorted(findings.values(), key=lambda e: -e["count"]):
            blob = entry.pop("_blob")
            if (
                shrunk >= shrink_findings
                or blob is None
                or entry["outcome"] in ("hang", "harness_error")
            ):
                continue
            shrunk += 1
            case = pickle.loads(blob)
            key = entry["key"]

            def same(candidate: Case, key: str = key, target: str = entry["target"]) -> bool:
                return finding_key(target, pool.run_case(candidate)) == key

            budget = shrink_runs if entry["outcome"] != "crash" else min(shrink_runs, 40)
            small, runs = shrink(case, same, budget)
            entry["shrunk"] = repr(small)
            entry["shrink_runs"] = runs
    finally:
        pool.close()
    for entry in findings.values():
        entry.pop("_blob", None)
    ordered = sorted(
        findings.values(),
        key=lambda e: (
            OUTCOMES.index(e["outcome"]) if e["outcome"] in OUTCOMES else 99,
            -e["count"],
        ),
    )
    return {
        "seed": seed,
        "start": start,
        "cases": finished,
        "targets": sorted(wanted),
        "timeout_s": timeout,
        "workers": workers,
        "duration_s": round(duration, 1),
        "cases_per_s": round(finished / max(duration, 1e-9), 2),
        "commit": commit,
        "versions": versions,
        # Workers restarted after a reinstall import the new build: then the run mixes two.
        "reinstalled_during_run": _installed_at() != versions["rosetree_installed_at"],
        "worker_restarts": pool.restarts,
        "counts": {o: counts.get(o, 0) for o in (*OUTCOMES, "harness_error")},
        "per_target": {
            t: {
                o: per_target[t].get(o, 0)
                for o in (*OUTCOMES, "harness_error")
                if per_target[t].get(o)
            }
            for t in sorted(per_target)
        },
        "seconds_per_target": {t: round(s, 1) for t, s in sorted(seconds.items())},
        "documented_exceptions": {t: dict(c.most_common()) for t, c in sorted(documented.items())},
        "warnings": {t: dict(c.most_common()) for t, c in sorted(warning_counts.items())},
        "warning_messages": warning_examples,
        "findings": ordered,
    }
