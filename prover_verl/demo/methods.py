"""Token-level advantages of the three credit-assignment methods the demo compares.

* :func:`grpo_advantages`: GRPO, the group-normalised outcome on every policy token.
* :func:`prover_advantages`: ProVer: GRPO plus, for each group, :func:`~prover_verl.verify.group_step` (the code
  the verl agent loop runs): for a group with a success and a failure, the judge's segment verified by forking
  before and after it with ``k`` continuations of the current policy; a positive estimate goes onto the
  segment's policy tokens only (via :func:`~prover_verl.core.credit_tensor` and
  :func:`~prover_verl.core.merge_credit`, scaled by the row's GRPO ``1 / (std + eps)`` as the ``prover``
  estimator does).
  With ``train_on_continuations`` the verifier's continuations are recorded and returned as
  :class:`ContinuationTokens` (each fork point's continuations a group: outcome minus the group's mean), which the
  trainer adds to the same token mean.
* :func:`gigpo_advantages`: GiGPO: GRPO's episode advantage plus a step advantage over the rows of a group that
  reached the same KeyDoor state (:func:`~prover_verl.core.gigpo_advantage`, the ``gigpo`` estimator's math); no
  extra env steps.
* :func:`mc_advantages`: the exhaustive Monte-Carlo baseline (VinePPO-style): ``k`` continuations from every
  intermediate state give ``V(s_t)``; a turn's advantage is ``V(s_{t+1}) - V(s_t)`` (the reward is the final
  outcome, so this is VinePPO's ``r + V(s') - V(s)``).

Each returns ``(rows, RESPONSE_LENGTH)`` advantages (zero off policy tokens) and the
:class:`~prover_verl.metrics.ProverStats` the trainer logs (``verify_env_steps``: every continuation's env steps,
verifier or Monte-Carlo); every env step spent is counted by the :class:`~prover_verl.demo.rollout.Simulator`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine, Sequence
from typing import Any

import numpy as np
import torch

from envs.keydoor.env import MAX_TURNS, NUM_FEATURES
from prover_verl.config import GiGPOConfig, ProverConfig
from prover_verl.core import (
    credit_tensor,
    fork_group_advantage,
    gigpo_advantage,
    group_outcome_advantage,
    merge_credit,
)
from prover_verl.demo.rollout import Rollouts, Simulator, action_position
from prover_verl.judge.base import Judge
from prover_verl.metrics import ProverStats
from prover_verl.verify import Continuation, ForkFn, GroupStep, group_step

EPSILON = 1e-6


def credit_summary(stats: ProverStats, judge_hits: int) -> dict[str, Any]:
    """A run's counters, the rates the trainer logs (None where undefined) and the demo's own judge accuracy:
    the fraction of verified proposals that contain the task's true pivotal turn (only a synthetic env knows it)."""
    counts = {key: getattr(stats, key) for key in dataclasses.asdict(stats)}
    accuracy = judge_hits / stats.verified if stats.verified else None
    return {**counts, "judge_hits": judge_hits, "judge_accuracy": accuracy, **stats.rates()}


