"""A short script run in a fresh interpreter: what importing a module or
constructing a client loads, seen where nothing was imported before."""

from __future__ import annotations

import subprocess
import sys


def run_fresh(script: str, timeout_s: float = 60.0) -> str:
    """What ``script`` printed, run with ``python -c``; fails the test if it failed."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout
