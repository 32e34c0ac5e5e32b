"""How each environment is shown to the LLM and how its reply becomes an environment action.

The system prompt and the action format of each env are part of its :class:`envs.EnvSpec` (``envs/<name>/spec.py``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import envs

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class PromptAdapter:
    """Prompting for one environment family.

    Attributes:
        env_name: The environment family.
        system: System prompt.
        tagged_action: The action is the last ``<action>...</action>`` of the reply (else the whole reply,
            thoughts removed, goes to the environment, which parses its own tags).
        show_admissible: List the admissible actions after each observation.
        max_obs_chars: Observations are cut to this many characters (keeps the context bounded).
    """

    env_name: str
    system: str
    tagged_action: bool
    show_admissible: bool
    max_obs_chars: int = 2000

    def observation_message(self, observation: str, info: dict[str, Any]) -> str:
        """The user message carrying an observation (and the admissible actions, where shown)."""
        text = observation.strip()
        if len(text) > self.max_obs_chars:
            text = text[: self.max_obs_chars] + " ...[truncated]"
        actions = info.get("admissible_actions")
        if self.show_admissible and actions:
            text += "\n\nAdmissible actions: " + ", ".join(actions)
        return text

    def parse_action(self, reply: str) -> str:
        """The environment action in an LLM reply; an unusable reply is passed on for the env's own feedback."""
        body = _THINK.sub("", reply).strip()
        if not self.tagged_action:
            return body
        tagged = _ACTION.findall(body)
        if tagged:
            return tagged[-1].strip()
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        return lines[-1][:200] if lines else ""


def make_adapter(env_name: str, max_obs_chars: int = 2000) -> PromptAdapter:
    """Return the adapter of a registered environment family, from its :class:`envs.EnvSpec`."""
    spec = envs.spec(env_name)
    if not spec.system_prompt:
        raise ValueError(f"no prompt adapter for environment '{env_name}': its EnvSpec has no system_prompt")
    return PromptAdapter(
        env_name,
        spec.system_prompt,
        spec.tagged_action,
        show_admissible=spec.tagged_action,
        max_obs_chars=max_obs_chars,
    )
