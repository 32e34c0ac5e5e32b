"""How each environment is shown to the LLM and how its reply becomes an environment action."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_ACTION = re.compile(r"<action>(.*?)</action>", re.DOTALL)

_SYSTEMS = {
    "alfworld": (
        "You are an agent in a text-based household environment (ALFWorld). Each turn you see what happened and "
        "the admissible actions. Think briefly, then reply with exactly one action inside <action></action>, "
        "copied from the admissible actions."
    ),
    "webshop": (
        "You are a shopping agent in a text-based web shop (WebShop). Each turn you see the page and the valid "
        "actions: search[your query] on a search page, or click[an item in brackets]. Think briefly, then reply "
        "with exactly one action inside <action></action>."
    ),
    "searchqa": (
        "Answer the question. You may search a knowledge base as many times as you need: write "
        "<search>your query</search> and the results come back between <information> and </information>. When "
        "you know the answer, write <answer>a short answer</answer>. Think before each search or answer."
    ),
}


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


_TAGGED = {"alfworld": True, "webshop": True, "searchqa": False}


def register_adapter(env_name: str, system: str, tagged_action: bool = True) -> None:
    """Register the prompting of a new environment family (see :class:`PromptAdapter`)."""
    _SYSTEMS[env_name] = system
    _TAGGED[env_name] = tagged_action


def make_adapter(env_name: str, max_obs_chars: int = 2000) -> PromptAdapter:
    """Return the adapter of a registered environment family."""
    if env_name not in _SYSTEMS:
        raise ValueError(f"no prompt adapter for environment '{env_name}'; known: {sorted(_SYSTEMS)}")
    tagged = _TAGGED[env_name]
    return PromptAdapter(env_name, _SYSTEMS[env_name], tagged, show_admissible=tagged, max_obs_chars=max_obs_chars)
