"""Token-level advantages of the three credit-assignment methods the demo compares.

* :func:`grpo_advantages`: GRPO, the group-normalised outcome on every policy token.
* :func:`prover_advantages`: ProVer: GRPO plus, for each group with a success and a failure, the judge's segment
  verified by forking before and after it with ``k`` continuations of the current policy; a positive estimate
  goes onto the segment's policy tokens only (via :func:`~prover_verl.core.credit_tensor` and
  :func:`~prover_verl.core.merge_credit`, scaled by the row's GRPO ``1 / (std + eps)`` as the ``prover``
  estimator does).
* :func:`gigpo_advantages`: GiGPO: GRPO's episode advantage plus a step advantage over the rows of a group that
  reached the same KeyDoor state (:func:`~prover_verl.core.gigpo_advantage`, the ``gigpo`` estimator's math); no
  extra env steps.
* :func:`mc_advantages`: the exhaustive Monte-Carlo baseline (VinePPO-style): ``k`` continuations from every
  intermediate state give ``V(s_t)``; a turn's advantage is ``V(s_{t+1}) - V(s_t)`` (the reward is the final
  outcome, so this is VinePPO's ``r + V(s') - V(s)``).

Each returns ``(rows, RESPONSE_LENGTH)`` advantages (zero off policy tokens) and :class:`CreditStats`; every env
step spent is counted by the :class:`~prover_verl.demo.rollout.Simulator`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter

import numpy as np
import torch

from prover_verl.config import GiGPOConfig, ProverConfig
from prover_verl.core import (
    ForkOutcome,
    SegmentCredit,
    credit_tensor,
    gigpo_advantage,
    group_outcome_advantage,
    merge_credit,
    segment_token_span,
)
from prover_verl.demo.keydoor import MAX_TURNS
from prover_verl.demo.rollout import Rollouts, Simulator, action_position
from prover_verl.judge import Proposal, check_proposal
from prover_verl.judge.base import Judge
from prover_verl.verify import fork_points, terminal_outcome

EPSILON = 1e-6


@dataclasses.dataclass
class CreditStats:
    """What a method did beyond GRPO in one or more updates (summed).

    Attributes:
        groups: Rollout groups seen.
        mixed_groups: Groups with both a success and a failure (the ones ProVer verifies).
        proposals: Usable judge proposals.
        judge_hits: Proposals whose segment contains the task's true pivotal turn.
        verified_positive: Proposals whose estimate exceeded ``min_estimate`` (credited).
        estimate_sum: Sum of all proposals' estimates.
        credit_sum: Sum of the credited estimates.
        extra_steps: Env steps of continuations (verifier or Monte-Carlo).
        statuses: Judge statuses (``ok``, ``no_pair``, ``out_of_range``, ...).
    """

    groups: int = 0
    mixed_groups: int = 0
    proposals: int = 0
    judge_hits: int = 0
    verified_positive: int = 0
    estimate_sum: float = 0.0
    credit_sum: float = 0.0
    extra_steps: int = 0
    statuses: Counter = dataclasses.field(default_factory=Counter)

    def add(self, other: CreditStats) -> None:
        """Accumulate ``other`` into this."""
        for field in dataclasses.fields(self):
            name = field.name
            if name == "statuses":
                self.statuses.update(other.statuses)
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))

    def summary(self) -> dict:
        """Counts plus the derived rates (``None`` where undefined)."""
        out = dataclasses.asdict(self)
        out["statuses"] = dict(self.statuses)
        out["judge_accuracy"] = self.judge_hits / self.proposals if self.proposals else None
        out["verified_positive_fraction"] = self.verified_positive / self.proposals if self.proposals else None
        out["mean_estimate"] = self.estimate_sum / self.proposals if self.proposals else None
        out["mean_credit"] = self.credit_sum / self.verified_positive if self.verified_positive else None
        return out


def grpo_advantages(rollouts: Rollouts, norm_by_std: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO: ``(advantages, std)``; the row's outcome advantage on each of its policy tokens."""
    scores = torch.from_numpy(rollouts.won.astype(np.float32))
    advantage, std = group_outcome_advantage(scores, rollouts.group, norm_by_std=norm_by_std, epsilon=EPSILON)
    mask = rollouts.response_mask()
    return advantage.unsqueeze(-1) * mask, std


