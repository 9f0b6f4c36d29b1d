"""``python3 -m fuzz``: run the fuzzer, or replay one case.

Examples
--------
The long profile, with its report::

    python3 -m fuzz --cases 100000 --seed 0 --out fuzz-report.json

One case again, by its seed and index (from a report)::

    python3 -m fuzz --replay 0:1234
    python3 -m fuzz --replay 0:1234 --in-process   # with the traceback, in this process
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from . import OUTCOMES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="cases to run (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (default 0)")
    parser.add_argument("--start", type=int, default=0, help="first case index (default 0)")
    parser.add_argument("--targets", help="comma-separated target names (default: all)")
    parser.add_argument(
        "--timeout", type=float, default=20.0, help="seconds per case before a hang"
    )
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--no-shrink", action="store_true", help="do not shrink findings")
    parser.add_argument("--replay", metavar="SEED:INDEX", help="run one case and print it")
    parser.add_argument(
        "--in-process", action="store_true", help="with --replay: run here, raising its exception"
    )
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument(
        "--markdown", metavar="REPORT", help="print a report's result tables as Markdown and exit"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    return parser


def _replay(spec: str, in_process: bool, timeout: float) -> int:
    from .runner import run_one
    from .worker import generate, run_case

    seed, index = (int(part) for part in spec.split(":"))
    case = generate(seed, index)
    print(f"case {seed}:{index}: {case!r}")
    if in_process:
        from .targets import TARGETS, resolve

        print(run_case(case))
        TARGETS[case.target].run(**resolve(case.kwargs))  # raises, with its traceback
        return 0
    result = run_one(case, timeout)
    for key, value in result.items():
        print(f"{key}: {value}")
    return 0 if result["outcome"] in ("ok", "documented") else 1


def _summary(report: dict[str, Any]) -> str:
    lines = [
        f"{report['cases']} cases in {report['duration_s']} s ({report['cases_per_s']}/s), "
        f"seed {report['seed']}, commit {report['commit']}",
        "  ".join(f"{o}: {report['counts'][o]}" for o in (*OUTCOMES, "harness_error")),
    ]
    for finding in report["findings"]:
        lines.append(f"- {finding['count']} x {finding['key']}  ({finding['replay']})")
    return "\n".join(lines)


def markdown(report: dict[str, Any]) -> str:
    """The result tables of RELIABILITY.md: totals, then outcomes per target."""
    classes = (*OUTCOMES, "harness_error")
    versions = report["versions"]
    lines = [
        f"`python3 -m fuzz --cases {report['cases']} --seed {report['seed']} "
        f"--workers {report['workers']}` (timeout {report['timeout_s']:g} s per case), "
        f"at commit `{report['commit']}` with the installed rosetree {versions['rosetree']} "
        f"(built {versions.get('rosetree_installed_at')}), "
        f"Python {versions['python']}, NumPy {versions['numpy']}, hypothesis "
        f"{versions['hypothesis']}: {report['cases']} cases in {report['duration_s']:.0f} s "
        f"({report['cases_per_s']:.0f} cases/s), {report['worker_restarts']} worker restarts"
        + (
            "; rosetree was reinstalled during the run."
            if report.get("reinstalled_during_run")
            else "."
        ),
        "",
        "| " + " | ".join(("cases", *classes)) + " |",
        "| " + " | ".join(["---:"] * (len(classes) + 1)) + " |",
        "| "
        + " | ".join(str(v) for v in (report["cases"], *(report["counts"][c] for c in classes)))
        + " |",
        "",
        "| target | " + " | ".join(classes) + " |",
        "| --- | " + " | ".join(["---:"] * len(classes)) + " |",
    ]
    for target, counts in report["per_target"].items():
        row = [str(counts.get(c, 0)) for c in classes]
        lines.append(f"| `{target}` | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python3 -m fuzz``."""
    args = _parser().parse_args(argv)
    if args.markdown:
        with open(args.markdown) as f:
            print(markdown(json.load(f)))
        return 0
    if args.list:
        from .targets import TARGETS

        for name, target in TARGETS.items():
            print(f"{name:28s} weight {target.weight}  {target.run.__doc__}")
        return 0
    if args.replay:
        return _replay(args.replay, args.in_process, args.timeout)
    from .runner import FINDING_OUTCOMES, fuzz

    report = fuzz(
        args.cases,
        seed=args.seed,
        start=args.start,
        targets=args.targets.split(",") if args.targets else None,
        timeout=args.timeout,
        workers=args.workers,
        shrink_findings=0 if args.no_shrink else 20,
        progress=not args.quiet,
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1, default=str)
    print(_summary(report))
    return 1 if any(report["counts"][o] for o in FINDING_OUTCOMES) else 0


if __name__ == "__main__":
    sys.exit(main())
