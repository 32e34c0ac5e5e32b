"""GRPO's group-normalised outcome advantage, vectorised, and the per-row scale it applied."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def group_outcome_advantage(
    scores: torch.Tensor,
    index: Sequence | np.ndarray,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compute GRPO's outcome advantage per trajectory.

    Matches ``verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage``: within each group (rows sharing an
    ``index`` value) the advantage is ``(score - mean) / (std + epsilon)`` with the unbiased std, or
    ``score - mean`` without std normalisation; a group of one row has mean 0 and std 1.

    Args:
        scores: Outcome score per row, shape ``(bs,)``.
        index: Group id per row (any hashable values), length ``bs``.
        norm_by_std: Divide by the group std (GRPO) or not (Dr.GRPO).
        epsilon: Added to the std.

    Returns:
        ``(advantage, std)``, both ``(bs,)``: ``std`` is the row's group std (1 for a group of one), which
        other advantage terms need to be put on the same scale.
    """
    if scores.dim() != 1:
        raise ValueError(f"scores must be 1-D (bs,), got shape {tuple(scores.shape)}")
    if len(index) != scores.shape[0]:
        raise ValueError(f"index has {len(index)} entries for {scores.shape[0]} scores")
    # Group by equality of the ids themselves, as verl's dict does (no casting that could merge 1 and "1").
    group_of: dict = {}
    group = torch.tensor([group_of.setdefault(uid, len(group_of)) for uid in index], dtype=torch.long)
    group = group.to(scores.device)
    num_groups = len(group_of)
    values = scores.detach().to(torch.float64)

    count = torch.zeros(num_groups, dtype=torch.float64, device=scores.device)
    count.index_add_(0, group, torch.ones_like(values))
    total = torch.zeros_like(count).index_add_(0, group, values)
    mean = total / count
    squared = torch.zeros_like(count).index_add_(0, group, (values - mean[group]) ** 2)
    std = torch.sqrt(squared / (count - 1).clamp(min=1))
    single = count == 1
    mean = torch.where(single, torch.zeros_like(mean), mean)
    std = torch.where(single, torch.ones_like(std), std)

    centred = values - mean[group]
    advantage = centred / (std[group] + epsilon) if norm_by_std else centred
    return advantage.to(scores.dtype), std[group].to(scores.dtype)
