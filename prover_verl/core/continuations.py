"""Training on the verifier's continuations (``prover.train_on_continuations``): each fork point's group.

The ``k`` continuations the verifier plays from one fork point are on-policy samples from one shared prefix, so
they form a small rollout group of their own: continuation ``j`` of fork point ``f`` gets the advantage
``o_j - mean_{i in f} o_i`` (outcome minus its fork group's mean, no std normalisation) on the policy tokens it
generated after the fork, and the prefix it shares with the trajectory it continues gets nothing (those tokens
are the trajectory's, trained once with the trajectory's own advantage).

A continuation sampled (in part) with other weights than the current policy's (``stale``) is left out of its
group's mean and gets no advantage; a group with fewer than two fresh continuations has no peer to compare with
and gets none either. Training on them costs no env step: the verifier already counted every step they took.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch


def fork_group_advantage(
    outcomes: torch.Tensor, fork: Sequence[Hashable], stale: torch.Tensor | None = None
) -> torch.Tensor:
    """Outcome minus fork-group mean, per continuation.

    Args:
        outcomes: ``(n,)`` each continuation's outcome score (1/0 for success/failure).
        fork: The fork point of each continuation (any hashable id; equal ids form one group).
        stale: ``(n,)`` bool, continuations sampled with other weights; None: all fresh.

    Returns:
        ``(n,)`` float64 advantages, 0 for a stale continuation and for one with no fresh peer at its fork point.
    """
    if outcomes.dim() != 1 or len(fork) != outcomes.shape[0]:
        raise ValueError(f"outcomes {tuple(outcomes.shape)} and fork ({len(fork)}) must align")
    fresh = torch.ones_like(outcomes, dtype=torch.bool) if stale is None else ~stale.to(torch.bool)
    if fresh.shape != outcomes.shape:
        raise ValueError(f"stale {tuple(stale.shape)} must have the shape of outcomes {tuple(outcomes.shape)}")
    ids: dict = {}
    group = torch.tensor([ids.setdefault(f, len(ids)) for f in fork], dtype=torch.long, device=outcomes.device)
    values = outcomes.detach().to(torch.float64)
    weight = fresh.to(torch.float64)
    count = torch.zeros(len(ids), dtype=torch.float64, device=outcomes.device).index_add_(0, group, weight)
    total = torch.zeros_like(count).index_add_(0, group, values * weight)
    mean = total / count.clamp(min=1)
    advantage = values - mean[group]
    return torch.where(fresh & (count[group] >= 2), advantage, torch.zeros_like(advantage))


def fork_token_advantages(
    advantage: torch.Tensor, fork_token: torch.Tensor, response_mask: torch.Tensor
) -> torch.Tensor:
    """Lay each continuation's advantage on its policy tokens after the fork.

    Args:
        advantage: ``(n,)`` per continuation (:func:`fork_group_advantage`).
        fork_token: ``(n,)`` the first response token generated after the fork (the prefix is ``[0, fork_token)``).
        response_mask: ``(n, length)``, 1 on policy tokens.

    Returns:
        ``(n, length)`` float advantages: ``advantage[j]`` on the policy tokens at or after ``fork_token[j]``, 0 on
        the prefix, environment tokens and padding.
    """
    n, length = response_mask.shape
    if advantage.shape != (n,) or fork_token.shape != (n,):
        raise ValueError(
            f"advantage {tuple(advantage.shape)} and fork_token {tuple(fork_token.shape)} must be ({n},) for a "
            f"response_mask of shape {tuple(response_mask.shape)}"
        )
    if ((fork_token < 0) | (fork_token > length)).any():
        raise ValueError(f"fork tokens must lie in [0, {length}], got {fork_token.tolist()}")
    after = torch.arange(length, device=response_mask.device)[None] >= fork_token[:, None]
    return advantage[:, None].to(torch.float32) * (after & response_mask.bool())
