import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from prover_verl.core import group_outcome_advantage


def _verl_advantage(scores, index, norm_by_std):
    length = 5
    rewards = torch.zeros(len(scores), length)
    rewards[:, -1] = scores
    mask = torch.ones(len(scores), length)
    adv, _ = compute_grpo_outcome_advantage(
        rewards, mask, np.array(index, dtype=object), norm_adv_by_std_in_grpo=norm_by_std
    )
    return adv[:, 0]


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_matches_verl_on_mixed_groups(norm_by_std):
    gen = torch.Generator().manual_seed(0)
    # groups of sizes 5, 1 (single member), 3 all-success, 4, 2 all-failure, interleaved in the batch
    index = ["a"] * 5 + ["solo"] + ["ok"] * 3 + ["b"] * 4 + ["bad"] * 2
    scores = torch.rand(len(index), generator=gen)
    scores[6:9] = 1.0
    scores[13:15] = 0.0
    order = torch.randperm(len(index), generator=gen)
    scores = scores[order]
    index = [index[i] for i in order.tolist()]

    ours, std = group_outcome_advantage(scores, index, norm_by_std=norm_by_std)
    torch.testing.assert_close(ours, _verl_advantage(scores, index, norm_by_std), rtol=1e-5, atol=1e-5)
    solo = index.index("solo")
    assert std[solo] == 1.0
    for uniform in ("ok", "bad"):
        rows = [i for i, u in enumerate(index) if u == uniform]
        assert torch.all(ours[rows] == 0) and torch.all(std[rows] == 0)


def test_hand_computed_group():
    adv, std = group_outcome_advantage(torch.tensor([1.0, 0.0, 0.0]), [7, 7, 7])
    expected_std = (1 / 3) ** 0.5  # unbiased std of (1, 0, 0)
    torch.testing.assert_close(std, torch.full((3,), expected_std))
    torch.testing.assert_close(adv, torch.tensor([2 / 3, -1 / 3, -1 / 3]) / (expected_std + 1e-6))


def test_ids_are_not_merged_by_their_string_form():
    adv, _ = group_outcome_advantage(torch.tensor([1.0, 0.0]), [1, "1"], norm_by_std=False)
    torch.testing.assert_close(adv, torch.tensor([1.0, 0.0]))  # two groups of one


def test_rejects_bad_shapes():
    with pytest.raises(ValueError, match="1-D"):
        group_outcome_advantage(torch.zeros(2, 2), [0, 0])
    with pytest.raises(ValueError, match="index has 1 entries"):
        group_outcome_advantage(torch.zeros(2), [0])
