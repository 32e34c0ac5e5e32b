"""WebShop's named protocols (:mod:`envs.protocol`): this project's default, the original's and verl-agent's.

Each is an :class:`envs.protocol.Protocol` whose ``settings`` are :class:`~envs.webshop.env.WebShopEnv` kwargs:
``split_scheme`` (which goals each split holds, :func:`envs.webshop.env.split_goal_ids`), ``human_goals`` (human
instructions, else synthetic ones), ``use_small`` (the 1,000-product files ``items_shuffle_1000.json``/
``items_ins_v2_1000.json`` of a data folder), ``max_steps``, ``pages`` (``"ours"``: this project's page text, search
only on the search page, ``Next >`` only when there is a next page, an invalid action shows the page under an
``Invalid action: ...`` line; ``"original"``: the original text mode, pages as its templates' visible text joined
by `` [SEP] ``, ``search[...]`` valid on every page, ``Next >`` always shown, an action parsed by the original's
``(.+)\\[(.+)\\]``, an invalid one leaves the page as it was, without a word) and ``win_reward`` (None: the reward is
the purchase score in [0, 1]; a number: that reward when the score is 1, else 0, as verl-agent). Every preset
trains on ``train`` and validates on ``test`` (the env spec's splits; which goals they hold is the split scheme's).

Every preset scores a purchase with the original reward (``envs/webshop/reward.py``); success is a score of 1.
verl-agent's prompt side (a fresh prompt a turn from :func:`verl_agent_prompt`, the reply projected by
:func:`envs._verl_agent.project_action`, 0.1 off per invalid reply) is written out here and replayed by the
conformance tests, but the agent loop does not apply it: every preset is played through the chat adapter with the
env spec's system prompt (docs/environments.md says what that changes).
"""

from __future__ import annotations

from collections.abc import Sequence

from envs._verl_agent import HISTORY_LENGTH, turn_prompt
from envs.protocol import Protocol

# verl-agent's WebShop templates (agent_system/environments/prompts/webshop.py), character for character: the
# non-breaking hyphen of "e‑commerce" and the trailing spaces are part of the prompt.
VERL_AGENT_TEMPLATE_NO_HISTORY = """
You are an expert autonomous agent operating in the WebShop e‑commerce environment. 
Your task is to: {task_description}.
Your current observation is: {current_observation}.
Your admissible actions of the current situation are: 
[
{available_actions}
].

Now it's your turn to take one action for the current step.
You should first reason step-by-step about the current situation, then think carefully which admissible action best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501, RUF001

VERL_AGENT_TEMPLATE = """
You are an expert autonomous agent operating in the WebShop e‑commerce environment.
Your task is to: {task_description}.
Prior to this step, you have already taken {step_count} step(s). Below are the most recent {history_length} observations and the corresponding actions you took: {action_history}
You are now at step {current_step} and your current observation is: {current_observation}.
Your admissible actions of the current situation are: 
[
{available_actions}
].

