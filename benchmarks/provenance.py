"""What a benchmark's committed results file says of its run: the command and the commit of the code."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
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


def command_line(script: str, argv: Sequence[str] | None = None) -> str:
    """``python <script> <argv>`` (``sys.argv``'s when None) with each machine path (a word starting with ``/``) as
    ``<path>``: machine paths stay out of committed files."""
    words = sys.argv[1:] if argv is None else argv
    return " ".join(["python", script, *(w if not w.startswith("/") else "<path>" for w in words)])
