"""``envs.open_pool`` checks what it can before any episode: the env's name and, in this process, its arguments."""

import pytest

import envs
from envs.local_pool import LocalEnvPool

envs.register_env("toy", "envs.toy:ToyEnv")


async def test_local_pool_rejects_a_misspelled_env_kwarg_at_open_naming_the_env_and_its_arguments():
    # before, the misspelling passed open_pool and failed at the first reset, inside an agent-loop worker
    with pytest.raises(ValueError, match=r"env 'toy' does not take env_kwargs \['num_task'\].*num_tasks"):
        envs.open_pool("toy", {"num_task": 4}, workers=0)
    pool = envs.open_pool("toy", {"num_tasks": 4}, workers=0)
    assert isinstance(pool, LocalEnvPool)
    assert (await pool.reset(task_id="code-3"))[0]
    pool.shutdown()