def gigpo_advantages(rollouts: Rollouts, config: GiGPOConfig) -> tuple[torch.Tensor, CreditStats]:
    """GiGPO's advantages; anchor states by exact identity, the task and the KeyDoor state vector before the turn."""
    mask = rollouts.response_mask()
    turns_left = torch.zeros(mask.shape, dtype=torch.long)
    state_key = torch.zeros(mask.shape, dtype=torch.long)
    keys: dict[tuple, int] = {}
    for row in range(len(rollouts)):
        turns = int(rollouts.num_turns[row])
        for t, (start, end) in enumerate(rollouts.turn_spans(row)):
            state = (int(rollouts.task[row]), *rollouts.states[row, t].tolist())
            turns_left[row, start:end] = turns - t
            state_key[row, start:end] = keys.setdefault(state, len(keys) + 1)
    scores = torch.from_numpy(rollouts.won.astype(np.float32))
    advantages, _ = gigpo_advantage(
        scores, rollouts.group, turns_left, state_key, config.gamma, config.step_weight, config.norm_by_std, EPSILON
    )
    return advantages * mask, CreditStats(groups=len(_groups(rollouts)))


def _groups(rollouts: Rollouts) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = {}
    for row, group in enumerate(rollouts.group.tolist()):
        rows.setdefault(group, []).append(row)
    return rows


def prover_advantages(
    rollouts: Rollouts,
    sim: Simulator,
    judge: Judge,
    config: ProverConfig,
    rng: np.random.Generator,
    loop: asyncio.AbstractEventLoop,
    norm_by_std: bool = True,
) -> tuple[torch.Tensor, CreditStats]:
    """ProVer's advantages for one batch of rollout groups.

    Args:
        rollouts: The batch.
        sim: Plays the continuations with the current policy (and counts their steps).
        judge: Proposes one segment per group (any :class:`~prover_verl.judge.base.Judge`).
        config: ``k``, ``coef``, ``min_estimate`` and ``segment_side`` are used.
        rng: Draws the continuations' actions.
        loop: Event loop the (async) judge runs on.
        norm_by_std: GRPO's std normalisation (also scales the credit by the row's ``1 / (std + eps)``).
    """
    table = sim.table
    advantages, std = grpo_advantages(rollouts, norm_by_std)
    mask = rollouts.response_mask()
    stats = CreditStats()
    verified: list[tuple[int, Proposal]] = []
    for rows in _groups(rollouts).values():
        stats.groups += 1
        outcomes = rollouts.won[rows]
        if outcomes.all() or not outcomes.any():
            continue
        stats.mixed_groups += 1
        group = [rollouts.trajectory(table, row, traj_id) for traj_id, row in enumerate(rows)]
        proposal, status = loop.run_until_complete(judge.propose(group))
        if proposal is not None:
            side = config.segment_side
            allowed = [t.traj_id for t in group if side == "any" or t.success == (side == "success")]
            problem = check_proposal(proposal, group, allowed)
            if problem is not None:
                status, proposal = "out_of_range", None
        stats.statuses[status] += 1
        if proposal is not None:
            verified.append((rows[proposal.traj_id], proposal))

    # One batched set of continuations for every fork point of the step, as the agent loop runs them together.
    starts, tasks, owners = [], [], []
    points = []
    for i, (row, proposal) in enumerate(verified):
        fp = fork_points(proposal, int(rollouts.num_turns[row]))
        points.append(fp)
        for which, turn in (("before", fp.before), ("after", fp.after)):
            if which == "after" and fp.after_is_terminal:
                continue
            starts.append(np.repeat(rollouts.states[row, turn][None], config.k, axis=0))
            tasks.append(np.full(config.k, rollouts.task[row]))
            owners.extend([(i, which)] * config.k)
    before_steps = sim.env_steps
    won = sim.continue_from(np.concatenate(tasks), np.concatenate(starts), rng) if starts else np.zeros(0, bool)
    stats.extra_steps = sim.env_steps - before_steps
    wins: Counter = Counter()
    for owner, outcome in zip(owners, won.tolist(), strict=True):
        wins[owner] += outcome

    segments = []
    for i, ((row, proposal), fp) in enumerate(zip(verified, points, strict=True)):
        before = ForkOutcome(wins[(i, "before")], config.k)
        after = (
            terminal_outcome(bool(rollouts.won[row]))
            if fp.after_is_terminal
            else ForkOutcome(wins[(i, "after")], config.k)
        )
        start, end = segment_token_span_of(rollouts, row, proposal)
        seg = SegmentCredit(row, start, end, before, after)
        segments.append(seg)
        pivot = table.tasks[int(rollouts.task[row])].pivot_turn
        stats.proposals += 1
        stats.judge_hits += int(proposal.start_turn <= pivot <= proposal.end_turn)
        stats.estimate_sum += seg.estimate
        if seg.estimate > config.min_estimate:
            stats.verified_positive += 1
            stats.credit_sum += seg.estimate

    credit = credit_tensor(segments, mask, min_estimate=config.min_estimate)
    scale = 1.0 / (std + EPSILON) if norm_by_std else None
    return merge_credit(advantages, credit, mask, config.coef, scale), stats


