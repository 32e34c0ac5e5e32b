"""The ``gigpo`` estimator through verl's own dispatcher, its registration, and its config checks."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from prover_verl.credit_channel import bind_fields
from prover_verl.gigpo import STATE_FIELD, TURNS_FIELD

# group "g": rows 0 and 1 start in state 5 and reach state 6 (two turns), row 2 starts in 5 and ends (one turn)
TURNS = torch.tensor([[2, 2, 0, 1], [2, 0, 1, 1], [1, 1, 0, 0]])
STATE = torch.tensor([[5, 5, 0, 6], [5, 0, 6, 6], [5, 5, 0, 0]])
MASK = (TURNS > 0).long()
OUTCOME = torch.tensor([1.0, 0.0, 0.0])
UID = np.array(["g", "g", "g"], dtype=object)


def _batch(mask=MASK):
    rewards = torch.zeros(MASK.shape)
    rewards[torch.arange(3), torch.tensor([3, 3, 1])] = OUTCOME
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": UID.copy()}
    )


def _config(**gigpo):
    return OmegaConf.create({"adv_estimator": "gigpo", "norm_adv_by_std_in_grpo": True, "gigpo": gigpo})


def _fields():
    return {TURNS_FIELD: TURNS, STATE_FIELD: STATE}


def test_registered_without_importing_prover_verl_by_hand():
    lookup = "print(get_adv_estimator_fn('gigpo').__module__)"
    code = f"from verl.trainer.ppo.core_algos import get_adv_estimator_fn; {lookup}"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().endswith("prover_verl.gigpo")


def test_compute_advantage_dispatcher_matches_hand_computation():
    # defaults gamma 0.95, omega 1, std normalisation. Episode (1, 0, 0): mean 1/3, std sqrt(1/3):
    # (1.1547, -0.5774, -0.5774). Anchor 5: returns (0.95, 0, 0) -> (1.1547, -0.5774, -0.5774);
    # anchor 6: returns (1, 0), std sqrt(0.5) -> (0.7071, -0.7071).
    with bind_fields(**_fields()):
        out = compute_advantage(_batch(), adv_estimator="gigpo", config=_config())
    e, s5, s6 = [1.15470, -0.57735, -0.57735], [1.15470, -0.57735, -0.57735], [0.70711, -0.70711]
    expected = torch.tensor(
        [
            [e[0] + s5[0]] * 2 + [0, e[0] + s6[0]],
            [e[1] + s5[1], 0] + [e[1] + s6[1]] * 2,
            [e[2] + s5[2]] * 2 + [0, 0],
        ]
    )
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.batch["returns"], out.batch["advantages"])


def test_step_weight_zero_is_grpo():
    with bind_fields(**_fields()):
        ours = compute_advantage(_batch(), adv_estimator="gigpo", config=_config(step_weight=0.0))
    grpo = compute_advantage(_batch(), adv_estimator="grpo", config=_config())
    torch.testing.assert_close(ours.batch["advantages"], grpo.batch["advantages"])


def test_tokens_the_mask_dropped_get_nothing_but_their_steps_still_count():
    narrowed = MASK.clone()
    narrowed[0, 3] = 0  # rollout correction rejected row 0's second turn
    with bind_fields(**_fields()):
        full = compute_advantage(_batch(), adv_estimator="gigpo", config=_config()).batch["advantages"]
        out = compute_advantage(_batch(narrowed), adv_estimator="gigpo", config=_config()).batch["advantages"]
    torch.testing.assert_close(out, full * narrowed)


def test_without_bound_fields_fails_instead_of_falling_back_to_grpo():
    with pytest.raises(RuntimeError, match="found no GiGPO"):
        compute_advantage(_batch(), adv_estimator="gigpo", config=_config())


def test_policy_token_without_a_turn_is_rejected():
    turns = TURNS.clone()
    turns[0, 3], state = 0, STATE.clone()
    state[0, 3] = 0
    with bind_fields(**{TURNS_FIELD: turns, STATE_FIELD: state}), pytest.raises(ValueError, match="without a recorded"):
        compute_advantage(_batch(), adv_estimator="gigpo", config=_config())


@pytest.mark.parametrize(
    "gigpo,message",
    [
        ({"gamma": 0.0}, "algorithm.gigpo.gamma must be"),
        ({"gamma": 1.5}, "algorithm.gigpo.gamma must be"),
        ({"step_weight": -1}, "algorithm.gigpo.step_weight must be"),
        ({"norm_by_std": "yes"}, "algorithm.gigpo.norm_by_std must be"),
        ({"omega": 1.0}, "unknown key.*algorithm.gigpo.omega"),
    ],
)
def test_invalid_config_fails_naming_the_key(gigpo, message):
    with bind_fields(**_fields()), pytest.raises(ValueError, match=message):
        compute_advantage(_batch(), adv_estimator="gigpo", config=_config(**gigpo))
