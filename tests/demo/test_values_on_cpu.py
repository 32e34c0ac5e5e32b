"""True per-turn advantages of the demo's episodes: exact values against hand computations and a memoised
recursion, and the Monte-Carlo estimates against the exact ones."""

import numpy as np
import pytest
import torch

from envs.keydoor import env as kd
from prover_verl.demo.policy import MLPPolicy
from prover_verl.demo.rollout import Simulator
from prover_verl.demo.values import KEYS, exact_turn_advantages, exact_values, mc_turn_advantages

NONE_KEY = len(kd.COLOURS)


def uniform_policy() -> MLPPolicy:
    policy = MLPPolicy(seed=0)
    with torch.no_grad():
        policy.out.weight.zero_()
    return policy


def test_exact_values_of_a_uniform_policy_by_hand():
    table = kd.TaskTable(kd.task_family("train", 3, seed=0))
    values = exact_values(table, uniform_policy())
    for i, task in enumerate(table.tasks):
        last, door = task.num_turns - 1, task.door
        assert values[i, task.num_turns, door, NONE_KEY] == 1.0 and values[i, task.num_turns, NONE_KEY, door] == 0.0
        # at the door holding its key: every action but "drop key" keeps it
        assert values[i, last, door, NONE_KEY] == pytest.approx(8 / 9)
        # at the door with its key in the pocket: only taking it back wins
        assert values[i, last, NONE_KEY, door] == pytest.approx(1 / 9)
        assert values[i, last, NONE_KEY, NONE_KEY] == 0.0


def test_exact_values_match_a_memoised_recursion_for_a_trained_looking_policy():
    table = kd.TaskTable(kd.task_family("train", 2, seed=3, doors=2, note_at_keys=True, early_pivot=True))
    policy = MLPPolicy(seed=5)
    with torch.no_grad():
        policy.out.weight.mul_(300.0)  # far from uniform
    values = exact_values(table, policy)
    memo = {}

    def value(task, state):
        key = (task, *state)
        if key not in memo:
            if state[0] >= table.num_turns[task]:
                memo[key] = float(state[1] == table.door[task])
            else:
                feats = kd.features_batch(table, np.array([task]), np.array([state]))
                probs = torch.softmax(policy(torch.from_numpy(feats)).double(), -1)[0].tolist()
                total = 0.0
                for action, p in enumerate(probs):
                    after = kd.step_batch(table, np.array([task]), np.array([state]), np.array([action]))[0]
                    total += p * value(task, tuple(int(v) for v in after))
                memo[key] = total
        return memo[key]

    for task in range(2):  # abs 1e-7: float32 forwards of different batch shapes
        start = tuple(int(v) for v in kd.initial_state(1)[0])
        assert values[task, 0, NONE_KEY, NONE_KEY] == pytest.approx(
            value(task, start), abs=1e-7
        )  # float32 forwards of different batch shapes
        pivot = int(table.pivot_turn[task])
        for held in range(len(kd.COLOURS)):
            state = (pivot + 1, held, kd.NONE, kd.EV_TOOK)
            assert values[task, pivot + 1, held, NONE_KEY] == pytest.approx(
                value(task, state), abs=1e-7
            )  # float32 forwards of different batch shapes
    assert values.shape == (2, int(table.num_turns.max()) + 1, KEYS, KEYS)


def test_monte_carlo_advantages_agree_with_the_exact_ones():
    table = kd.TaskTable(kd.task_family("train", 16, seed=0))
    policy = MLPPolicy(seed=1)
    sim = Simulator(table, policy)
    rng = np.random.default_rng(0)
    rollouts = sim.rollouts(np.repeat(np.arange(4), 4), np.repeat(np.arange(4), 4), rng)
    advantage, sem, steps = mc_turn_advantages(rollouts, sim, 400, rng)
    exact = exact_turn_advantages(rollouts, exact_values(table, policy))
    valid = rollouts.actions >= 0
    assert steps > 0 and (advantage[~valid] == 0).all() and (exact[~valid] == 0).all()
    error = np.abs(advantage - exact)[valid]
    assert error.max() < 0.1 and np.mean(error <= np.maximum(3 * sem[valid], 0.01)) > 0.97
    # the advantages telescope: their sum over a row is its outcome minus the start's value
    np.testing.assert_allclose(exact.sum(axis=1), rollouts.won - exact_values(table, policy)[rollouts.task, 0, -1, -1])
    with pytest.raises(ValueError):
        mc_turn_advantages(rollouts, sim, 0, rng)
