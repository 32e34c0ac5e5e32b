"""The commit of the code a benchmark runs, for its results file."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_commit() -> str:
    """``HEAD``'s hash, ``+dirty`` when the code (not the results being written) differs from it; ``unknown``
    outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        # the code that ran; the results being written (runs, the report) are not code and do not make it dirty
        code = ["prover_verl", "envs", "recipes", "benchmarks", ":(exclude)benchmarks/results"]
        dirty = subprocess.run(["git", "status", "--porcelain", "--", *code], cwd=ROOT, capture_output=True,
                               text=True, check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
