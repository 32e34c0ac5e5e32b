"""A full ProVer step on a real ALFWorld game: rollouts, judge, forks (native restore), continuations, credit."""

import asyncio

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.trainer.ppo.ray_trainer import compute_advantage

from envs.alfworld.env import AlfWorldEnv
from prover_verl.credit_channel import CREDIT_FIELD, bind_credit


@pytest.fixture(scope="module")
def game():
    env = AlfWorldEnv()
    task_id = next(t for t in env.task_ids() if env.task_type(t) == "pick_and_place_simple")
    env.reset(options={"task_id": task_id})
    return task_id, env.expert_actions()


async def test_prover_step_on_alfworld_matches_hand_computation(game, make_loop, make_config, tokenizer):
    from tests.conftest import PlanServer  # noqa: PLC0415

    task_id, plan = game
    steps = len(plan)  # max_steps = plan length: the wasted "look" at turn 0 always fails the episode
    env = {"name": "alfworld", "kwargs": {"max_steps": steps}, "max_turns": steps}
    config = make_config(k=4, env=env, prompt_length=4096, response_length=32768)
    server = PlanServer(tokenizer, plan)
    extra = {"env": "alfworld", "task_id": task_id, "verify": True}
    loops = [make_loop(config, server) for _ in range(4)]
    outputs = await asyncio.gather(
        *(loop.run({}, uid="alf", session_id=i, global_steps=1, extra_info=extra) for i, loop in enumerate(loops))
    )
    rewards = [o.reward_score for o in outputs]
    assert sorted(rewards) == [0.0, 0.0, 1.0, 1.0]
    leader = outputs[0].prover_stats
    assert leader["judge_ok"] == 1 and leader["verified"] == 1 and len(server.judge_prompts) == 1
    # before turn 0: the 4 continuations alternate again (2 of 4 take the plan); after it: all 4 succeed
    assert leader["estimate_sum"] == pytest.approx(0.5)
    # continuations: 4 from turn 0 (each runs to max_steps) + 4 from turn 1 (steps - 1 each)
    assert leader["verify_env_steps"] == 4 * steps + 4 * (steps - 1)
    assert sum(o.prover_stats["env_steps"] for o in outputs) == 4 * steps

    (row,) = [i for i, o in enumerate(outputs) if any(o.prover_credit)]
    assert rewards[row] == 1.0
    mask = torch.tensor(outputs[row].response_mask)
    credit = torch.tensor(outputs[row].prover_credit)
    first_run_end = int(torch.nonzero(mask == 0)[0])  # turn 0's policy tokens end at the first env token
    expected_credit = torch.zeros_like(credit)
    expected_credit[:first_run_end] = 0.5
    torch.testing.assert_close(credit, expected_credit)

    width = max(len(o.response_mask) for o in outputs)
    pad = lambda xs: torch.tensor([list(x) + [0] * (width - len(x)) for x in xs], dtype=torch.float32)  # noqa: E731
    mask_b = pad([o.response_mask for o in outputs])
    rewards_b = torch.zeros_like(mask_b)
    rewards_b[:, -1] = torch.tensor(rewards)
    batch = DataProto.from_dict(
        tensors={"token_level_rewards": rewards_b, "response_mask": mask_b},
        non_tensors={"uid": np.array(["alf"] * 4, dtype=object)},
    )
    with bind_credit(pad([o.prover_credit for o in outputs])):
        adv = compute_advantage(batch, adv_estimator="prover", config=config.algorithm).batch["advantages"]
    std = (4 * 0.25 / 3) ** 0.5
    expected = torch.tensor([(r - 0.5) / (std + 1e-6) for r in rewards]).unsqueeze(-1) * mask_b
    expected[row, :first_run_end] += 0.5 / (std + 1e-6)
    torch.testing.assert_close(adv, expected, rtol=1e-5, atol=1e-5)
    assert CREDIT_FIELD in outputs[row].as_dict()