def segment_token_span_of(rollouts: Rollouts, row: int, proposal: Proposal) -> tuple[int, int]:
    """Token span of a proposal's turns in ``row`` (through :func:`~prover_verl.core.segment_token_span`)."""
    return segment_token_span(rollouts.turn_spans(row), proposal.start_turn, proposal.end_turn)


def mc_steps_formula(num_turns_per_row: np.ndarray, group: np.ndarray, k: int) -> int:
    """Env steps :func:`mc_advantages` spends: ``k * (sum_groups T_g + sum_rows T_r (T_r - 1) / 2)``.

    ``V(s_0)`` is shared by a group (its rows start from the same state), so it is estimated once per group with
    ``k`` full episodes; every other non-terminal state ``s_t`` (``1 <= t < T``) of every row takes ``k``
    continuations of ``T - t`` steps (episodes always last ``T`` turns).
    """
    per_group = {}
    for g, t in zip(group.tolist(), num_turns_per_row.tolist(), strict=True):
        per_group[g] = t
    rows = sum(t * (t - 1) // 2 for t in num_turns_per_row.tolist())
    return k * (sum(per_group.values()) + rows)


def mc_advantages(
    rollouts: Rollouts, sim: Simulator, k: int, rng: np.random.Generator
) -> tuple[torch.Tensor, CreditStats]:
    """Exhaustive Monte-Carlo advantages ``V(s_{t+1}) - V(s_t)`` on every policy token (no std normalisation)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    groups = _groups(rollouts)
    starts, tasks, owners = [], [], []
    for g, rows in groups.items():
        starts.append(np.repeat(rollouts.states[rows[0], 0][None], k, axis=0))
        tasks.append(np.full(k, rollouts.task[rows[0]]))
        owners.append(np.full(k, -1 - g))
    for row in range(len(rollouts)):
        turns = int(rollouts.num_turns[row])
        for t in range(1, turns):
            starts.append(np.repeat(rollouts.states[row, t][None], k, axis=0))
            tasks.append(np.full(k, rollouts.task[row]))
            owners.append(np.full(k, row * MAX_TURNS + t))
    before_steps = sim.env_steps
    won = sim.continue_from(np.concatenate(tasks), np.concatenate(starts), rng)
    stats = CreditStats(groups=len(groups), extra_steps=sim.env_steps - before_steps)
    owner = np.concatenate(owners)
    keys, inverse = np.unique(owner, return_inverse=True)
    means = dict(zip(keys.tolist(), (np.bincount(inverse, weights=won) / np.bincount(inverse)).tolist(), strict=True))

    advantages = torch.zeros(len(rollouts), rollouts.response_mask().shape[1])
    for row in range(len(rollouts)):
        turns = int(rollouts.num_turns[row])
        values = [means[-1 - int(rollouts.group[row])]]
        values += [means[row * MAX_TURNS + t] for t in range(1, turns)]
        values.append(float(rollouts.won[row]))
        for t in range(turns):
            advantages[row, action_position(t)] = values[t + 1] - values[t]
    return advantages, stats
