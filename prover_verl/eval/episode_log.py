"""The validation-episode log: written by the agent loop (``env.eval_log_dir``), read by :mod:`prover_verl.eval.tables`.

One JSON line per episode in ``<log_dir>/episodes-<host>-<pid>.jsonl``: one file per process, so lines never
interleave, named by host too, since processes of different nodes can share a pid and, on shared storage, a folder.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping
from typing import Any


def log_episode(
    log_dir: str,
    *,
    step: int,
    env: str,
    extra: Mapping[str, Any],
    outcome: Mapping[str, float],
    reward: float,
    turns: int,
    stop: str | None,
) -> None:
    """Append one validation episode to this process's log file.

    Args:
        log_dir: The log folder (created).
        step: The training step it was validated at.
        env: The environment's name.
        extra: The data row's ``extra_info`` (``task_id``, ``category``, ``split``).
        outcome: The episode's numeric outcomes (``won``, ``env_steps`` and the env's own scores).
        reward: Its final reward.
        turns: Policy turns it took.
        stop: Why it ended (``terminated``, ``truncated``, ``max_turns``, ``max_tokens``).
    """
    record = {
        **outcome,  # first: the env's own keys (its "step" is a turn count) must not win
        "step": int(step),
        "env": env,
        "task_id": str(extra.get("task_id")),
        "category": extra.get("category"),
        "split": extra.get("split"),
        "reward": reward,
        "turns": turns,
        "stop": stop,
    }
    os.makedirs(log_dir, exist_ok=True)
    line = (json.dumps(record) + "\n").encode()
    # one write of the whole line to a file opened for appending: a record is never split by a buffer flush
    fd = os.open(os.path.join(log_dir, log_file_name()), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def log_file_name() -> str:
    """This process's log file: ``episodes-<host>-<pid>.jsonl`` (the host name reduced to ``[A-Za-z0-9._-]``)."""
    host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "host"
    return f"episodes-{host}-{os.getpid()}.jsonl"
