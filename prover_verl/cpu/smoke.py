"""Run a recipe's ``--cpu-smoke`` as a subprocess and read back verl's logged metrics (the smoke tests and
``benchmarks/loop_bench.py`` both drive the CPU loop this way)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from prover_verl.cpu.assets import ASSET_PARTS, asset_key, complete, recipe_env, source_roots, store_assets

# seconds a run's processes get to exit after SIGTERM before they are killed
KILL_GRACE_S = 10.0


def run_smoke(
    recipe: str | os.PathLike,
    smoke_dir: Path,
    steps: int,
    assets: Path | None = None,
    timeout_s: float | None = None,
    overrides: Sequence[str] = (),
    *,
    asset_cache: Path | None = None,
    **variables: str,
) -> Path:
    """Run ``bash recipe --cpu-smoke`` for ``steps`` steps in ``smoke_dir``; returns its log (``run_step<steps>.log``).

    Args:
        recipe: The recipe script.
        smoke_dir: ``SMOKE_DIR`` of the run (model, data, checkpoints, metrics).
        steps: ``SMOKE_STEPS``.
        assets: A smoke dir whose tiny model and data to copy first where ``smoke_dir`` has none
            (recipes/cpu_smoke.sh builds, imitates and lists only what is missing).
        timeout_s: End the run after this many seconds.
        overrides: Hydra overrides after ``--cpu-smoke`` (they win over the recipe's).
        asset_cache: A folder of tiny models and data by :func:`prover_verl.cpu.assets.asset_key`: where
            ``smoke_dir`` has neither, the entry of this run's settings is copied in, or, when there is none yet,
            what the run builds is stored there after it succeeds. Not with ``assets``.
        **variables: Further environment variables (``SMOKE_JUDGE``, ``SMOKE_K``, dump directories, ...).

    Raises:
        subprocess.TimeoutExpired: The run took longer than ``timeout_s`` (its processes are ended).
        RuntimeError: The run exited non-zero (the message holds the log's last lines).
        ValueError: Both ``assets`` and ``asset_cache`` were given.
    """
    if assets is not None and asset_cache is not None:
        raise ValueError("run_smoke takes assets or asset_cache, not both")
    smoke_dir.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        # the recipe's python3 must be this interpreter (a venv need not be activated)
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "SMOKE_DIR": str(smoke_dir),
        "SMOKE_STEPS": str(steps),
        **variables,
    }
    entry = None
    # only a build of this run's own settings is stored: not assets a smoke dir held from before
    if asset_cache is not None and not any((smoke_dir / part).exists() for part in ASSET_PARTS):
        entry = Path(asset_cache) / asset_key(recipe_env(recipe), env, source_roots(recipe))
        assets = entry if complete(entry) else None
    if assets is not None:
        for part in ASSET_PARTS:
            if not (smoke_dir / part).exists():
                shutil.copytree(assets / part, smoke_dir / part)
    log = smoke_dir / f"run_step{steps}.log"
    with open(log, "w") as out:
        # a session of its own: the imitation, verl and its Ray cluster (whose driver leaves the process group) are
        # ended with the run, also when it times out or the test is stopped, instead of loading the machine on
        proc = subprocess.Popen(
            ["bash", str(recipe), "--cpu-smoke", *overrides],
            cwd=smoke_dir,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            # waited for without reaping it, so that the session's id (its pid) cannot be reused before the end
            while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
                if deadline is not None and time.monotonic() > deadline:
                    raise subprocess.TimeoutExpired(proc.args, timeout_s)
                time.sleep(0.2)
        finally:
            end_session(proc.pid)
            proc.wait()
    if proc.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-60:])
        raise RuntimeError(f"{recipe} --cpu-smoke failed (exit {proc.returncode}); last lines of {log}:\n{tail}")
    if entry is not None:
        store_assets(smoke_dir, entry)
    return log


def session_members(sid: int) -> list[int]:
    """The live (not zombie) processes of session ``sid``, read from ``/proc`` (Linux)."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            state, _ppid, _pgrp, session = stat.read_text().rsplit(")", 1)[1].split()[:4]
        except (OSError, IndexError, ValueError):  # the process ended meanwhile
            continue
        if int(session) == sid and state != "Z":
            members.append(int(stat.parent.name))
    return members


def end_session(sid: int, grace_s: float = KILL_GRACE_S) -> None:
    """SIGTERM every process of session ``sid``, then SIGKILL those still there after ``grace_s`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        members = session_members(sid)
        for pid in members:
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while members and time.monotonic() < deadline:
            time.sleep(0.1)
            members = session_members(sid)
        if not members:
            return


def logged_steps(smoke_dir: Path, steps: int) -> dict[int, dict]:
    """Metrics per step from verl's file logger of the run with ``steps`` steps (``metrics_step<steps>.jsonl``)."""
    merged: dict[int, dict] = {}
    for line in (smoke_dir / f"metrics_step{steps}.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            merged.setdefault(row["step"], {}).update(row["data"])
    return merged