Now it's your turn to take one action for the current step.
You should first reason step-by-step about the current situation, then think carefully which admissible action best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags. 
Once you've finished your reasoning, you should choose an admissible action for current step and present it within <action> </action> tags.
"""  # noqa: W291, E501, RUF001

VERL_AGENT_TAIL_CHARS = 20  # an untagged reply becomes its last 20 characters (an invalid action)
VERL_AGENT_MAX_PROMPT_CHARS = 13000  # a longer prompt with history is rebuilt without it

PROTOCOLS: dict[str, Protocol] = {
    # envs/webshop/env.py, envs/webshop/spec.py, prover_verl/agent/adapters.py
    "default": Protocol(
        summary=(
            "this project's: human goals, splits by the original bounds above 1,500 goals (else 20/10/70 %), this "
            "project's page text, the chat adapter, reward = purchase score"
        ),
        settings={
            "split_scheme": "default",
            "human_goals": True,
            "use_small": False,
            "max_steps": 15,
            "pages": "ours",
            "win_reward": None,
        },
    ),
    # WebShop: web_agent_site/envs/web_agent_text_env.py (step, get_available_actions, text mode),
    # web_agent_site/engine/engine.py (parse_action), web_agent_site/templates/*.html, baseline_models/env.py
    # (goal_idxs per split), baseline_models/train_rl.py (--step_limit 100)
    "original": Protocol(
        summary=(
            "princeton-nlp/WebShop's text environment and its baselines' protocol: human goals, test = goals "
            "[0, 500), eval = [500, 1500), train = the rest, the [SEP] text mode, 100 steps (train_rl.py's "
            "step_limit); it defines no LLM prompt: the chat adapter's is used"
        ),
        settings={
            "split_scheme": "original",
            "human_goals": True,
            "use_small": False,
            "max_steps": 100,
            "pages": "original",
            "win_reward": None,
        },
    ),
    # verl-agent: verl/trainer/config/ppo_trainer.yaml (env.webshop.use_small=True, human_goals=False,
    # env.history_length=2), examples/grpo_trainer/run_webshop.sh (env.max_steps=15, invalid_action_penalty_coef=0.1),
    # env_package/webshop/envs.py (goal_idxs, reward 10 when won), environments/env_manager.py
    # (WebshopEnvironmentManager), env_package/webshop/projection.py
    "verl_agent": Protocol(
        summary=(
            "verl-agent (GiGPO's codebase) as its example scripts run WebShop: synthetic goals of the 1,000-product "
            "files, train = goals [500, n), test = [0, 500), the original text mode, 15 steps, reward 10 on a "
            "purchase scoring 1 (else 0); its prompt side (a fresh prompt a turn with the last 2 steps, 0.1 penalty "
            "per invalid reply) is not applied by the agent loop"
        ),
        settings={
            "split_scheme": "verl_agent",
            "human_goals": False,
            "use_small": True,
            "max_steps": 15,
            "pages": "original",
            "win_reward": 10.0,
        },
    ),
}


def verl_agent_task(first_observation: str) -> str:
    """The instruction in the first (search page) observation of the original text mode, as verl-agent reads it."""
    parts = first_observation.split(" [SEP] ")
    if len(parts) < 3 or parts[1] != "Instruction:":
        raise ValueError(f"not a WebShop search page in the original text mode: {first_observation[:200]!r}")
    return parts[2]


def verl_agent_observation(observation: str, task: str) -> str:
    """An original text-mode page as verl-agent shows it: the parts after the instruction, each in quotes."""
    parts = observation.split(" [SEP] ")
    if task not in parts:
        return observation
    return " [SEP] ".join(f"'{p}'" for p in parts[parts.index(task) + 1 :])


def verl_agent_prompt(
    task: str,
    observation: str,
    admissible: Sequence[str],
    history: Sequence[tuple[str, str]],
    history_length: int = HISTORY_LENGTH,
) -> str:
    """One turn's prompt as verl-agent's ``WebshopEnvironmentManager.build_text_obs`` builds it.

    Args:
        task: The instruction (:func:`verl_agent_task`).
        observation: The current page as verl-agent shows it (:func:`verl_agent_observation`).
        admissible: ``info["admissible_actions"]`` of an env with ``pages="original"`` (``search[<your query>]``
            where there is a search bar, then ``click[...]`` per clickable).
        history: Every (shown observation, projected action) pair of the episode so far.
        history_length: Pairs shown; with none yet (the first turn) or 0, the template without history.
    """
    return turn_prompt(
        VERL_AGENT_TEMPLATE_NO_HISTORY,
        VERL_AGENT_TEMPLATE,
        history,
        history_length,
        VERL_AGENT_MAX_PROMPT_CHARS,
        task_description=task,
        current_observation=observation,
        available_actions="\n".join(f"'{a}'," for a in admissible),
    )


__all__ = [
    "PROTOCOLS",
    "VERL_AGENT_TAIL_CHARS",
    "verl_agent_observation",
    "verl_agent_prompt",
    "verl_agent_task",
]