def grpo_advantages(rollouts: Rollouts, norm_by_std: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO: ``(advantages, std)``; the row's outcome advantage on each of its policy tokens."""
    scores = torch.from_numpy(rollouts.won.astype(np.float32))
    advantage, std = group_outcome_advantage(scores, rollouts.group, norm_by_std=norm_by_std, epsilon=EPSILON)
    mask = rollouts.response_mask()
    return advantage.unsqueeze(-1) * mask, std


def gigpo_advantages(rollouts: Rollouts, config: GiGPOConfig) -> tuple[torch.Tensor, ProverStats]:
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
    return advantages * mask, ProverStats(groups=len(_groups(rollouts)))


def _groups(rollouts: Rollouts) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = {}
    for row, group in enumerate(rollouts.group.tolist()):
        rows.setdefault(group, []).append(row)
    return rows


@dataclasses.dataclass(frozen=True)
class PlayedContinuation:
    """One continuation the verifier played, recorded for training on it.

    Attributes:
        fork: ``(group, row, turn)``: the fork point (the trajectory's batch row and the actions taken before it).
        won: Its outcome.
        features: ``(steps, NUM_FEATURES)`` the policy's input at each of its actions.
        actions: ``(steps,)`` the actions it took.
    """

    fork: tuple[int, int, int]
    won: bool
    features: np.ndarray
    actions: np.ndarray


@dataclasses.dataclass(frozen=True)
class ContinuationTokens:
    """Policy tokens of the verifier's continuations with their fork-group advantages (``train_on_continuations``).

    Attributes:
        features: ``(tokens, NUM_FEATURES)``.
        actions: ``(tokens,)``.
        advantages: ``(tokens,)`` outcome minus the fork group's mean, per token of a continuation.
        continuations: How many continuations they came from.
    """

    features: torch.Tensor
    actions: torch.Tensor
    advantages: torch.Tensor
    continuations: int

    @classmethod
    def empty(cls) -> ContinuationTokens:
        """No tokens."""
        return cls(torch.zeros(0, NUM_FEATURES), torch.zeros(0, dtype=torch.long), torch.zeros(0), 0)


class ContinuationBatch:
    """Plays the continuations that the group steps of one update ask for as one batched simulation.

    The agent loop runs a step's continuations concurrently; here every group step waits on this batch until all of
    them have asked, and the batch then plays everything in one :meth:`Simulator.continue_from` call, in the order
    (group, fork point, continuation) whatever order the coroutines asked in, so that runs are reproducible.
    """

    def __init__(self, rollouts: Rollouts, sim: Simulator, rng: np.random.Generator, record: bool = False):
        self.rollouts, self.sim, self.rng = rollouts, sim, rng
        self.pending: list[tuple[tuple[int, int, int], int, asyncio.Future]] = []
        self.record = record
        self.played: list[PlayedContinuation] = []

    def fork(self, group: int, rows: Sequence[int]) -> ForkFn:
        """The continuation function of group ``group``, whose ``traj_id`` ``t`` is batch row ``rows[t]``."""

        async def play(traj_id: int, turn: int, index: int) -> Continuation:
            future = asyncio.get_running_loop().create_future()
            self.pending.append(((group, turn, index), rows[traj_id], future))
            return await future

        return play

    async def run(self, steps: Sequence[Coroutine[Any, Any, GroupStep]]) -> list[GroupStep]:
        """Run the group steps concurrently, playing their continuations whenever every unfinished one waits."""
        tasks = [asyncio.ensure_future(step) for step in steps]
        running, idle = set(range(len(tasks))), 0
        while running:
            asked, before = len(self.pending), len(running)
            await asyncio.sleep(0)  # every ready coroutine runs once
            running = {i for i, task in enumerate(tasks) if not task.done()}
            waiting = {key[0] for key, _, _ in self.pending}
            if self.pending and len(self.pending) == asked and running <= waiting:
                self._play()
            idle = 0 if len(self.pending) != asked or len(running) != before else idle + 1
            if idle > 1000:
                raise RuntimeError(f"group steps {sorted(running - waiting)} wait on something other than the batch")
        return await asyncio.gather(*tasks)

    def _play(self) -> None:
        requests = sorted(self.pending, key=lambda request: request[0])
        self.pending = []
        rows = np.array([row for _, row, _ in requests])
        turns = np.array([key[1] for key, _, _ in requests])
        task = self.rollouts.task[rows]
        before = self.sim.env_steps
        steps_of: list[list[tuple[np.ndarray, int]]] = [[] for _ in requests]

        def record(idx, _before, feats, acts, _after):
            for i, f, a in zip(idx.tolist(), feats, acts.tolist(), strict=True):
                steps_of[i].append((f, a))

        recording = {"record": record} if self.record else {}
        won = self.sim.continue_from(task, self.rollouts.states[rows, turns], self.rng, **recording)
        steps = self.sim.table.num_turns[task] - turns  # a KeyDoor episode always lasts its task's T turns
        if int(steps.sum()) != self.sim.env_steps - before:
            raise RuntimeError("continuations did not take T - t steps each")
        for (key, row, future), outcome, taken, played in zip(requests, won.tolist(), steps.tolist(), steps_of,
                                                               strict=True):  # fmt: skip
            if self.record:
                features = np.stack([f for f, _ in played]) if played else np.zeros((0, NUM_FEATURES), np.float32)
                actions = np.array([a for _, a in played], dtype=np.int64)
                self.played.append(PlayedContinuation((key[0], row, key[1]), bool(outcome), features, actions))
            future.set_result(Continuation(bool(outcome), int(taken), int(taken)))  # one token per action

    def training_tokens(self) -> ContinuationTokens:
        """The recorded continuations as training tokens: each fork point's continuations form a group, and every
        action a continuation took after its fork gets its outcome minus the group's mean
        (:func:`~prover_verl.core.fork_group_advantage`; none is stale here: the policy does not change within a
        batch)."""
        if not self.played:
            return ContinuationTokens.empty()
        outcomes = torch.tensor([float(p.won) for p in self.played], dtype=torch.float64)
        advantage = fork_group_advantage(outcomes, [p.fork for p in self.played]).to(torch.float32)
        lengths = torch.tensor([len(p.actions) for p in self.played])
        return ContinuationTokens(
            features=torch.from_numpy(np.concatenate([p.features for p in self.played])),
            actions=torch.from_numpy(np.concatenate([p.actions for p in self.played])),
            advantages=torch.repeat_interleave(advantage, lengths),
            continuations=len(self.played),
        )


def prover_advantages(
    rollouts: Rollouts,
    sim: Simulator,
    judge: Judge,
    config: ProverConfig,
    rng: np.random.Generator,
    loop: asyncio.AbstractEventLoop,
    norm_by_std: bool = True,
    continuation_tokens: list[ContinuationTokens] | None = None,
) -> tuple[torch.Tensor, ProverStats, int]:
    """ProVer's advantages for one batch of rollout groups: :func:`~prover_verl.verify.group_step` on each group.

    Args:
        rollouts: The batch.
        sim: Plays the continuations with the current policy (and counts their steps).
        judge: Proposes one segment per group (any :class:`~prover_verl.judge.base.Judge`).
        config: ``k``, ``coef``, ``min_estimate``, ``segment_side`` and ``ablation`` are used.
        rng: Draws the continuations' actions.
        loop: Event loop the group steps run on.
        norm_by_std: GRPO's std normalisation (also scales the credit by the row's ``1 / (std + eps)``).
        continuation_tokens: With ``config.train_on_continuations`` (required then), receives the verifier's
            continuations as :class:`ContinuationTokens` (:meth:`ContinuationBatch.training_tokens`).

    Returns:
        The advantages, the summed counters and how many verified proposals contain the true pivotal turn.
    """
    advantages, std = grpo_advantages(rollouts, norm_by_std)
    mask = rollouts.response_mask()
    if config.train_on_continuations and continuation_tokens is None:
        raise ValueError("train_on_continuations needs a continuation_tokens list to put the tokens in")
    batch = ContinuationBatch(rollouts, sim, rng, record=config.train_on_continuations)
    groups = list(_groups(rollouts).values())
    steps = [
        group_step(
            [rollouts.trajectory(sim.table, row, traj_id) for traj_id, row in enumerate(rows)],
            judge,
            config,
            batch.fork(g, rows),
            lambda traj_id, rows=rows: rollouts.turn_spans(rows[traj_id]),
        )
        for g, rows in enumerate(groups)
    ]
    results = loop.run_until_complete(batch.run(steps))
    if config.train_on_continuations:
        continuation_tokens.append(batch.training_tokens())
    stats, hits, segments = ProverStats(), 0, []
    for rows, step in zip(groups, results, strict=True):
        stats.add(step.stats)
        segments += [dataclasses.replace(credit, row=rows[credit.row]) for credit in step.credits]
        if step.proposal is not None and step.stats.verified:
            row = rows[step.proposal.traj_id]
            pivot = sim.table.tasks[int(rollouts.task[row])].pivot_turn
            hits += int(step.proposal.start_turn <= pivot <= step.proposal.end_turn)
    credit = credit_tensor(segments, mask)  # group_step credits only estimates above min_estimate
    scale = 1.0 / (std + EPSILON) if norm_by_std else None
    return merge_credit(advantages, credit, mask, config.coef, scale), stats, hits


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
) -> tuple[torch.Tensor, ProverStats]:
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
    stats = ProverStats(groups=len(groups), verify_env_steps=sim.env_steps - before_steps)
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
