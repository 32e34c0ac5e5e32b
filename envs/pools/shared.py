"""One :class:`~envs.pools.ray_pool.EnvPool` per node, shared by every process on that node that asks for the same env.

verl runs ``rollout.agent.num_workers`` agent-loop worker processes (8 by default). With a pool per process,
``num_workers`` env processes each, the env processes (and the copies of the env's data, which every env process
loads once) would multiply by that count. Here the pool lives in a named Ray actor, one per node, environment,
constructor arguments and size; every process on the node reaches the same one through :class:`SharedEnvPool`.
A node therefore runs exactly ``num_workers`` env processes, whichever number of agent-loop workers it hosts, and
whichever splits they play (an episode names its split; see :class:`~envs.pools.hosting.EnvWorker`). The host and its
workers are placed on the node (``NodeAffinitySchedulingStrategy``, not soft).
"""

from __future__ import annotations

import contextlib
import json
import zlib
from typing import Any

import ray
from ray.exceptions import RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import envs
from envs.base import EnvState, StepReturn
from envs.pools.hosting import ResetReturn
from envs.pools.ray_pool import EnvPool, EnvPoolError
from envs.spec import EnvSpec


class EnvPoolHost:
    """The body of the named actor that owns a node's pool; it only forwards calls (no CPU reserved)."""

    def __init__(self, env_spec: EnvSpec, env_kwargs: dict[str, Any], pool_kwargs: dict[str, Any]):
        envs.register_env(env_spec)  # also envs registered at run time in the caller
        self._pool = EnvPool(env_spec.name, env_kwargs, **pool_kwargs)

    async def call(self, method: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        if method == "stats":
            return self._pool.stats()
        return await getattr(self._pool, method)(*args, **kwargs)

    def shutdown(self) -> None:
        self._pool.shutdown()


def shared_pool_name(env_name: str, env_kwargs: dict[str, Any], num_workers: int, node_id: str) -> str:
    """The Ray actor name of the node's pool: equal for equal env, constructor arguments, size and node."""
    digest = zlib.crc32(json.dumps(env_kwargs, sort_keys=True, default=str).encode())
    return f"prover_env_pool:{env_name}:{digest:08x}:{num_workers}:{node_id}"


class SharedEnvPool:
    """The async API of :class:`~envs.pools.ray_pool.EnvPool` on the node's shared pool (created by the first caller).

    Args:
        env_name: Registered environment name.
        env_kwargs: Constructor arguments of the environment.
        num_workers: Env worker processes of the node's pool.
        node_id: Ray node to place the pool on (default: this process's node).
        **pool_kwargs: Further :class:`~envs.pools.ray_pool.EnvPool` arguments (``call_timeout_s``,
            ``start_timeout_s``, ...).
    """

    def __init__(
        self,
        env_name: str,
        env_kwargs: dict[str, Any] | None = None,
        num_workers: int = 2,
        node_id: str | None = None,
        **pool_kwargs: Any,
    ):
        env_spec = envs.spec(env_name)  # raises ValueError for an unknown name
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        self.env_name = env_name
        env_kwargs = dict(env_kwargs or {})
        node_id = node_id or ray.get_runtime_context().get_node_id()
        self.name = shared_pool_name(env_name, env_kwargs, num_workers, node_id)
        self.node_id = node_id
        self._host_args = (env_spec, env_kwargs, {**pool_kwargs, "num_workers": num_workers})
        self._host = self._attach()

    def _attach(self):
        """The node's host actor: the running one, or a new one (the first process on the node creates it)."""
        return (
            ray.remote(EnvPoolHost)
            .options(
                name=self.name,
                get_if_exists=True,
                num_cpus=0,
                max_restarts=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(self.node_id, soft=False),
            )
            .remote(*self._host_args)
        )

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if self._host is None:
            self._host = self._attach()
        host = self._host
        try:
            return await host.call.remote(method, args, kwargs)
        except RayActorError as err:
            # The host died (its pool could not start: a worker that cannot be scheduled or cannot open its data
            # fails the host's constructor). The handle is dropped and the next call attaches again by name, and
            # every call says why the pool is down instead of raising a bare actor error.
            if self._host is host:
                self._host = None
            raise EnvPoolError(f"the env pool of node {self.node_id} ({self.name}) is down: {err}") from err

    async def reset(
        self, episode_id: str | None = None, *, task_id: str | None = None, seed=None, split: str | None = None
    ) -> ResetReturn:
        """See :meth:`envs.pools.ray_pool.EnvPool.reset`."""
        return await self._call("reset", episode_id, task_id=task_id, seed=seed, split=split)

    async def step(self, episode_id: str, action: str) -> StepReturn:
        """See :meth:`envs.pools.ray_pool.EnvPool.step`."""
        return await self._call("step", episode_id, action)

    async def snapshot(self, episode_id: str) -> EnvState:
        """See :meth:`envs.pools.ray_pool.EnvPool.snapshot`."""
        return await self._call("snapshot", episode_id)

    async def restore(self, state: EnvState, episode_id: str | None = None, *, split: str | None = None) -> ResetReturn:
        """See :meth:`envs.pools.ray_pool.EnvPool.restore`."""
        return await self._call("restore", state, episode_id, split=split)

    async def close(self, episode_id: str) -> None:
        """See :meth:`envs.pools.ray_pool.EnvPool.close`."""
        return await self._call("close", episode_id)

    async def data_fingerprint(self, split: str | None = None) -> str | None:
        """See :meth:`envs.pools.ray_pool.EnvPool.data_fingerprint`."""
        return await self._call("data_fingerprint", split)

    async def stats(self) -> dict[str, Any]:
        """The shared pool's counters (all processes' calls together)."""
        return await self._call("stats")

    def shutdown(self) -> None:
        """Stop the node's pool for every process that shares it."""
        if self._host is None:  # dropped after it died: nothing runs
            return
        with contextlib.suppress(RayActorError):  # a host that died at start has nothing to stop
            ray.get(self._host.shutdown.remote())
        ray.kill(self._host, no_restart=True)


__all__ = ["SharedEnvPool", "shared_pool_name"]
