"""Shared command line, JSON output and table printing of the experiment scripts."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
FIGURES = ROOT / "docs" / "figures"


def parser(description: str) -> argparse.ArgumentParser:
    """Argument parser with ``--out``, ``--figures`` and ``--quick``."""
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--out", type=Path, default=RESULTS, help=f"results directory (default: {RESULTS})"
    )
    p.add_argument(
        "--figures", type=Path, default=FIGURES, help=f"figures directory (default: {FIGURES})"
    )
    p.add_argument("--quick", action="store_true", help="a small smoke run")
    return p


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` as indented JSON, creating the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: Path) -> None:
    """Save a figure as PNG (fixed metadata, so reruns give the same file) and close it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(fig)
    print(f"wrote {path}")


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print rows as a plain aligned table."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(headers))]
    for i, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
