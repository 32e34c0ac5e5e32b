"""An in-process environment pool with the same async interface as the Ray :class:`envs.pools.ray_pool.EnvPool`.

For tests and small runs: the episodes live in an :class:`~envs.pools.hosting.EnvWorker` in this process (the host each
Ray worker runs), and its calls run on one worker thread so that the asyncio loop of an agent-loop worker is not
blocked by a slow step. One thread, because env steps are CPU-bound Python (the GIL gives threads nothing) and not
every env is thread-safe (TextWorld's PDDL parser is not); the Ray pool is the way to run envs in parallel.
"""

from __future__ import annotations

import asyncio
import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from envs.base import EnvState, StepReturn
from envs.pools.hosting import EnvWorker, ResetReturn


class LocalEnvPool:
    """Episodes of one environment family in this process.

    Args:
        env_name: Registered environment name (see :func:`envs.make`).
        env_kwargs: Constructor arguments of the environment.
        max_threads: Env calls that may run at once; more than 1 only for envs known to be thread-safe.
    """

    def __init__(self, env_name: str, env_kwargs: dict[str, Any] | None = None, max_threads: int = 1):
        self.env_name = env_name
        self.env_kwargs = dict(env_kwargs or {})
        self._executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix=f"{env_name}-env")
        self._worker = EnvWorker(env_name, None, self.env_kwargs, prewarm=False)
        self._ids = itertools.count()

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _new_id(self, episode_id: str | None) -> str:
        if episode_id is None:
            return f"{self.env_name}-{next(self._ids)}"
        if self._worker.has_episode(episode_id):
            raise ValueError(f"episode {episode_id} already exists")
        return episode_id

    async def reset(
        self,
        episode_id: str | None = None,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        split: str | None = None,
    ) -> ResetReturn:
        """Start an episode (in an env of ``split``); returns ``(episode_id, observation, info)``."""
        episode_id = self._new_id(episode_id)
        obs, info, _ = await self._call(self._worker.reset, episode_id, seed, task_id, False, split)
        return episode_id, obs, info

    async def step(self, episode_id: str, action: str) -> StepReturn:
        """Apply ``action`` in the episode."""
        return await self._call(self._worker.step, episode_id, action)

    async def snapshot(self, episode_id: str) -> EnvState:
        """Snapshot the episode."""
        return await self._call(self._worker.snapshot, episode_id)

    async def restore(self, state: EnvState, episode_id: str | None = None, *, split: str | None = None) -> ResetReturn:
        """Open a new episode at ``state`` (taken in ``split``); returns ``(episode_id, observation, info)``."""
        episode_id = self._new_id(episode_id)
        obs, info = await self._call(self._worker.restore, episode_id, state, split)
        return episode_id, obs, info

    async def close(self, episode_id: str) -> bool:
        """End the episode and keep its environment for reuse; False (and nothing done) if it is not open."""
        return self._worker.close(episode_id)

    async def data_fingerprint(self, split: str | None = None) -> str | None:
        """The data fingerprint of this process's env of ``split``."""
        return await self._call(self._worker.data_fingerprint, split)

    def shutdown(self) -> None:
        """Stop the worker threads."""
        self._executor.shutdown(wait=False, cancel_futures=True)


__all__ = ["LocalEnvPool"]
