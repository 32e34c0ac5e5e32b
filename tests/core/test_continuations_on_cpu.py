"""Training on the verifier's continuations: fork-group advantages and their token layout, by hand."""

import pytest
import torch

from prover_verl.core import fork_group_advantage, fork_token_advantages


def test_outcome_minus_fork_group_mean():
    # fork "a": 1, 0, 0, 1 (mean 0.5); fork "b": 1, 1, 0 (mean 2/3); fork "c": one continuation
    outcomes = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    fork = ["a", "a", "b", "a", "a", "b", "b", "c"]
    advantage = fork_group_advantage(outcomes, fork)
    expected = [0.5, -0.5, 1 / 3, -0.5, 0.5, -2 / 3, 1 / 3, 0.0]  # the lone "c" has no peer: 0
    torch.testing.assert_close(advantage, torch.tensor(expected, dtype=torch.float64))
    assert fork_group_advantage(torch.ones(3), [0, 0, 1]).abs().sum() == 0  # all equal: nothing to learn


def test_stale_continuations_are_left_out_of_the_mean_and_get_nothing():
    outcomes = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0])
    stale = torch.tensor([False, False, True, True, False])
    advantage = fork_group_advantage(outcomes, [(0, 1), (0, 1), (0, 1), (0, 2), (0, 2)], stale)
    # fork (0, 1): fresh 1, 0 -> mean 0.5; fork (0, 2): one fresh continuation left, no peer
    torch.testing.assert_close(advantage, torch.tensor([0.5, -0.5, 0.0, 0.0, 0.0], dtype=torch.float64))
    with pytest.raises(ValueError):
        fork_group_advantage(outcomes, [0, 0])
    with pytest.raises(ValueError):
        fork_group_advantage(outcomes, [0] * 5, torch.zeros(4, dtype=torch.bool))


def test_token_layout_skips_the_prefix_and_environment_tokens():
    # two continuation rows: policy, env, policy, env, policy, pad
    mask = torch.tensor([[1, 0, 1, 0, 1, 0], [1, 0, 1, 0, 1, 0]])
    tokens = fork_token_advantages(torch.tensor([0.5, -0.25]), torch.tensor([2, 0]), mask)
    expected = torch.tensor([[0, 0, 0.5, 0, 0.5, 0], [-0.25, 0, -0.25, 0, -0.25, 0]])
    torch.testing.assert_close(tokens, expected)
    with pytest.raises(ValueError):
        fork_token_advantages(torch.tensor([0.5]), torch.tensor([2, 0]), mask)
    with pytest.raises(ValueError):
        fork_token_advantages(torch.tensor([0.5, 0.5]), torch.tensor([7, 0]), mask)
