"""ALFWorld's named protocols: every choice that moves a score, per harness (``AlfWorldEnv(protocol=NAME)``).

``PROTOCOLS`` maps a name to its settings, a dict of four parts:

* ``env``: what :class:`~envs.alfworld.env.AlfWorldEnv` applies itself (``max_steps``; ``win_reward``, the
  reward of the winning step);
* ``prompt``: how the policy sees a turn and how its reply becomes an action (applied by the agent loop's prompt
  side): ``style`` ``"chat"`` (this project's adapter: the env spec's system prompt, the whole dialogue, each
  observation followed by ``Admissible actions: ...``, the action is the last ``<action>...</action>``, else the
  reply's last line) or ``"verl_agent"`` (one fresh prompt a turn from :func:`verl_agent_prompt`, the reply
  projected by :func:`envs._verl_agent.project_action`), ``history_length``, ``invalid_action_penalty`` (subtracted
  per invalid reply by the trainer, verl-agent's ``invalid_action_penalty_coef``);
* ``data``: ``train_split`` and ``val_splits`` (validation lists every task of each; tables report each split);
* ``description`` and ``source``.

There is no ``original`` preset: ``default`` *is* ALFWorld's TextWorld environment as ALFWorld builds it
(``AlfredInfos(AlfredDemangler(PddlEnv))``, its text, "Nothing happens." for a command that is not admissible, won
= the goal holds, 50 steps as ALFWorld's base config), and ALFWorld defines no LLM prompt to differ in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from envs._verl_agent import history_text

# verl-agent's ALFWorld templates (agent_system/environments/prompts/alfworld.py), as its GiGPO runs used them
# (typo "observaitons" included: the prompt is part of the protocol).
VERL_AGENT_TEMPLATE_NO_HISTORY = """
You are an expert agent operating in the ALFRED Embodied Environment.
Your current observation is: {current_observation}
Your admissible actions of the current situation are: [{admissible_actions}].

Now it's your turn to take an action.
You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501 (the trailing spaces are verl-agent's)

VERL_AGENT_TEMPLATE = """
You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {task_description}
Prior to this step, you have already taken {step_count} step(s). Below are the most recent {history_length} observaitons and the corresponding actions you took: {action_history}
You are now at step {current_step} and your current observation is: {current_observation}
Your admissible actions of the current situation are: [{admissible_actions}].

Now it's your turn to take an action.
You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501

VERL_AGENT_TAIL_CHARS = 30  # an untagged reply becomes its last 30 characters (an invalid action)

PROTOCOLS: dict[str, dict[str, Any]] = {
    "default": {
        "description": "This project's setting: ALFWorld's TextWorld env, the chat adapter, validation on "
        "valid_unseen.",
        "source": "envs/alfworld/env.py, envs/alfworld/spec.py, prover_verl/agent/adapters.py",
        "env": {"max_steps": 50, "win_reward": 1.0},
        "prompt": {"style": "chat", "history_length": None, "invalid_action_penalty": 0.0},
        "data": {"train_split": "train", "val_splits": ("valid_unseen",)},
    },
    "verl_agent": {
        "description": (
            "verl-agent (GiGPO's codebase) as its example scripts run ALFWorld: a fresh prompt a turn with the last "
            "2 steps, reward 10 on a win, 0.1 penalty per invalid reply, validation on valid_seen (in-distribution) "
            "and valid_unseen (out-of-distribution)."
        ),
        "source": (
            "verl-agent: examples/grpo_trainer/run_alfworld.sh (env.max_steps=50, invalid_action_penalty_coef=0.1), "
            "verl/trainer/config/ppo_trainer.yaml (env.history_length=2), env_package/alfworld/envs.py "
            "(compute_reward: 10 * won), env_package/alfworld/configs/config_tw.yaml (eval_id/eval_ood data paths)"
        ),
        "env": {"max_steps": 50, "win_reward": 10.0},
        "prompt": {"style": "verl_agent", "history_length": 2, "invalid_action_penalty": 0.1},
        "data": {"train_split": "train", "val_splits": ("valid_seen", "valid_unseen")},
    },
}

DEFAULT = "default"


def resolve(name: str) -> dict[str, Any]:
    """The settings of protocol ``name``.

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    if name not in PROTOCOLS:
        raise ValueError(f"unknown ALFWorld protocol {name!r}; known: {', '.join(sorted(PROTOCOLS))}")
    return PROTOCOLS[name]


def verl_agent_prompt(
    task: str, observation: str, admissible: Sequence[str], history: Sequence[tuple[str, str]], history_length: int = 2
) -> str:
    """One turn's prompt as verl-agent's ``AlfWorldEnvironmentManager.build_text_obs`` builds it.

    Args:
        task: The task sentence (after ``Your task is to: `` in the first observation: ``info["task"]``).
        observation: The current observation, as the env returned it.
        admissible: The admissible commands (``help`` is left out, as verl-agent does).
        history: Every (observation, action) pair of the episode so far: the observation each action was taken at.
        history_length: Pairs shown; with none yet (the first turn) or 0, the template without history.
    """
    actions = "\n ".join(f"'{a}'" for a in admissible if a != "help")
    if not history or history_length <= 0:
        return VERL_AGENT_TEMPLATE_NO_HISTORY.format(current_observation=observation, admissible_actions=actions)
    context, shown = history_text(history, history_length)
    return VERL_AGENT_TEMPLATE.format(
        task_description=task,
        step_count=len(history),
        history_length=shown,
        action_history=context,
        current_step=len(history) + 1,
        current_observation=observation,
        admissible_actions=actions,
    )


__all__ = ["DEFAULT", "PROTOCOLS", "VERL_AGENT_TAIL_CHARS", "resolve", "verl_agent_prompt"]
