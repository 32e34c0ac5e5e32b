"""verl-agent's prompt-side conventions shared by its WebShop and ALFWorld protocols (``envs/<env>/protocol.py``).

Written from reading verl-agent (``agent_system/environments/env_manager.py``, ``agent_system/memory/memory.py``,
``env_package/{webshop,alfworld}/projection.py``); no code copied. verl-agent builds every turn's prompt afresh
from a template: the task, the last ``history_length`` (observation, action) pairs, the current observation and
the admissible actions; and it "projects" the reply to an env action with a validity flag that the trainer turns
into a penalty (``invalid_action_penalty_coef``, 0.1 in its example scripts).

This project's agent loop continues one conversation per episode and does not apply these (docs/environments.md,
"Protocols"); they define the ``verl_agent`` protocols' prompt side and the conformance tests replay them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_CJK = re.compile(r"[\u4e00-\u9fff]")

HISTORY_LENGTH = 2  # verl/trainer/config/ppo_trainer.yaml: env.history_length
INVALID_ACTION_PENALTY = 0.1  # examples/grpo_trainer/run_{webshop,alfworld}.sh: invalid_action_penalty_coef


def project_action(reply: str, tail_chars: int) -> tuple[str, bool]:
    """The env action in a reply and whether verl-agent counts it valid.

    The reply is lower-cased; the action is what lies between the first ``<action>`` and the first ``</action>``
    (stripped; empty when the closing tag comes first); without both tags the action is the reply's last
    ``tail_chars`` characters (20 for WebShop, 30 for ALFWorld) and invalid. A reply without both ``<think>`` and
    ``</think>``, or with a CJK ideograph, is invalid too. The env is stepped with the action either way.
    Linear time in the reply (``str.find`` only).
    """
    lowered = reply.lower()
    start, end = lowered.find("<action>"), lowered.find("</action>")
    if start == -1 or end == -1:
        return lowered[-tail_chars:], False
    action = lowered[start + len("<action>") : end].strip()
    valid = "<think>" in reply and "</think>" in reply and _CJK.search(reply) is None
    return action, valid


def history_text(history: Sequence[tuple[str, str]], history_length: int) -> tuple[str, int]:
    """The last ``history_length`` (observation, action) pairs as verl-agent's memory shows them, and how many.

    ``history`` holds every pair of the episode so far; a pair is numbered by its step (1-based):
    ``[Observation 3: '<obs>', Action 3: '<action>']``, one per line.
    """
    recent = list(history[-history_length:]) if history_length > 0 else []
    first = len(history) - len(recent) + 1
    lines = [f"[Observation {first + i}: '{obs}', Action {first + i}: '{act}']" for i, (obs, act) in enumerate(recent)]
    return "\n".join(lines), len(recent)


def turn_prompt(
    no_history: str,
    with_history: str,
    history: Sequence[tuple[str, str]],
    history_length: int = HISTORY_LENGTH,
    max_chars: int | None = None,
    **fields: str,
) -> str:
    """One turn's prompt as verl-agent's env managers build it (``build_text_obs``).

    Args:
        no_history: The template of the first turn (or of ``history_length`` 0), filled with ``fields``.
        with_history: The template of later turns, filled with ``fields`` and ``step_count``, ``history_length``
            (pairs shown), ``action_history`` (:func:`history_text`) and ``current_step``.
        history: Every (observation, action) pair of the episode so far.
        history_length: Pairs shown.
        max_chars: A prompt with history longer than this is replaced by the one without (WebShop's 13,000).
        **fields: The env's own fields (task, observation, admissible actions); a template ignores the ones it
            does not name.
    """
    short = no_history.format(**fields)
    if not history or history_length <= 0:
        return short
    context, shown = history_text(history, history_length)
    prompt = with_history.format(
        step_count=len(history),
        history_length=shown,
        action_history=context,
        current_step=len(history) + 1,
        **fields,
    )
    return short if max_chars is not None and len(prompt) > max_chars else prompt


__all__ = ["HISTORY_LENGTH", "INVALID_ACTION_PENALTY", "history_text", "project_action", "turn_prompt"]
