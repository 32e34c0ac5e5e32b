"""The ``prover`` estimator through verl's own dispatchers, against a hand computation."""

import subprocess
import sys

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

from prover_verl.core import ForkOutcome, SegmentCredit, credit_tensor
from prover_verl.credit_channel import bind_credit

EPS = 1e-6
# rows: group "g" = 3 rows with outcomes (1, 0, 0); group "solo" = 1 row; group "all" = 2 successes.
MASK = torch.tensor(
    [
        [1, 1, 0, 0, 1, 1],  # g, success: policy, policy, env, env, policy, policy
        [1, 1, 1, 0, 0, 0],  # g, failure
        [1, 0, 1, 1, 0, 0],  # g, failure
        [1, 1, 0, 0, 0, 0],  # solo, success
        [1, 1, 1, 1, 1, 0],  # all
        [1, 1, 1, 0, 0, 0],  # all
    ]
)
OUTCOME = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
UID = np.array(["g", "g", "g", "solo", "all", "all"], dtype=object)


def _batch():
    rewards = torch.zeros(MASK.shape)
    last = MASK.shape[1] - 1 - torch.argmax(MASK.flip(-1), dim=-1)  # outcome on each row's last policy token
    rewards[torch.arange(len(MASK)), last] = OUTCOME
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": MASK}, non_tensors={"uid": UID.copy()}
    )


def _config(norm=True, coef=1.0, **prover):
    prover = {"coef": coef, **prover}
    return OmegaConf.create({"adv_estimator": "prover", "norm_adv_by_std_in_grpo": norm, "prover": prover})


def _credit():
    # the judge's segment (tokens 0..5 of the success, turns 1-2) verified from 1/4 to 3/4: estimate +0.5
    return credit_tensor([SegmentCredit(0, 0, 6, ForkOutcome(1, 4), ForkOutcome(3, 4))], MASK)


def _expected(norm, coef):
    std = (1 / 3) ** 0.5
    g = np.array([2 / 3, -1 / 3, -1 / 3]) / ((std + EPS) if norm else 1.0)
    bonus = coef * 0.5 / ((std + EPS) if norm else 1.0)
    rows = [
        [g[0] + bonus, g[0] + bonus, 0, 0, g[0] + bonus, g[0] + bonus],
        [g[1]] * 3 + [0] * 3,
        [g[2], 0, g[2], g[2], 0, 0],
        [1 / (1 + EPS) if norm else 1.0, 1 / (1 + EPS) if norm else 1.0, 0, 0, 0, 0],
        [0] * 6,
        [0] * 6,
    ]
    return torch.tensor(rows, dtype=torch.float32)


def test_registered_without_importing_prover_verl_by_hand():
    code = (
        "import sys; from verl.trainer.ppo.core_algos import get_adv_estimator_fn; "
        "fn = get_adv_estimator_fn('prover'); print(fn.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip().endswith("prover_verl.estimator")


@pytest.mark.parametrize("norm,coef", [(True, 1.0), (True, 0.5), (False, 2.0)])
def test_compute_advantage_dispatcher_matches_hand_computation(norm, coef):
    data = _batch()
    with bind_credit(_credit()):
        out = compute_advantage(data, adv_estimator="prover", config=_config(norm, coef))
    torch.testing.assert_close(out.batch["advantages"], _expected(norm, coef), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.batch["returns"], out.batch["advantages"])


def test_zero_credit_equals_verl_grpo():
    data = _batch()
    with bind_credit(torch.zeros(MASK.shape)):
        ours = compute_advantage(data, adv_estimator="prover", config=_config())
    grpo = compute_advantage(_batch(), adv_estimator="grpo", config=_config())
    torch.testing.assert_close(ours.batch["advantages"], grpo.batch["advantages"])


def test_v1_multi_trajectory_dispatcher():
    data = _batch()
    keys = [f"{u}_{i}_0" for i, u in enumerate(UID)]
    with bind_credit(_credit()):
        out = compute_advantage_for_multi_trajectories(data, keys, adv_estimator="prover", config=_config())
    torch.testing.assert_close(out.batch["advantages"], _expected(True, 1.0), rtol=1e-5, atol=1e-5)


def test_without_bound_credit_fails_instead_of_falling_back_to_grpo():
    with pytest.raises(RuntimeError, match="found no ProVer credit"):
        compute_advantage(_batch(), adv_estimator="prover", config=_config())


@pytest.mark.parametrize(
    "prover,message",
    [
        ({"k": 0}, "algorithm.prover.k must be"),
        ({"coef": -0.1}, "algorithm.prover.coef must be"),
        ({"kk": 3}, "unknown key.*algorithm.prover.kk"),
        ({"judge": {"typo": 1}}, "algorithm.prover.judge.typo"),
        ({"segment_side": "left"}, "algorithm.prover.segment_side"),
    ],
)
def test_invalid_config_fails_naming_the_key(prover, message):
    with bind_credit(_credit()), pytest.raises(ValueError, match=message):
        compute_advantage(_batch(), adv_estimator="prover", config=_config(**prover))


def test_misaligned_credit_is_rejected():
    fn = get_adv_estimator_fn("prover")
    data = _batch()
    kwargs = dict(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=MASK,
        index=UID,
        config=_config(),
    )
    uniform_group = torch.zeros(MASK.shape)
    uniform_group[4, 0] = 0.5
    for credit, message in [
        (torch.zeros(6, 5), "has shape"),
        (-_credit(), "negative"),
        (uniform_group, "uniform outcomes"),
    ]:
        with bind_credit(credit), pytest.raises(ValueError, match=message):
            fn(**kwargs)
    with bind_credit(_credit()), pytest.raises(ValueError, match="uid"):
        fn(**{**kwargs, "index": None})


def test_credit_on_tokens_the_mask_dropped_is_ignored():
    # verl's rollout-correction rejection sampling narrows response_mask before the advantage: the trainer checked
    # the credit against the agent loop's mask, the estimator just does not credit what is no longer trained
    data = _batch()
    narrowed = MASK.clone()
    narrowed[0, 4:] = 0  # the success's last policy tokens were rejected
    data.batch["response_mask"] = narrowed
    with bind_credit(_credit()):
        out = compute_advantage(data, adv_estimator="prover", config=_config())
    expected = _expected(True, 1.0) * narrowed
    torch.testing.assert_close(out.batch["advantages"], expected, rtol=1e-5, atol=1e-5)
