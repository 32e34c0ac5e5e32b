"""The ``gigpo`` advantage estimator registered in verl: episode-level plus anchor-state step-level advantages.

verl 0.9.1 has no GiGPO. The agent loop records, for every policy token, the turns left in its episode and the
key of the environment state its turn acted in (``gigpo_turns_left``, ``gigpo_state``; see
:func:`prover_verl.core.gigpo.turn_fields`); the ``prover_sync`` trainer binds them through
:mod:`prover_verl.credit_channel`, as it binds ProVer's credit, and the math is :mod:`prover_verl.core.gigpo`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est

from prover_verl.config import GiGPOConfig
from prover_verl.core.gigpo import gigpo_advantage
from prover_verl.credit_channel import bound_field

NAME = "gigpo"
TURNS_FIELD = "gigpo_turns_left"
STATE_FIELD = "gigpo_state"
FIELDS = (TURNS_FIELD, STATE_FIELD)


@register_adv_est(NAME)
def compute_gigpo_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    epsilon: float = 1e-6,
    config: Any = None,
    **unused: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """GiGPO advantage: ``A_episode + step_weight * A_step`` on each policy token (``algorithm.gigpo``).

    Args:
        token_level_rewards: ``(bs, response_length)``; the outcome is its row sum.
        response_mask: ``(bs, response_length)``, 1 for policy tokens.
        index: Group id (verl's ``uid``) per row.
        epsilon: Added to the stds.
        config: verl's ``algorithm`` config.

    Returns:
        ``(advantages, returns)``, both ``(bs, response_length)`` and equal, as for GRPO.
    """
    if index is None:
        raise ValueError("adv_estimator=gigpo needs rollout groups: the batch has no 'uid' (index)")
    settings = GiGPOConfig.from_algorithm_config(config)
    device = token_level_rewards.device
    turns_left = bound_field(TURNS_FIELD, NAME, "GiGPO turn record").to(device)
    state = bound_field(STATE_FIELD, NAME, "GiGPO state keys").to(device)
    if turns_left.shape != response_mask.shape:
        shapes = f"{tuple(turns_left.shape)}, response_mask {tuple(response_mask.shape)}"
        raise ValueError(f"{TURNS_FIELD} has shape {shapes}: the fields must be fetched with the same rows")
    # every policy token belongs to a recorded turn (verl's rollout correction may since have dropped some: the
    # steps still count in their anchor groups, their tokens just get no advantage)
    if (response_mask.bool() & (turns_left == 0)).any():
        raise ValueError(f"policy tokens without a recorded turn in {TURNS_FIELD}: fields and mask are misaligned")
    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        advantages, _ = gigpo_advantage(
            scores,
            index,
            turns_left,
            state,
            settings.gamma,
            settings.step_weight,
            norm_by_std=settings.norm_by_std,
            epsilon=epsilon,
        )
        advantages = advantages * response_mask
    return advantages, advantages
