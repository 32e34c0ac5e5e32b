"""The true per-turn advantages of the demo's logged KeyDoor episodes under the current policy.

Two routes to the same quantity, ``A*_t = V(s_{t+1}) - V(s_t)`` (:mod:`prover_verl.eval.credit_accuracy`):

* :func:`mc_turn_advantages`: Monte-Carlo, ``samples`` continuations of the current policy from every distinct
  state the batch passed through (what any forkable env allows), with a standard error per turn;
* :func:`exact_values`: dynamic programming over KeyDoor's whole state space (the policy sees only the turn, the
  held and pocketed keys and the task, and the transition is deterministic), which the tests and the benchmark use
  to check the Monte-Carlo estimates.
"""

from __future__ import annotations

import numpy as np
import torch

from envs.keydoor.env import COLOURS, NONE, NUM_ACTIONS, TaskTable, features_batch, step_batch
from prover_verl.core import ForkOutcome
from prover_verl.demo.policy import MLPPolicy
from prover_verl.demo.rollout import Rollouts, Simulator
from prover_verl.eval.credit_accuracy import true_advantages

KEYS = len(COLOURS) + 1  # a held or pocketed key: a colour, or none (index len(COLOURS))


def _key_index(colour: np.ndarray) -> np.ndarray:
    return np.where(colour == NONE, len(COLOURS), colour)


def mc_turn_advantages(
    rollouts: Rollouts, sim: Simulator, samples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, int]:
    """Monte-Carlo true advantages of every turn of ``rollouts``.

    ``samples`` continuations are played from each distinct ``(task, state)`` before a turn (a state that several
    rows passed through, e.g. a group's start, is sampled once and shared); the state after the last turn is valued
    by the row's own outcome.

    Returns:
        ``(advantage, sem, env_steps)``: ``(rows, MAX_TURNS)`` arrays (0 past a row's end) and the env steps the
        continuations took.
    """
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    keys: dict[tuple[int, ...], int] = {}
    for row in range(len(rollouts)):
        for t in range(int(rollouts.num_turns[row])):
            keys.setdefault((int(rollouts.task[row]), *rollouts.states[row, t].tolist()), len(keys))
    order = list(keys)
    task = np.repeat(np.array([k[0] for k in order], dtype=np.int64), samples)
    state = np.repeat(np.array([k[1:] for k in order], dtype=np.int64), samples, axis=0)
    before = sim.env_steps
    won = sim.continue_from(task, state, rng).reshape(len(order), samples)
    successes = won.sum(axis=1).tolist()
    advantage = np.zeros(rollouts.actions.shape, dtype=np.float64)
    sem = np.zeros_like(advantage)
    for row in range(len(rollouts)):
        turns = int(rollouts.num_turns[row])
        values = [
            ForkOutcome(successes[keys[(int(rollouts.task[row]), *rollouts.states[row, t].tolist())]], samples)
            for t in range(turns)
        ]
        values.append(ForkOutcome(int(rollouts.won[row]), 1))
        advantage[row, :turns], sem[row, :turns] = true_advantages(values)
    return advantage, sem, sim.env_steps - before


@torch.no_grad()
def exact_values(table: TaskTable, policy: MLPPolicy) -> np.ndarray:
    """``V[task, turn, held, pocket]``: the policy's exact success probability from every KeyDoor state.

    Backward induction from the door (``V = 1`` holding the door's key at the end of the corridor); keys index
    :data:`COLOURS`, the last index meaning none. Turns past a task's end hold its final values.
    """
    tasks = len(table)
    horizon = int(table.num_turns.max())
    values = np.zeros((tasks, horizon + 1, KEYS, KEYS))
    held, pocket = np.meshgrid(np.arange(KEYS), np.arange(KEYS), indexing="ij")
    held, pocket = held.ravel(), pocket.ravel()
    colour = lambda k: np.where(k == len(COLOURS), NONE, k)  # noqa: E731
    task = np.repeat(np.arange(tasks), held.size)
    final = (colour(np.tile(held, tasks)) == table.door[task]).astype(np.float64).reshape(tasks, KEYS, KEYS)
    for t in range(horizon, -1, -1):
        ended = table.num_turns <= t
        values[ended, t] = final[ended]
        live = np.nonzero(~ended)[0]
        if live.size == 0:
            continue
        rows = np.repeat(live, held.size)
        state = np.stack(
            [np.full(rows.size, t), colour(np.tile(held, live.size)), colour(np.tile(pocket, live.size)),
             np.zeros(rows.size, dtype=np.int64)],
            axis=1,
        )  # fmt: skip
        probs = torch.softmax(policy(torch.from_numpy(features_batch(table, rows, state))).double(), -1).numpy()
        value = np.zeros(rows.size)
        for action in range(NUM_ACTIONS):
            after = step_batch(table, rows, state, np.full(rows.size, action))
            value += probs[:, action] * values[rows, t + 1, _key_index(after[:, 1]), _key_index(after[:, 2])]
        values[live, t] = value.reshape(live.size, KEYS, KEYS)
    return values


def exact_turn_advantages(rollouts: Rollouts, values: np.ndarray) -> np.ndarray:
    """``V(s_{t+1}) - V(s_t)`` of every turn of ``rollouts`` from :func:`exact_values`; ``(rows, MAX_TURNS)``."""
    states = rollouts.states
    task = np.broadcast_to(rollouts.task[:, None], states.shape[:2])
    value = values[task, states[..., 0], _key_index(states[..., 1]), _key_index(states[..., 2])]
    advantage = value[:, 1:] - value[:, :-1]
    live = np.arange(advantage.shape[1])[None] < rollouts.num_turns[:, None]
    return np.where(live, advantage, 0.0)
