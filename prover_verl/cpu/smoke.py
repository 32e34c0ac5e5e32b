"""Run a recipe's ``--cpu-smoke`` as a subprocess and read back verl's logged metrics (the smoke tests and
``benchmarks/loop_bench.py`` both drive the CPU loop this way)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from prover_verl.metrics import read_logged_metrics


def run_smoke(
    recipe: str | os.PathLike,
    smoke_dir: Path,
    steps: int,
    assets: Path | None = None,
    timeout_s: float | None = None,
    overrides: Sequence[str] = (),
    **variables: str,
) -> Path:
    """Run ``bash recipe --cpu-smoke`` for ``steps`` steps in ``smoke_dir``; returns its log (``run_step<steps>.log``).

    Args:
        recipe: The recipe script.
        smoke_dir: ``SMOKE_DIR`` of the run (model, data, checkpoints, metrics).
        steps: ``SMOKE_STEPS``.
        assets: A smoke dir whose tiny model and data to copy first where ``smoke_dir`` has none
            (recipes/cpu_smoke.sh builds, imitates and lists only what is missing).
        timeout_s: Kill the run after this many seconds (``subprocess.TimeoutExpired``).
        overrides: Hydra overrides after ``--cpu-smoke`` (they win over the recipe's).
        **variables: Further environment variables (``SMOKE_JUDGE``, ``SMOKE_K``, dump directories, ...).

    Raises:
        RuntimeError: The run exited non-zero (the message holds the log's last lines).
    """
    smoke_dir.mkdir(parents=True, exist_ok=True)
    if assets is not None:
        for part in ("model", "data"):
            if not (smoke_dir / part).exists():
                shutil.copytree(assets / part, smoke_dir / part)
    env = {
        **os.environ,
        # the recipe's python3 must be this interpreter (a venv need not be activated)
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SMOKE_DIR": str(smoke_dir),
        "SMOKE_STEPS": str(steps),
        **variables,
    }
    log = smoke_dir / f"run_step{steps}.log"
    with open(log, "w") as out:
        proc = subprocess.run(
            ["bash", str(recipe), "--cpu-smoke", *overrides],
            cwd=smoke_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
        )
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-60:])
        raise RuntimeError(f"{recipe} --cpu-smoke failed (exit {proc.returncode}); last lines of {log}:\n{tail}")
    return log


def logged_steps(smoke_dir: Path, steps: int) -> dict[int, dict]:
    """Metrics per step from verl's file logger of the run with ``steps`` steps (``metrics_step<steps>.jsonl``)."""
    return read_logged_metrics(smoke_dir / f"metrics_step{steps}.jsonl")
