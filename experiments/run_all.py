#!/usr/bin/env python3
"""Run every experiment of the BRT chapter.

Regenerates ``experiments/results`` and ``docs/figures`` (under an hour on two cores;
``--quick`` for a smoke run of each).

The scripts, in order: ``delta_l.py`` (Figure 1.7), ``animals.py`` (Figure 1.8),
``gp_sines.py`` (Figure 1.9) and ``tables.py`` (Tables 1.2–1.4).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ("delta_l.py", "animals.py", "gp_sines.py", "tables.py")


def main() -> int:
    """Run each script with this interpreter and the given arguments; stop at a failure."""
    for script in SCRIPTS:
        start = time.perf_counter()
        print(f"== {script}", flush=True)
        done = subprocess.run([sys.executable, str(HERE / script), *sys.argv[1:]], check=False)
        if done.returncode != 0:
            print(f"{script} failed with exit status {done.returncode}", file=sys.stderr)
            return done.returncode
        print(f"== {script}: {time.perf_counter() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
