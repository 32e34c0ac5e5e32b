"""Batched KeyDoor episodes with the current policy, their token layout, and the env-step count of everything.

Every episode of a batch advances in lockstep (one policy forward per turn for all of them); continuations from
fork points are episodes that start from a copied state row instead of the start state.

Token layout (as in the LLM setting): a trajectory's response is ``action_0, obs_1, action_1, obs_2, ...``, each
action one policy token (``response_mask`` 1) and each observation :data:`OBS_TOKENS` environment tokens
(``response_mask`` 0). The first observation is the prompt, outside the response.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import torch

from envs.keydoor.env import (
    ACTIONS,
    MAX_TURNS,
    NUM_FEATURES,
    TASK_TEXT,
    TaskTable,
    features_batch,
    initial_state,
    render_observation,
    step_batch,
    won_batch,
)
from prover_verl.demo.policy import MLPPolicy
from prover_verl.judge import Trajectory

OBS_TOKENS = 2
RESPONSE_LENGTH = (MAX_TURNS - 1) * (OBS_TOKENS + 1) + 1


def action_position(turn: int) -> int:
    """Response-token position of the policy token of ``turn``."""
    return turn * (OBS_TOKENS + 1)


@dataclasses.dataclass
class Rollouts:
    """Recorded episodes (rows), all started from the start state of their task.

    Attributes:
        task: ``(rows,)`` task index into the :class:`TaskTable`.
        group: ``(rows,)`` rollout-group id (rows of one group share a task).
        states: ``(rows, MAX_TURNS + 1, 4)``: ``states[r, t]`` is the state before the action of turn ``t``;
            ``states[r, num_turns[r]]`` the final one.
        features: ``(rows, MAX_TURNS, NUM_FEATURES)`` the policy's input at each turn.
        actions: ``(rows, MAX_TURNS)`` action index per turn (-1 past the end).
        num_turns: ``(rows,)`` turns per episode.
        won: ``(rows,)`` outcome.
    """

    task: np.ndarray
    group: np.ndarray
    states: np.ndarray
    features: np.ndarray
    actions: np.ndarray
    num_turns: np.ndarray
    won: np.ndarray

    def __len__(self) -> int:
        return len(self.task)

    def turn_spans(self, row: int) -> list[tuple[int, int]]:
        """``[start, end)`` token span of each turn's policy token in ``row``."""
        return [(action_position(t), action_position(t) + 1) for t in range(int(self.num_turns[row]))]

    def response_mask(self) -> torch.Tensor:
        """``(rows, RESPONSE_LENGTH)`` long tensor, 1 on policy tokens."""
        mask = torch.zeros(len(self), RESPONSE_LENGTH, dtype=torch.long)
        for row in range(len(self)):
            for start, end in self.turn_spans(row):
                mask[row, start:end] = 1
        return mask

    def trajectory(self, table: TaskTable, row: int, traj_id: int) -> Trajectory:
        """``row`` as a judge's :class:`~prover_verl.judge.Trajectory` (rendered observations, action texts)."""
        task = table.tasks[int(self.task[row])]
        turns = int(self.num_turns[row])
        return Trajectory(
            traj_id=traj_id,
            task=task_text(task.task_id),
            observations=tuple(render_observation(task, self.states[row, t]) for t in range(turns)),
            actions=tuple(ACTIONS[int(a)] for a in self.actions[row, :turns]),
            success=bool(self.won[row]),
        )


def task_text(task_id: str) -> str:
    """The task instruction a trajectory shows its judge (unique per task)."""
    return f"{TASK_TEXT} (task {task_id})"


def turn_values(token_values: torch.Tensor, rollouts: Rollouts) -> torch.Tensor:
    """Read each turn's policy-token value off a ``(rows, RESPONSE_LENGTH)`` tensor: ``(rows, MAX_TURNS)``."""
    positions = torch.tensor([action_position(t) for t in range(MAX_TURNS)])
    return token_values[:, positions]


class Simulator:
    """Plays batches of KeyDoor episodes with a policy and counts every environment step it takes.

    Args:
        table: The tasks.
        policy: The policy that picks the actions (its current weights, at each call).
    """

    def __init__(self, table: TaskTable, policy: MLPPolicy):
        self.table = table
        self.policy = policy
        self.env_steps = 0

    def rollouts(self, task: np.ndarray, group: np.ndarray, rng: np.random.Generator) -> Rollouts:
        """Play one episode per row from the start state, recording everything training needs."""
        rows = len(task)
        state = initial_state(rows)
        states = np.zeros((rows, MAX_TURNS + 1, state.shape[1]), dtype=np.int64)
        states[:, 0] = state
        features = np.zeros((rows, MAX_TURNS, NUM_FEATURES), dtype=np.float32)
        actions = np.full((rows, MAX_TURNS), -1, dtype=np.int64)

        def record(idx, before, feats, acts, after):
            turn = before[:, 0]
            features[idx, turn] = feats
            actions[idx, turn] = acts
            states[idx, turn + 1] = after

        final = self._play(task, state, rng, greedy=False, record=record)
        return Rollouts(
            task, group, states, features, actions, self.table.num_turns[task], won_batch(self.table, task, final)
        )

    def continue_from(
        self, task: np.ndarray, state: np.ndarray, rng: np.random.Generator, record: Callable | None = None
    ) -> np.ndarray:
        """Play each row from ``state`` (a fork point) to the end; return the outcomes ``(rows,)`` bool.

        ``record(idx, before, features, actions, after)``, if given, is called after every step with the rows
        that took it (indices into this batch), their states before and after and the policy's inputs and actions.
        """
        if len(task) == 0:
            return np.zeros(0, dtype=bool)
        return won_batch(self.table, task, self._play(task, state.copy(), rng, greedy=False, record=record))

    def evaluate(self, task: np.ndarray, rng: np.random.Generator, greedy: bool) -> float:
        """Success rate of one episode per row; these steps are measurement and are not counted."""
        before = self.env_steps
        final = self._play(task, initial_state(len(task)), rng, greedy=greedy)
        self.env_steps = before
        return float(won_batch(self.table, task, final).mean())

    def _play(self, task, state, rng, greedy, record=None) -> np.ndarray:
        active = state[:, 0] < self.table.num_turns[task]
        while active.any():
            idx = np.nonzero(active)[0]
            before = state[idx]
            feats = features_batch(self.table, task[idx], before)
            acts = self.policy.act(feats, rng, greedy=greedy)
            after = step_batch(self.table, task[idx], before, acts)
            state[idx] = after
            self.env_steps += len(idx)
            if record is not None:
                record(idx, before, feats, acts, after)
            active[idx] = after[:, 0] < self.table.num_turns[task[idx]]
        return state
