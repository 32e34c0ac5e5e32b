"""An in-process environment pool with the same async interface as the Ray :class:`envs.pool.EnvPool`.

For tests and small runs: episodes live in this process, and env calls run on one worker thread so that the
asyncio loop of an agent-loop worker is not blocked by a slow step. One thread, because env steps are CPU-bound
Python (the GIL gives threads nothing) and not every env is thread-safe (TextWorld's PDDL parser is not); the
Ray pool is the way to run envs in parallel. Environment instances are reused across
episodes (``reset`` and ``restore`` set the whole state), since building one can load a catalog or an index.
"""

from __future__ import annotations

import asyncio
import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import envs
from envs.base import EnvState, StepReturn, TextEnv


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
        self._free: list[TextEnv] = []
        self._episodes: dict[str, TextEnv] = {}
        self._ids = itertools.count()

    async def _call(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def _acquire(self, episode_id: str | None) -> tuple[str, TextEnv]:
        episode_id = episode_id or f"{self.env_name}-{next(self._ids)}"
        if episode_id in self._episodes:
            raise ValueError(f"episode {episode_id} already exists")
        env = self._free.pop() if self._free else envs.make(self.env_name, **self.env_kwargs)
        self._episodes[episode_id] = env
        return episode_id, env

    def _env(self, episode_id: str) -> TextEnv:
        if episode_id not in self._episodes:
            raise KeyError(f"no open episode {episode_id}")
        return self._episodes[episode_id]

    async def reset(
        self, episode_id: str | None = None, *, task_id: str | None = None, seed: int | None = None
    ) -> tuple[str, str, dict[str, Any]]:
        """Start an episode; returns ``(episode_id, observation, info)``."""
        options = {"task_id": task_id} if task_id is not None else None
        return await self._open(episode_id, lambda env: env.reset(seed=seed, options=options))

    async def step(self, episode_id: str, action: str) -> StepReturn:
        """Apply ``action`` in the episode."""
        return await self._call(self._env(episode_id).step, action)

    async def snapshot(self, episode_id: str) -> EnvState:
        """Snapshot the episode."""
        return await self._call(self._env(episode_id).snapshot)

    async def restore(self, state: EnvState, episode_id: str | None = None) -> tuple[str, str, dict[str, Any]]:
        """Open a new episode at ``state``; returns ``(episode_id, observation, info)``."""
        return await self._open(episode_id, lambda env: env.restore(state))

    async def _open(self, episode_id: str | None, start) -> tuple[str, str, dict[str, Any]]:
        episode_id, env = self._acquire(episode_id)
        try:
            obs, info = await self._call(start, env)
        except BaseException:
            del self._episodes[episode_id]  # the env may be half-reset: do not reuse it
            raise
        return episode_id, obs, info

    async def close(self, episode_id: str) -> bool:
        """End the episode and keep its environment for reuse; False (and nothing done) if it is not open."""
        if episode_id not in self._episodes:
            return False
        self._free.append(self._episodes.pop(episode_id))
        return True

    def shutdown(self) -> None:
        """Stop the worker threads."""
        self._executor.shutdown(wait=False, cancel_futures=True)
