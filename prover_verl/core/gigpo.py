"""GiGPO's advantage (Feng et al., 2025, "Group-in-Group Policy Optimization for LLM Agent Training").

Two levels of relative advantage, both within a rollout group (rows sharing an ``index``):

* **episode**: GRPO's ``(R(tau_i) - mean_j R(tau_j)) / F``, ``F`` the group std (or 1 without std normalisation);
* **step**: an *anchor state* is an environment state that several steps of the group acted in (the same task
  reached the same state along different or equal paths). Each such step ``(i, t)`` has the discounted return
  ``R_t = sum_k gamma^k r_{t+k}``; its step advantage is ``(R_t - mean) / F`` over the steps of its anchor group.
  A state reached by one step only has no peer to compare with: its step advantage is 0, so with no repeated
  state GiGPO is GRPO.

A policy token of step ``(i, t)`` gets ``A_episode(i) + step_weight * A_step(i, t)``.

The environments here reward only the end of an episode (the outcome score is the row's reward), so
``R_t = gamma^(T - 1 - t) * R`` with ``T`` the row's number of turns: the batch carries, per policy token, the
turns left (``T - t``, 0 off policy tokens) and the state key of its turn.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from prover_verl.core.grpo import group_outcome_advantage


def turn_fields(
    turn_spans: Sequence[tuple[int, int]], state_keys: Sequence[int], length: int
) -> tuple[list[int], list[int]]:
    """Per-token ``(turns_left, state_key)`` of one trajectory, for its first ``length`` response tokens.

    Args:
        turn_spans: ``[start, end)`` of the policy tokens of each turn.
        state_keys: Non-zero key of the state each turn acted in (one per turn).
        length: Response tokens kept in the batch (the tail past it is dropped).

    Returns:
        Two lists of ``length`` ints: ``T - t`` and the key on the tokens of turn ``t``, 0 elsewhere.
    """
    if len(state_keys) != len(turn_spans):
        raise ValueError(f"{len(state_keys)} state keys for {len(turn_spans)} turns")
    if any(key == 0 for key in state_keys):
        raise ValueError("state key 0 is reserved for tokens outside a turn")
    turns_left, keys = [0] * length, [0] * length
    num_turns = len(turn_spans)
    for t, ((start, end), key) in enumerate(zip(turn_spans, state_keys, strict=True)):
        for i in range(start, min(end, length)):
            turns_left[i], keys[i] = num_turns - t, key
    return turns_left, keys


def anchor_step_advantage(
    returns: torch.Tensor,
    index: Sequence | np.ndarray,
    state_keys: Sequence,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-level relative advantage of each step over the steps of its anchor state.

    Args:
        returns: ``(steps,)`` discounted return of each step.
        index: Rollout group of each step's trajectory.
        state_keys: The state each step acted in; steps of one group with equal keys form an anchor group.
        norm_by_std: Divide by the anchor group's (unbiased) std.
        epsilon: Added to that std.

    Returns:
        ``(advantage, anchor_size)``, both ``(steps,)``: 0 for a step whose state no other step shares.
    """
    if returns.dim() != 1 or len(index) != returns.shape[0] or len(state_keys) != returns.shape[0]:
        raise ValueError(
            f"returns {tuple(returns.shape)}, index ({len(index)}) and state_keys ({len(state_keys)}) must align"
        )
    anchors = list(zip(list(index), list(state_keys), strict=True))
    advantage, _ = group_outcome_advantage(returns, anchors, norm_by_std=norm_by_std, epsilon=epsilon)
    sizes: dict = {}
    for anchor in anchors:
        sizes[anchor] = sizes.get(anchor, 0) + 1
    size = torch.tensor([sizes[a] for a in anchors], dtype=torch.long, device=returns.device)
    # GRPO gives a lone row its raw score (mean 0, std 1); a lone step has no peer and no step advantage.
    return torch.where(size > 1, advantage, torch.zeros_like(advantage)), size


def gigpo_advantage(
    scores: torch.Tensor,
    index: Sequence | np.ndarray,
    turns_left: torch.Tensor,
    state_key: torch.Tensor,
    gamma: float,
    step_weight: float,
    norm_by_std: bool = True,
    epsilon: float = 1e-6,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Token-level GiGPO advantages.

    Args:
        scores: ``(bs,)`` outcome score of each row (its only reward, at the end).
        index: Rollout group of each row.
        turns_left: ``(bs, response_length)`` ``T - t`` on the policy tokens of turn ``t``, 0 elsewhere.
        state_key: ``(bs, response_length)`` key of the state turn ``t`` acted in, on the same tokens.
        gamma: Discount of the step returns, in (0, 1].
        step_weight: ``omega``, the weight of the step-level advantage, >= 0.
        norm_by_std: Std normalisation at both levels (GiGPO's ``mean_std_norm``; false: ``mean_norm``).
        epsilon: Added to the stds.

    Returns:
        ``(advantages, stats)``: ``(bs, response_length)``, zero off the steps' tokens, and the anchor-group
        statistics ``steps``, ``anchor_steps_frac`` (steps sharing their state) and ``anchor_groups``.
    """
    if turns_left.shape != state_key.shape or turns_left.dim() != 2 or turns_left.shape[0] != scores.shape[0]:
        raise ValueError(f"turns_left {tuple(turns_left.shape)} and state_key {tuple(state_key.shape)} must be (bs, L)")
    if not 0 < gamma <= 1 or step_weight < 0:
        raise ValueError(f"gamma must lie in (0, 1] and step_weight be >= 0, got {gamma}, {step_weight}")
    episode, _ = group_outcome_advantage(scores, index, norm_by_std=norm_by_std, epsilon=epsilon)
    on_step = turns_left > 0
    if (on_step != (state_key != 0)).any():
        raise ValueError("turns_left and state_key disagree on which tokens belong to a turn")
    rows, cols = torch.nonzero(on_step, as_tuple=True)
    left = turns_left[rows, cols].long()
    # one step per (row, turn): the tokens of a turn share its turns_left
    code = rows.long() * (int(left.max()) + 1 if left.numel() else 1) + left
    steps, token_step = torch.unique(code, return_inverse=True)
    step_row = torch.zeros_like(steps).scatter_(0, token_step, rows.long())
    step_left = torch.zeros_like(steps).scatter_(0, token_step, left)
    step_key = torch.zeros_like(steps).scatter_(0, token_step, state_key[rows, cols].long())
    if (step_key[token_step] != state_key[rows, cols].long()).any():
        raise ValueError("the tokens of one turn carry different state keys")

    values = scores.detach().to(torch.float64)
    returns = gamma ** (step_left.to(torch.float64) - 1) * values[step_row]
    group_of_row = list(index)
    step_index = [group_of_row[r] for r in step_row.tolist()]
    step_adv, size = anchor_step_advantage(returns, step_index, step_key.tolist(), norm_by_std, epsilon)

    advantages = torch.zeros(turns_left.shape, dtype=scores.dtype, device=scores.device)
    token_value = episode[rows] + step_weight * step_adv.to(scores.dtype)[token_step]
    advantages[rows, cols] = token_value
    num_steps = int(steps.numel())
    stats = {
        "steps": float(num_steps),
        "anchor_steps_frac": float((size > 1).sum()) / num_steps if num_steps else 0.0,
        "anchor_groups": float(len({(step_index[i], k) for i, k in enumerate(step_key.tolist()) if size[i] > 1})),
    }
    return advantages, stats
