"""The agent loop's env pools: one per env and constructor arguments, shared by the splits."""

import pytest

import envs
from envs.base import UnknownTaskError
from prover_verl.agent.pools import get_env_pool
from prover_verl.config import EnvConfig


@pytest.mark.slow
async def test_a_rows_split_selects_envs_of_that_split():
    # validation rows list tasks of another split (ALFWorld valid_unseen): their envs must be built for it, not for
    # env.kwargs' split (the CPU smoke's first validation failed on exactly this)
    config = EnvConfig(name="alfworld", kwargs={"split": "train", "max_steps": 5})
    task = envs.make("alfworld", split="valid_unseen").task_ids()[0]
    train, val = get_env_pool("alfworld", config), get_env_pool("alfworld", config, "valid_unseen")
    assert val.pool is train  # one pool, and one set of env processes, for both splits
    episode, obs, info = await val.reset(task_id=task)
    assert obs and info["task"] in obs
    state = await val.snapshot(episode)
    fork, fork_obs, _ = await val.restore(state)  # a fork opens in an env of the same split
    assert fork_obs == obs
    await val.close(episode)
    await val.close(fork)
    with pytest.raises(UnknownTaskError):
        await train.reset(task_id=task)


async def test_two_nodes_holding_different_data_for_the_same_rows_are_told_apart():
    from prover_verl.agent.pools import check_data_fingerprint
    from prover_verl.data import task_rows

    # node A's data (the rows are written from it) and node B's: the same env, task ids and path, other tasks
    (row, *_) = task_rows("keydoor", "train", True, {"family_seed": 0}, limit=2)
    expected = row["extra_info"]["data_fingerprint"]
    node_a = get_env_pool("keydoor", EnvConfig(name="keydoor", kwargs={"family_seed": 0}), "train")
    node_b = get_env_pool("keydoor", EnvConfig(name="keydoor", kwargs={"family_seed": 1}), "train")
    assert envs.make("keydoor", family_seed=1).has_task(row["extra_info"]["task_id"])  # the id names a task there
    await check_data_fingerprint(node_a, "keydoor", "train", expected)
    with pytest.raises(ValueError, match=rf"written from data {expected}, but the env on node .* holds data \w{{24}}"):
        await check_data_fingerprint(node_b, "keydoor", "train", expected)
