"""``envs.pools.open_pool`` checks what it can before any episode: the env's name and, in this process, its arguments.

The pool layer (``envs.pools``) sits beside the env folders: ``import envs`` loads none of it.
"""

import subprocess
import sys

import pytest

import envs.pools
from envs.pools.local import LocalEnvPool

envs.register_env("toy", "envs.toy:ToyEnv")


async def test_local_pool_rejects_a_misspelled_env_kwarg_at_open_naming_the_env_and_its_arguments():
    # before, the misspelling passed open_pool and failed at the first reset, inside an agent-loop worker
    with pytest.raises(ValueError, match=r"env 'toy' does not take env_kwargs \['num_task'\].*num_tasks"):
        envs.pools.open_pool("toy", {"num_task": 4}, workers=0)
    pool = envs.pools.open_pool("toy", {"num_tasks": 4}, workers=0)
    assert isinstance(pool, LocalEnvPool)
    assert (await pool.reset(task_id="code-3"))[0]
    pool.shutdown()


# run in a fresh interpreter (this one has imported the pools already); prints what of the pool layer is loaded
_LOADED_POOL_LAYER = """
import sys
import envs

pool_names = {"EnvWorker", "EnvPoolLike", "open_pool", "EnvPool", "SharedEnvPool", "LocalEnvPool"}
print(sorted(
    f"{name}.{attr}" for name, module in list(sys.modules.items()) if name == "envs" or name.startswith("envs.")
    for attr in pool_names & set(vars(module))
) + sorted(name for name in sys.modules if name == "ray" or name.startswith("envs.pools")))
"""


def test_importing_envs_loads_no_pool_layer():
    # before, envs/__init__ imported the pool host (envs.hosting.EnvWorker) and defined open_pool itself
    out = subprocess.run([sys.executable, "-c", _LOADED_POOL_LAYER], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_old_names_envs_open_pool_and_envs_pool_like_are_the_pool_layers_own():
    assert envs.open_pool is envs.pools.open_pool
    assert envs.EnvPoolLike is envs.pools.EnvPoolLike
    with pytest.raises(AttributeError, match="module 'envs' has no attribute 'no_such_name'"):
        envs.no_such_name  # noqa: B018
