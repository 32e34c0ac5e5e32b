"""Episode hosting, shared by every env pool, and the interface the pools share.

:class:`EnvWorker` keeps the episodes of one environment family in one process, keyed by episode id, and reuses
env instances across episodes. It imports no Ray: the Ray :class:`~envs.pools.ray_pool.EnvPool` runs it as the body of
each worker actor, and :class:`~envs.pools.local.LocalEnvPool` runs it in the caller's process.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, runtime_checkable

import envs
from envs.base import EnvState, StepReturn, TextEnv
from envs.spec import EnvSpec

T = TypeVar("T")
ResetReturn = tuple[str, str, dict[str, Any]]


@runtime_checkable
class EnvPoolLike(Protocol):
    """What the agent loop needs of an env pool (:func:`envs.pools.open_pool` returns one)."""

    async def reset(
        self, episode_id: str | None = None, *, task_id: str | None = None, seed=None, split: str | None = None
    ) -> ResetReturn:
        """Start an episode (of ``split``, else the pool's ``env_kwargs`` split); returns ``(episode_id,
        observation, info)``."""

    async def step(self, episode_id: str, action: str) -> StepReturn:
        """Apply ``action``; returns ``(observation, reward, terminated, truncated, info)``."""

    async def snapshot(self, episode_id: str) -> EnvState:
        """The episode's current state, restorable in any episode of the pool."""

    async def restore(self, state: EnvState, episode_id: str | None = None, *, split: str | None = None) -> ResetReturn:
        """Open a NEW episode at ``state`` (taken in ``split``); returns ``(episode_id, observation, info)``."""

    async def close(self, episode_id: str) -> Any:
        """End the episode (closing one that is not open does nothing)."""

    async def data_fingerprint(self, split: str | None = None) -> str | None:
        """The :meth:`~envs.base.TextEnv.data_fingerprint` of the pool's env of ``split``, where it runs."""


class EnvWorker:
    """Hosts episodes of one environment family in one process (the body of a Ray actor, or a local pool's).

    Env instances are reused across episodes, since ``reset`` and ``restore`` set the whole state and building
    one can load a catalog, a game or a search index. An episode may name a ``split``, which replaces
    ``env_kwargs["split"]`` for its env: one worker hosts the train and the validation episodes, each in an env of
    its own split, and the data the envs load once per process (catalog, corpus, games) is loaded once for both.

    Args:
        env_name: Registered environment name.
        env_spec: The spec of ``env_name`` in the pool's process, registered here too so that environments
            registered at run time reach a worker in another process; None: use this process's registry.
        env_kwargs: Constructor arguments of the environment.
        prewarm: Build one env at start, so that a bad configuration fails when the pool starts.
    """

    def __init__(self, env_name: str, env_spec: EnvSpec | None, env_kwargs: dict[str, Any], prewarm: bool = True):
        if env_spec is not None:
            envs.register_env(env_spec)
        self.env_name = env_name
        self.env_kwargs = env_kwargs
        self._free: dict[str | None, list[TextEnv]] = {}  # split -> idle envs
        self._episodes: dict[str, TextEnv] = {}
        self._split_of: dict[str, str | None] = {}
        self._built = 0
        if prewarm:
            self._free[None] = [self._make(None)]

    def ready(self) -> int:
        """Return the worker's process id (the pool waits on this before the first call)."""
        return os.getpid()

    def _make(self, split: str | None) -> TextEnv:
        self._built += 1
        return envs.make(self.env_name, **(self.env_kwargs if split is None else {**self.env_kwargs, "split": split}))

    def _env(self, episode_id: str) -> TextEnv:
        if episode_id not in self._episodes:
            raise KeyError(f"worker {os.getpid()} has no episode '{episode_id}'")
        return self._episodes[episode_id]

    def _open(self, episode_id: str, split: str | None, start: Callable[[TextEnv], T]) -> T:
        if episode_id in self._episodes:
            raise ValueError(f"episode '{episode_id}' is already open")
        free = self._free.get(split)
        env = free.pop() if free else self._make(split)
        result = start(env)  # if this raises, the env may be half-reset: it is dropped, not reused
        self._episodes[episode_id], self._split_of[episode_id] = env, split
        return result

    def reset(
        self, episode_id: str, seed: int | None, task_id: str | None, with_state: bool = True, split: str | None = None
    ) -> tuple[str, dict, EnvState | None]:
        """Open an episode by ``reset``; also return its initial state (None unless ``with_state``), from which
        it can be rebuilt exactly."""
        options = {"task_id": task_id} if task_id is not None else None

        def start(env: TextEnv) -> tuple[str, dict, EnvState | None]:
            obs, info = env.reset(seed=seed, options=options)
            return obs, info, env.snapshot() if with_state else None

        return self._open(episode_id, split, start)

    def restore(self, episode_id: str, state: EnvState, split: str | None = None) -> tuple[str, dict]:
        """Open an episode at ``state``."""
        return self._open(episode_id, split, lambda env: env.restore(state))

    def rebuild(self, episode_id: str, state: EnvState, actions: list[str], split: str | None = None) -> str:
        """Open an episode at ``state`` and replay ``actions``; return the last observation."""
        obs, _ = self.restore(episode_id, state, split)
        env = self._episodes[episode_id]
        for action in actions:
            obs = env.step(action)[0]
        return obs

    def step(self, episode_id: str, action: str) -> StepReturn:
        return self._env(episode_id).step(action)

    def snapshot(self, episode_id: str) -> EnvState:
        return self._env(episode_id).snapshot()

    def has_episode(self, episode_id: str) -> bool:
        """Whether ``episode_id`` is open here."""
        return episode_id in self._episodes

    def close(self, episode_id: str) -> bool:
        """End the episode and keep its env for the next one; False (nothing done) if it is not open."""
        env = self._episodes.pop(episode_id, None)
        if env is None:
            return False
        self._free.setdefault(self._split_of.pop(episode_id), []).append(env)
        return True

    def expert_actions(self, episode_id: str) -> list[str]:
        return self._env(episode_id).expert_actions()

    def _idle_env(self, split: str | None) -> TextEnv:
        free = self._free.setdefault(split, [])
        if not free:
            free.append(self._make(split))
        return free[0]

    def task_ids(self, split: str | None = None) -> list[str]:
        return self._idle_env(split).task_ids()

    def data_fingerprint(self, split: str | None = None) -> str | None:
        """The data fingerprint of this process's env of ``split`` (see :meth:`TextEnv.data_fingerprint`)."""
        return self._idle_env(split).data_fingerprint()

    def info(self) -> dict[str, int]:
        """Return ``{"pid", "episodes", "envs_built"}``."""
        return {"pid": os.getpid(), "episodes": len(self._episodes), "envs_built": self._built}


__all__ = ["EnvPoolLike", "EnvWorker", "ResetReturn"]
