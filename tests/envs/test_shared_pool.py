"""The node's env pool: agent-loop worker processes of one node share one pool of ``num_workers`` env processes."""

import asyncio

import pytest
import ray

import envs.pools
from envs.pools.shared import SharedEnvPool, shared_pool_name

envs.register_env("toy", "envs.toy:ToyEnv")


pytestmark = pytest.mark.usefixtures("ray_cluster")


@ray.remote(num_cpus=0)
class AgentLoopWorkerStandIn:
    """A process like verl's agent-loop worker: it gets the pool the agent loop asks for and plays an episode."""

    async def play(self, task_id: str) -> tuple[str, int]:
        from prover_verl.agent.env_agent_loop import get_env_pool
        from prover_verl.config import EnvConfig

        envs.register_env("toy", "envs.toy:ToyEnv")
        pool = get_env_pool("toy", EnvConfig(name="toy", pool_workers=2, start_timeout_s=60.0))
        episode_id, _, _ = await pool.reset(task_id=task_id)
        await pool.step(episode_id, "press 1")
        await pool.close(episode_id)
        return pool.name, (await pool.stats())["num_workers"]


def test_two_agent_loop_workers_share_one_pool_of_the_nodes_size():
    workers = [AgentLoopWorkerStandIn.remote() for _ in range(2)]
    results = ray.get([w.play.remote(f"code-{i}") for i, w in enumerate(workers)])
    names = {name for name, _ in results}
    node = ray.get_runtime_context().get_node_id()
    assert names == {shared_pool_name("toy", {}, 2, node)}  # one pool for the node, not one per process
    pool = SharedEnvPool("toy", {}, num_workers=2)  # attaches to it as well
    assert isinstance(pool, envs.pools.EnvPoolLike)
    try:
        stats = asyncio.run(pool.stats())
        assert stats["resets"] == 2 and stats["steps"] == 2 and stats["closes"] == 2  # both processes' calls
        assert stats["num_workers"] == 2 and len(set(stats["worker_pids"])) == 2  # the node's env processes
    finally:
        pool.shutdown()
        for worker in workers:
            ray.kill(worker)


def test_different_env_arguments_get_different_pools():
    node = "n"
    assert shared_pool_name("toy", {"a": 1}, 2, node) != shared_pool_name("toy", {"a": 2}, 2, node)
    assert shared_pool_name("toy", {"a": 1, "b": 2}, 2, node) == shared_pool_name("toy", {"b": 2, "a": 1}, 2, node)
    assert shared_pool_name("toy", {}, 2, node) != shared_pool_name("toy", {}, 4, node)


def test_an_env_process_loads_the_data_once_for_all_its_envs():
    # the per-process figure of docs/reproduce.md is one copy of the data, whichever number of episodes it hosts
    first, second = envs.make("webshop"), envs.make("webshop")
    assert first.catalog is second.catalog
