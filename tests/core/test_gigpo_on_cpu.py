"""GiGPO's math against hand computation, and GiGPO = GRPO when no state repeats."""

import numpy as np
import pytest
import torch
from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

from prover_verl.core.gigpo import anchor_step_advantage, gigpo_advantage, turn_fields

# One group "g" of three trajectories. Tokens: row 0 turn 0 = [0, 2), turn 1 = [3, 5); row 1 the same layout;
# row 2 has one turn, [0, 2). States: every row starts in S; rows 0 and 1 then both reach A.
S, A = 11, 22
TURNS = torch.tensor([[2, 2, 0, 1, 1], [2, 2, 0, 1, 1], [1, 1, 0, 0, 0]])
STATE = torch.tensor([[S, S, 0, A, A], [S, S, 0, A, A], [S, S, 0, 0, 0]])
SCORES = torch.tensor([1.0, 0.0, 1.0])
INDEX = np.array(["g", "g", "g"], dtype=object)


def test_turn_fields_mark_each_turns_tokens_and_cut_at_the_budget():
    assert turn_fields([(0, 2), (3, 5)], [7, 9], 4) == ([2, 2, 0, 1], [7, 7, 0, 9])
    with pytest.raises(ValueError, match="reserved"):
        turn_fields([(0, 2)], [0], 2)


@pytest.mark.parametrize("norm", [True, False])
def test_hand_computed_two_anchor_groups(norm):
    # gamma 0.5: step returns R_t = 0.5^(T-1-t) R. Row 0: (0.5, 1); row 1: (0, 0); row 2: (1,).
    # Anchor S: (0.5, 0, 1), mean 0.5, std 0.5 -> (0, -1, 1) [no std: (0, -0.5, 0.5)].
    # Anchor A: (1, 0), mean 0.5, std sqrt(0.5) -> (+0.7071, -0.7071) [no std: (0.5, -0.5)].
    # Episode: (1, 0, 1), mean 2/3, std sqrt(1/3) -> (0.5774, -1.1547, 0.5774) [no std: (1/3, -2/3, 1/3)].
    adv, stats = gigpo_advantage(SCORES, INDEX, TURNS, STATE, gamma=0.5, step_weight=0.5, norm_by_std=norm)
    if norm:
        e, s_s, s_a = [0.57735, -1.15470, 0.57735], [0.0, -1.0, 1.0], [0.70711, -0.70711]
    else:
        e, s_s, s_a = [1 / 3, -2 / 3, 1 / 3], [0.0, -0.5, 0.5], [0.5, -0.5]
    w = 0.5
    expected = torch.tensor(
        [
            [e[0] + w * s_s[0]] * 2 + [0] + [e[0] + w * s_a[0]] * 2,
            [e[1] + w * s_s[1]] * 2 + [0] + [e[1] + w * s_a[1]] * 2,
            [e[2] + w * s_s[2]] * 2 + [0, 0, 0],
        ]
    )
    torch.testing.assert_close(adv, expected, rtol=1e-4, atol=1e-4)
    assert stats == {"steps": 5.0, "anchor_steps_frac": 1.0, "anchor_groups": 2.0}


def test_lone_steps_get_no_step_advantage_and_groups_stay_apart():
    returns = torch.tensor([1.0, 0.0, 0.5, 0.7])
    adv, size = anchor_step_advantage(returns, ["g", "h", "g", "g"], [1, 1, 1, 2], norm_by_std=False)
    # (g, 1) = rows 0 and 2 (mean 0.75); (h, 1) and (g, 2) are alone: 0, not their raw return
    torch.testing.assert_close(adv, torch.tensor([0.25, 0.0, -0.25, 0.0]))
    assert size.tolist() == [2, 1, 2, 1]


@pytest.mark.parametrize("norm", [True, False])
@pytest.mark.parametrize("gamma", [0.95, 0.5])
def test_equals_grpo_when_no_state_repeats(norm, gamma):
    # two groups (one of a single row), every step in a state of its own
    turns = torch.tensor([[3, 3, 0, 2, 1], [2, 0, 1, 1, 0], [1, 1, 1, 0, 0], [2, 1, 0, 0, 0]])
    state = torch.tensor([[1, 1, 0, 2, 3], [4, 0, 5, 5, 0], [6, 6, 6, 0, 0], [7, 8, 0, 0, 0]])
    scores = torch.tensor([1.0, 0.0, 1.0, 1.0])
    index = np.array(["a", "a", "a", "solo"], dtype=object)
    mask = (turns > 0).float()
    ours, stats = gigpo_advantage(scores, index, turns, state, gamma, step_weight=1.0, norm_by_std=norm)
    rewards = torch.zeros(turns.shape)
    rewards[torch.arange(4), torch.tensor([4, 3, 2, 1])] = scores
    grpo, _ = compute_grpo_outcome_advantage(rewards, mask, index, norm_adv_by_std_in_grpo=norm)
    torch.testing.assert_close(ours, grpo)
    assert stats["anchor_steps_frac"] == 0.0


def test_inconsistent_turn_record_is_rejected():
    bad_state = STATE.clone()
    bad_state[0, 1] = A  # one token of row 0's first turn names another state
    with pytest.raises(ValueError, match="different state keys"):
        gigpo_advantage(SCORES, INDEX, TURNS, bad_state, 0.95, 1.0)
    bad_state = STATE.clone()
    bad_state[0, 2] = S  # a token outside every turn
    with pytest.raises(ValueError, match="disagree"):
        gigpo_advantage(SCORES, INDEX, TURNS, bad_state, 0.95, 1.0)
    with pytest.raises(ValueError, match="gamma"):
        gigpo_advantage(SCORES, INDEX, TURNS, STATE, 0.0, 1.0)
