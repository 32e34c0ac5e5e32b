"""The validation-episode log: written by the agent loop (``env.eval_log_dir``), read by :mod:`prover_verl.eval.tables`.

One JSON line per episode in ``<log_dir>/episodes-<pid>.jsonl`` (one file per process, so lines never interleave).
"""

from __future__ import annotations

import json
import os
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
    with open(os.path.join(log_dir, f"episodes-{os.getpid()}.jsonl"), "a") as f:
        f.write(json.dumps(record) + "\n")
