"""ALFWorld's named protocols (:mod:`envs.protocol`): this project's default and verl-agent's.

Each is an :class:`envs.protocol.Protocol` whose ``settings`` are :class:`~envs.alfworld.env.AlfWorldEnv` kwargs
(``max_steps``; ``win_reward``, the reward of the winning step); ``val_splits`` are the data writer's validation
splits (validation lists every task of each; tables report each split), the env spec's ``valid_unseen`` if none.

There is no ``original`` preset: ``default`` *is* ALFWorld's TextWorld environment as ALFWorld builds it
(``AlfredInfos(AlfredDemangler(PddlEnv))``, its text, "Nothing happens." for a command that is not admissible, won
= the goal holds, 50 steps as ALFWorld's base config), and ALFWorld defines no LLM prompt to differ in.
verl-agent's prompt side (a fresh prompt a turn from :func:`verl_agent_prompt`, the reply projected by
:func:`envs._verl_agent.project_action`, 0.1 off per invalid reply) is written out here and replayed by the
conformance tests, but the agent loop does not apply it: every preset is played through the chat adapter with the
env spec's system prompt (docs/environments.md says what that changes).
"""

from __future__ import annotations

from collections.abc import Sequence

from envs._verl_agent import HISTORY_LENGTH, turn_prompt
from envs.protocol import Protocol

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

PROTOCOLS: dict[str, Protocol] = {
    # envs/alfworld/env.py, envs/alfworld/spec.py, prover_verl/agent/adapters.py
    "default": Protocol(
        summary="this project's: ALFWorld's TextWorld env, the chat adapter, validation on valid_unseen",
        settings={"max_steps": 50, "win_reward": 1.0},  # validation: the env spec's valid_unseen
    ),
    # verl-agent: examples/grpo_trainer/run_alfworld.sh (env.max_steps=50, invalid_action_penalty_coef=0.1),
    # verl/trainer/config/ppo_trainer.yaml (env.history_length=2), env_package/alfworld/envs.py (compute_reward:
    # 10 * won), env_package/alfworld/configs/config_tw.yaml (eval_id/eval_ood data paths)
    "verl_agent": Protocol(
        summary=(
            "verl-agent (GiGPO's codebase) as its example scripts run ALFWorld: reward 10 on a win, validation on "
            "valid_seen (in-distribution) and valid_unseen (out-of-distribution); its prompt side (a fresh prompt "
            "a turn with the last 2 steps, 0.1 penalty per invalid reply) is not applied by the agent loop"
        ),
        settings={"max_steps": 50, "win_reward": 10.0},
        val_splits=("valid_seen", "valid_unseen"),
    ),
}


def verl_agent_prompt(
    task: str,
    observation: str,
    admissible: Sequence[str],
    history: Sequence[tuple[str, str]],
    history_length: int = HISTORY_LENGTH,
) -> str:
    """One turn's prompt as verl-agent's ``AlfWorldEnvironmentManager.build_text_obs`` builds it.

    Args:
        task: The task sentence (after ``Your task is to: `` in the first observation: ``info["task"]``).
        observation: The current observation, as the env returned it.
        admissible: The admissible commands (``help`` is left out, as verl-agent does).
        history: Every (observation, action) pair of the episode so far: the observation each action was taken at.
        history_length: Pairs shown; with none yet (the first turn) or 0, the template without history.
    """
    return turn_prompt(
        VERL_AGENT_TEMPLATE_NO_HISTORY,
        VERL_AGENT_TEMPLATE,
        history,
        history_length,
        task_description=task,
        current_observation=observation,
        admissible_actions="\n ".join(f"'{a}'" for a in admissible if a != "help"),
    )


__all__ = ["PROTOCOLS", "VERL_AGENT_TAIL_CHARS", "verl_agent_prompt"]
