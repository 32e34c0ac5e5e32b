"""How each environment is shown to the LLM and how its reply becomes an environment action.

The system prompt and the action format of each env are part of its :class:`envs.EnvSpec` (``envs/<name>/spec.py``);
an env's protocol (:mod:`envs.protocol`, selected by its ``protocol`` kwarg) may replace the system prompt, add
stop strings and keep thoughts in the reply. Replies are parsed in linear time (:mod:`envs.tags`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import envs
from envs import protocol, tags


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
        stop: Strings that end a generation, kept in the reply (the protocol's); empty: none.
        strip_thoughts: ``<think>...</think>`` blocks are removed before the reply is parsed.
        strip_observations: Observations lose their surrounding whitespace (else they are sent verbatim).
        inline_observations: Observations continue the assistant's turn as plain text (Search-R1's layout), not
            user turns of the chat template.

    An empty ``system`` means no system message.
    """

    env_name: str
    system: str
    tagged_action: bool
    show_admissible: bool
    max_obs_chars: int = 2000
    stop: tuple[str, ...] = ()
    strip_thoughts: bool = True
    strip_observations: bool = True
    inline_observations: bool = False

    def sampling_params(self) -> dict[str, Any]:
        """What the protocol adds to each generation's sampling params (vLLM's ``stop`` strings, kept in the output)."""
        return {"stop": list(self.stop), "include_stop_str_in_output": True} if self.stop else {}

    def initial_messages(self, observation: str, info: dict[str, Any]) -> list[dict[str, str]]:
        """The first prompt: the system message (none if ``system`` is empty) and the first observation."""
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": self.observation_message(observation, info)}]

    def observation_message(self, observation: str, info: dict[str, Any]) -> str:
        """The user message carrying an observation (and the admissible actions, where shown)."""
        text = observation.strip() if self.strip_observations else observation
        if len(text) > self.max_obs_chars:
            text = text[: self.max_obs_chars] + " ...[truncated]"
        actions = info.get("admissible_actions")
        if self.show_admissible and actions:
            text += "\n\nAdmissible actions: " + ", ".join(actions)
        return text

    def parse_action(self, reply: str) -> str:
        """The environment action in an LLM reply; an unusable reply is passed on for the env's own feedback."""
        body = (tags.remove(reply, "think") if self.strip_thoughts else reply).strip()
        if not self.tagged_action:
            return body
        last = None
        for last in tags.scan(body, ("action",)):  # noqa: B007 - the last block is the action
            pass
        if last is not None:
            return last.content.strip()
        lines = [line.strip() for line in body.splitlines() if line.strip()]
        return lines[-1][:200] if lines else ""


def make_adapter(
    env_name: str, max_obs_chars: int = 2000, env_kwargs: Mapping[str, Any] | None = None
) -> PromptAdapter:
    """Return the adapter of a registered environment family, from its :class:`envs.EnvSpec` and the protocol
    its ``env_kwargs`` select (``{"protocol": ...}``; none: the env's default).

    Raises:
        ValueError: the spec has no system prompt, or the protocol is unknown (the message names the known ones).
    """
    spec = envs.spec(env_name)
    if not spec.system_prompt:
        raise ValueError(f"no prompt adapter for environment '{env_name}': its EnvSpec has no system_prompt")
    chosen = protocol.selected(env_name, env_kwargs)
    system = spec.system_prompt if chosen is None or chosen.system_prompt is None else chosen.system_prompt
    return PromptAdapter(
        env_name,
        system,
        spec.tagged_action,
        show_admissible=spec.tagged_action,
        max_obs_chars=max_obs_chars,
        stop=chosen.stop if chosen is not None else (),
        strip_thoughts=chosen.strip_thoughts if chosen is not None else True,
        strip_observations=chosen.strip_observations if chosen is not None else True,
        inline_observations=chosen.inline_observations if chosen is not None else False,
    )
