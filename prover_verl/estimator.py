"""The ``prover`` advantage estimator registered in verl: GRPO plus verified segment credit."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est

from prover_verl.config import ProverConfig
from prover_verl.core import group_outcome_advantage, merge_credit
from prover_verl.credit_channel import CREDIT_FIELD, bound_credit, check_credit

NAME = "prover"


@register_adv_est(NAME)
def compute_prover_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    epsilon: float = 1e-6,
    config: Any = None,
    **unused: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """ProVer advantage: GRPO's outcome advantage plus ``coef`` times the verified credit of each token.

    The credit is the batch's ``prover_credit`` field, bound by the ProVer trainer (see
    :mod:`prover_verl.credit_channel`): per token, the verified ``success_rate(after) - success_rate(before)``
    of the segment covering it, zero elsewhere. It is put on the GRPO scale of its row (divided by the group's
    std when ``algorithm.norm_adv_by_std_in_grpo`` is true) and multiplied by ``algorithm.prover.coef``.

    Args:
        token_level_rewards: ``(bs, response_length)``; the outcome is its row sum.
        response_mask: ``(bs, response_length)``, 1 for policy tokens.
        index: Group id (verl's ``uid``) per row.
        epsilon: Added to the group std.
        config: verl's ``algorithm`` config.

    Returns:
        ``(advantages, returns)``, both ``(bs, response_length)`` and equal, as for GRPO.
    """
    if index is None:
        raise ValueError("adv_estimator=prover needs rollout groups: the batch has no 'uid' (index)")
    settings = ProverConfig.from_algorithm_config(config)
    norm_by_std = bool(config.get("norm_adv_by_std_in_grpo", True)) if config is not None else True
    credit = bound_credit().to(token_level_rewards.device)
    # The trainer checked the credit against the agent loop's mask. The mask here may have lost tokens since
    # (verl's rollout-correction rejection sampling drops some before the advantage): they get no credit.
    check_credit(credit, response_mask, policy_tokens_only=False)
    credit = credit * response_mask

    with torch.no_grad():
        scores = token_level_rewards.sum(dim=-1)
        advantage, std = group_outcome_advantage(scores, index, norm_by_std=norm_by_std, epsilon=epsilon)
        credited = credit.sum(dim=-1) > 0
        if (credited & (std == 0)).any():
            # Only groups holding both a success and a failure are verified; a uniform group with credit means
            # the credit was attached to the wrong rows (and 1 / eps would blow it up).
            raise ValueError(f"{CREDIT_FIELD} credits a row whose group has uniform outcomes")
        scale = 1.0 / (std + epsilon) if norm_by_std else None
        token_advantage = advantage.unsqueeze(-1) * response_mask
        merged = merge_credit(token_advantage, credit, response_mask, settings.coef, scale)
    return merged, merged
