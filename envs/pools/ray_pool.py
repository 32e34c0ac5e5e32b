"""A pool of environment episodes spread over Ray actors, robust to hung and crashed workers.

Each :class:`EnvWorker` actor hosts many episodes of one environment family, keyed by episode id. The pool
places new episodes on the least-loaded worker and keeps, per episode, the last :class:`EnvState` it saw
(taken at reset, restore or snapshot) plus the actions applied since. Environments are deterministic, so when
a worker dies (the env crashed its process) or hangs past ``call_timeout_s`` (the pool kills it), the pool
starts a new actor in its place and rebuilds every episode it hosted by restore + replay; nothing is lost.

The call that crashed or hung is not retried (it would crash or hang again): it raises
:class:`EnvWorkerError` or :class:`EnvTimeoutError`, and its episode stays usable at the state before that
action. Calls of other episodes that waited for the restarted worker run on the new one as if nothing
happened. A worker that needs more than ``max_restarts`` restarts fails the whole pool.

A worker runs one call at a time (env steps are CPU-bound Python), and the pool sends it one call at a time,
so the timeout measures the call itself, not its wait in a queue, and a crash has exactly one culprit.
The pool's bookkeeping lives on a private event loop thread: the async API can be awaited from any event loop
(verl's agent-loop workers run one per process) and :attr:`EnvPool.sync` serves scripts and tests.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import itertools
import logging
import os
import threading
from collections.abc import Coroutine
from typing import Any

import ray
from ray.exceptions import RayActorError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

import envs
from envs.base import EnvState, StepReturn
from envs.pools.hosting import EnvWorker, ResetReturn

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))


class EnvPoolError(RuntimeError):
    """The pool cannot serve a call (it is shut down, or a worker exceeded ``max_restarts``)."""


class EnvWorkerError(EnvPoolError):
    """A call killed its worker process, or the worker could not be restarted."""


class EnvTimeoutError(EnvPoolError, TimeoutError):
    """A call did not return within ``call_timeout_s``; its worker was killed and restarted."""


@dataclasses.dataclass
class _Episode:
    worker: int
    state: EnvState  # last state the pool saw; with ``actions`` it rebuilds the episode exactly
    actions: list[str]
    last_obs: str
    split: str | None = None  # the split its env was built for (None: the pool's env_kwargs)
    broken: str | None = None  # why the episode can no longer be used


@dataclasses.dataclass
class _Slot:
    index: int
    actor: Any
    ready_ref: Any  # pending ``ready`` of a new actor, awaited by the first call
    lock: asyncio.Lock
    pid: int | None = None
    restarts: int = 0
    load: int = 0  # open + opening episodes


class EnvPool:
    """Episodes of one environment family on ``num_workers`` Ray actors.

    Args:
        env_name: Registered environment name (see :func:`envs.make`).
        env_kwargs: Constructor arguments of the environment.
        num_workers: Worker actors.
        call_timeout_s: Seconds one env call may take; a rebuild may take this per replayed action.
        max_restarts: Restarts allowed per worker; one more fails the pool.
        worker_num_cpus: Ray CPUs each worker reserves.
        start_timeout_s: Seconds a worker may take to start (import the env, build the first instance).
        node_id: Ray node the workers are placed on (default: the node of the process that makes the pool):
            the pool is a node's, and its workers must not land on another node.
        wait_ready: Block in the constructor until every worker has started (errors show at once). With
            ``False`` the first call on each worker waits instead, which keeps a running event loop free.
    """

    def __init__(
        self,
        env_name: str,
        env_kwargs: dict[str, Any] | None = None,
        num_workers: int = 2,
        call_timeout_s: float = 60.0,
        max_restarts: int = 3,
        *,
        worker_num_cpus: float = 1.0,
        start_timeout_s: float = 300.0,
        wait_ready: bool = True,
        node_id: str | None = None,
    ):
        if num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if call_timeout_s <= 0 or start_timeout_s <= 0:
            raise ValueError(f"timeouts must be > 0, got {call_timeout_s} and {start_timeout_s}")
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
        self._env_spec = envs.spec(env_name)  # raises ValueError for an unknown name
        self.env_name = env_name
        self.env_kwargs = dict(env_kwargs or {})
        self.call_timeout_s = call_timeout_s
        self.max_restarts = max_restarts
        self.start_timeout_s = start_timeout_s
        if not ray.is_initialized():
            ray.init(include_dashboard=False)
        self.node_id = node_id or ray.get_runtime_context().get_node_id()
        check_placeable(env_name, self.node_id, num_workers, worker_num_cpus)
        self.placement = NodeAffinitySchedulingStrategy(self.node_id, soft=False)
        self._actor_cls = ray.remote(EnvWorker).options(
            num_cpus=worker_num_cpus, max_restarts=0, max_concurrency=1, scheduling_strategy=self.placement
        )
        self._episodes: dict[str, _Episode] = {}
        self._opening: set[str] = set()
        self._ids = itertools.count()
        self._failed: EnvPoolError | None = None
        self._closing = False  # set by shutdown: a worker that dies from now on was killed by it
        self._stats = dict.fromkeys(
            ["resets", "restores", "steps", "snapshots", "closes", "timeouts", "crashes", "restarts", "rebuilds"], 0
        )
        self._stats["replayed_actions"] = 0
        self._slots = [
            _Slot(i, actor, actor.ready.remote(), asyncio.Lock())
            for i, actor in enumerate(self._spawn() for _ in range(num_workers))
        ]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"envpool-{env_name}", daemon=True)
        self._thread.start()
        self.sync = SyncEnvPool(self)
        if wait_ready:
            try:
                self._run_sync(self._start_all())
            except BaseException:
                self.shutdown()
                raise

    def _spawn(self):
        return self._actor_cls.remote(self.env_name, self._env_spec, self.env_kwargs)

    @property
    def num_workers(self) -> int:
        """Worker actors of the pool."""
        return len(self._slots)

    # ------------------------------------------------------------------ public async API
    async def reset(
        self,
        episode_id: str | None = None,
        *,
        task_id: str | None = None,
        seed: int | None = None,
        worker=None,
        split: str | None = None,
    ) -> ResetReturn:
        """Start an episode on the least-loaded worker (or on ``worker``), in an env of ``split`` (default: the
        pool's ``env_kwargs``).

        Returns:
            ``(episode_id, observation, info)``.
        """
        return await self._run(self._reset(episode_id, task_id, seed, worker, split))

    async def step(self, episode_id: str, action: str) -> StepReturn:
        """Apply ``action``; returns ``(observation, reward, terminated, truncated, info)``."""
        return await self._run(self._step(episode_id, action))

    async def snapshot(self, episode_id: str) -> EnvState:
        """Return the episode's current state, restorable on any worker (or any process with the same env)."""
        return await self._run(self._snapshot(episode_id))

    async def restore(
        self, state: EnvState, episode_id: str | None = None, *, worker=None, split: str | None = None
    ) -> ResetReturn:
        """Open a NEW episode at ``state`` on the least-loaded worker (or on ``worker``), in an env of ``split``
        (the split the state was taken in).

        Returns:
            ``(episode_id, observation, info)``.
        """
        return await self._run(self._restore(state, episode_id, worker, split))

    async def close(self, episode_id: str) -> bool:
        """End the episode (its worker keeps the env instance for the next one).

        The episode is closed even if its worker dies or hangs during the call (the worker is restarted for its
        other episodes). Closing an episode that is not open does nothing.

        Returns:
            True if an open episode was closed, False if no episode ``episode_id`` was open (closed already).
        """
        return await self._run(self._close(episode_id))

    async def expert_actions(self, episode_id: str) -> list[str]:
        """The env's expert actions for the episode's task, from reset (see :meth:`TextEnv.expert_actions`)."""
        return await self._run(self._query(episode_id, "expert_actions"))

    async def task_ids(self, split: str | None = None) -> list[str]:
        """The task ids of the environment (of ``split``)."""
        return await self._run(self._query(None, "task_ids", split))

    async def data_fingerprint(self, split: str | None = None) -> str | None:
        """The data fingerprint of the workers' env of ``split`` (the data on this pool's node)."""
        return await self._run(self._query(None, "data_fingerprint", split))

    def worker_of(self, episode_id: str) -> int:
        """The index of the worker hosting the episode."""
        return self._episode(episode_id, usable=False).worker

    def stats(self) -> dict[str, Any]:
        """Counters since start, plus the open episodes and the process id of each worker."""
        return {
            **self._stats,
            "num_workers": self.num_workers,
            "open_episodes": len(self._episodes),
            "worker_loads": [slot.load for slot in self._slots],
            "worker_restarts": [slot.restarts for slot in self._slots],
            "worker_pids": [slot.pid for slot in self._slots],
        }

    def shutdown(self) -> None:
        """Kill the workers and stop the pool's event loop (idempotent)."""
        if self._loop.is_closed():
            return
        self._failed = self._failed or EnvPoolError(f"env pool '{self.env_name}' is shut down")
        self._closing = True
        # end the calls still in flight before the workers die, so that none of them sees its worker's death,
        # takes it for a crash and restarts a worker; and so that no caller waits forever on a stopped loop
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(_cancel_tasks(), self._loop).result(timeout=10)
        for slot in self._slots:
            _kill(slot.actor)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # ------------------------------------------------------------------ plumbing between event loops
    async def _run(self, coro: Coroutine) -> Any:
        self._check_open(coro)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        # shield: a caller that gives up must not cancel a call the worker may already have applied, or the
        # pool's record of the episode would miss an action.
        try:
            return await asyncio.shield(asyncio.wrap_future(future))
        except asyncio.CancelledError:
            if future.cancelled():  # by shutdown, not by the caller
                raise EnvPoolError(f"env pool '{self.env_name}' was shut down during the call") from None
            raise

    def _run_sync(self, coro: Coroutine) -> Any:
        self._check_open(coro)
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise EnvPoolError(f"env pool '{self.env_name}' was shut down during the call") from None

    def _check_open(self, coro: Coroutine) -> None:
        if self._loop.is_closed():
            coro.close()
            raise EnvPoolError(f"env pool '{self.env_name}' is shut down")

    # ------------------------------------------------------------------ implementation (on the pool's loop)
    def _episode(self, episode_id: str, usable: bool = True) -> _Episode:
        if episode_id not in self._episodes:
            raise KeyError(f"env pool '{self.env_name}' has no open episode '{episode_id}'")
        episode = self._episodes[episode_id]
        if usable and episode.broken:
            raise EnvWorkerError(f"episode '{episode_id}' of env '{self.env_name}' is lost: {episode.broken}")
        return episode

    @contextlib.asynccontextmanager
    async def _held(self, episode_id: str):
        """Yield ``(episode, slot)`` with the episode's worker lock held.

        The episode is looked up again once the lock is held: a restart while this call waited may have lost it.
        """
        slot = self._slots[self._episode(episode_id).worker]
        async with slot.lock:
            yield self._episode(episode_id), slot

    def _new_id(self, episode_id: str | None) -> str:
        if episode_id is None:
            episode_id = f"{self.env_name}-{next(self._ids)}"
            while episode_id in self._episodes or episode_id in self._opening:
                episode_id = f"{self.env_name}-{next(self._ids)}"
        elif episode_id in self._episodes or episode_id in self._opening:
            raise ValueError(f"episode '{episode_id}' already exists in env pool '{self.env_name}'")
        return episode_id

    def _pick(self, worker: int | None) -> _Slot:
        if worker is None:
            return min(self._slots, key=lambda slot: slot.load)
        if not 0 <= worker < self.num_workers:
            raise ValueError(f"worker must be in [0, {self.num_workers}), got {worker}")
        return self._slots[worker]

    async def _open(
        self, episode_id: str | None, worker: int | None, method: str, args: tuple, what: str
    ) -> tuple[str, int, Any]:
        if self._failed:
            raise self._failed
        episode_id, slot = self._new_id(episode_id), self._pick(worker)
        self._opening.add(episode_id)
        slot.load += 1
        try:
            async with slot.lock:
                result = await self._invoke(slot, method, (episode_id, *args), f"episode '{episode_id}' {what}")
        except BaseException:
            slot.load -= 1
            raise
        finally:
            self._opening.discard(episode_id)
        return episode_id, slot.index, result

    async def _reset(self, episode_id, task_id, seed, worker, split=None) -> ResetReturn:
        what = f"reset(task_id={task_id!r}, seed={seed!r}, split={split!r})"
        args = (seed, task_id, True, split)
        episode_id, index, (obs, info, state) = await self._open(episode_id, worker, "reset", args, what)
        self._episodes[episode_id] = _Episode(index, state, [], obs, split)
        self._stats["resets"] += 1
        return episode_id, obs, info

    async def _restore(self, state: EnvState, episode_id, worker, split=None) -> ResetReturn:
        if not isinstance(state, EnvState):
            raise TypeError(f"restore expects an EnvState, got {type(state).__name__}")
        what = f"restore(task_id={state.task_id!r}, step={state.step_count}, split={split!r})"
        episode_id, index, (obs, info) = await self._open(episode_id, worker, "restore", (state, split), what)
        self._episodes[episode_id] = _Episode(index, state, [], obs, split)
        self._stats["restores"] += 1
        return episode_id, obs, info

    async def _step(self, episode_id: str, action: str) -> StepReturn:
        if self._failed:
            raise self._failed
        async with self._held(episode_id) as (episode, slot):
            result = await self._invoke(slot, "step", (episode_id, action), f"episode '{episode_id}' action {action!r}")
            # recorded under the lock: a rebuild must replay actions in the order the worker applied them
            episode.actions.append(action)
            episode.last_obs = result[0]
        self._stats["steps"] += 1
        return result

    async def _snapshot(self, episode_id: str) -> EnvState:
        if self._failed:
            raise self._failed
        async with self._held(episode_id) as (episode, slot):
            state = await self._invoke(slot, "snapshot", (episode_id,), f"episode '{episode_id}' snapshot")
            episode.state, episode.actions = state, []  # a shorter replay for a later rebuild
        self._stats["snapshots"] += 1
        return state

    async def _query(self, episode_id: str | None, method: str, *args: Any) -> Any:
        """A call that reads, and does not change, an episode (or any worker's env, for ``episode_id=None``)."""
        if episode_id is None:
            async with self._slots[0].lock:
                return await self._invoke(self._slots[0], method, args, method)
        async with self._held(episode_id) as (_, slot):
            return await self._invoke(slot, method, (episode_id,), f"episode '{episode_id}' {method}")

    async def _close(self, episode_id: str) -> bool:
        if episode_id not in self._episodes:
            return False
        slot = self._slots[self._episodes[episode_id].worker]
        async with slot.lock:
            episode = self._episodes.pop(episode_id, None)  # forgotten first: a restart must not rebuild it
            if episode is None:  # closed by another call while this one waited
                return False
            slot.load -= 1
            self._stats["closes"] += 1
            if not episode.broken and not self._failed:
                try:
                    await self._invoke(slot, "close", (episode_id,), f"episode '{episode_id}' close")
                except (EnvWorkerError, EnvTimeoutError) as err:
                    if self._failed:
                        raise
                    # closed all the same: its env went with the worker, which was restarted for the others
                    logger.warning("env pool '%s': closed episode '%s' anyway: %s", self.env_name, episode_id, err)
        return True

    async def _start_all(self) -> None:
        for slot in self._slots:
            async with slot.lock:
                await self._await_ready(slot)

    async def _await_ready(self, slot: _Slot, first_start: bool = True) -> None:
        if slot.ready_ref is None:
            return
        try:
            slot.pid = await asyncio.wait_for(_wrap(slot.ready_ref), self.start_timeout_s)
        except (RayActorError, asyncio.TimeoutError) as err:
            if not first_start:
                raise
            # a worker that cannot start (bad env kwargs, missing data) will not start after a restart either
            how = f"did not start within {self.start_timeout_s}s" if isinstance(err, asyncio.TimeoutError) else "died"
            self._failed = EnvPoolError(
                f"worker {slot.index} of env pool '{self.env_name}' (kwargs {self.env_kwargs}) failed to start "
                f"({how}): {err}"
            )
            raise self._failed from err
        slot.ready_ref = None

    async def _invoke(self, slot: _Slot, method: str, args: tuple, what: str) -> Any:
        """Run one worker call; the caller holds ``slot.lock``. A timeout or crash restarts the worker."""
        if self._failed:  # checked again here: the pool may have failed while this call waited for the lock
            raise self._failed
        await self._await_ready(slot)
        ref = getattr(slot.actor, method).remote(*args)
        try:
            return await asyncio.wait_for(_wrap(ref), self.call_timeout_s)
        except RayTaskError:  # the env raised and the worker is fine; caught first, as the env's TimeoutError is one
            raise
        except asyncio.TimeoutError:
            self._stats["timeouts"] += 1
            reason = f"env '{self.env_name}' {what} did not return within {self.call_timeout_s}s"
            await self._restart(slot, reason)
            raise EnvTimeoutError(f"{reason}; worker {slot.index} was killed and restarted") from None
        except RayActorError as err:
            if self._closing:
                raise EnvPoolError(f"env pool '{self.env_name}' was shut down during the call") from None
            self._stats["crashes"] += 1
            # the call or a kill from outside the pool (OOM killer, a signal) may have ended the process
            reason = f"worker {slot.index} (pid {slot.pid}) of env '{self.env_name}' died during {what}"
            await self._restart(slot, reason)
            raise EnvWorkerError(f"{reason}; the worker was restarted and its other episodes rebuilt") from err

    async def _restart(self, slot: _Slot, reason: str) -> None:
        """Replace the worker of ``slot`` and rebuild its episodes; fail the pool past ``max_restarts``."""
        while True:
            if self._closing:
                raise EnvPoolError(f"env pool '{self.env_name}' was shut down during the call")
            _kill(slot.actor)
            slot.restarts += 1
            self._stats["restarts"] += 1
            if slot.restarts > self.max_restarts:
                self._failed = EnvWorkerError(
                    f"worker {slot.index} of env pool '{self.env_name}' needs restart {slot.restarts} "
                    f"> max_restarts={self.max_restarts}; the pool is failed. Last cause: {reason}"
                )
                raise self._failed
            logger.warning("restarting worker %d of env pool '%s': %s", slot.index, self.env_name, reason)
            slot.actor = self._spawn()
            slot.ready_ref = slot.actor.ready.remote()
            try:
                await self._await_ready(slot, first_start=False)
            except asyncio.TimeoutError:
                # Not retried: a replacement that Ray cannot schedule (no free CPU) or start would only wait as
                # long again, max_restarts times over, while every call on this worker waits too.
                self._failed = EnvWorkerError(
                    f"worker {slot.index} of env pool '{self.env_name}' was restarted but the new worker did not "
                    f"start within start_timeout_s={self.start_timeout_s}s (has the Ray cluster a free CPU for "
                    f"it?); the pool is failed. Cause of the restart: {reason}"
                )
                raise self._failed from None
            except RayActorError as err:
                reason = f"the new worker {slot.index} died at start after ({reason}): {err!r}"
                continue
            try:
                await self._rebuild(slot)
                return
            except (RayActorError, asyncio.TimeoutError) as err:
                reason = f"rebuilding worker {slot.index} after ({reason}) failed: {err!r}"

    async def _rebuild(self, slot: _Slot) -> None:
        for episode_id, episode in sorted(self._episodes.items()):
            if episode.worker != slot.index or episode.broken:
                continue
            ref = slot.actor.rebuild.remote(episode_id, episode.state, episode.actions, episode.split)
            timeout = self.call_timeout_s * (1 + len(episode.actions))
            try:
                obs = await asyncio.wait_for(_wrap(ref), timeout)
            except Exception as err:
                if isinstance(err, RayActorError | asyncio.TimeoutError) and not isinstance(err, RayTaskError):
                    raise  # the new worker died or hung
                # the env raised (a TimeoutError of its own too): this episode is lost, the others are not
                episode.broken = f"rebuild raised {err!r}"
                continue
            self._stats["rebuilds"] += 1
            self._stats["replayed_actions"] += len(episode.actions)
            if episode.actions and obs != episode.last_obs:
                episode.broken = (
                    f"replaying {len(episode.actions)} actions gave a different observation "
                    f"({obs!r} instead of {episode.last_obs!r}): env '{self.env_name}' is not deterministic"
                )
            if episode.broken:
                logger.error("env pool '%s': %s", self.env_name, episode.broken)


class SyncEnvPool:
    """Blocking versions of :class:`EnvPool`'s calls, for scripts and tests (``pool.sync.step(...)``)."""

    def __init__(self, pool: EnvPool):
        self._pool = pool

    def reset(self, episode_id=None, *, task_id=None, seed=None, worker=None, split=None) -> ResetReturn:
        return self._pool._run_sync(self._pool._reset(episode_id, task_id, seed, worker, split))

    def step(self, episode_id: str, action: str) -> StepReturn:
        return self._pool._run_sync(self._pool._step(episode_id, action))

    def snapshot(self, episode_id: str) -> EnvState:
        return self._pool._run_sync(self._pool._snapshot(episode_id))

    def restore(self, state: EnvState, episode_id=None, *, worker=None, split=None) -> ResetReturn:
        return self._pool._run_sync(self._pool._restore(state, episode_id, worker, split))

    def close(self, episode_id: str) -> bool:
        return self._pool._run_sync(self._pool._close(episode_id))

    def expert_actions(self, episode_id: str) -> list[str]:
        return self._pool._run_sync(self._pool._query(episode_id, "expert_actions"))

    def task_ids(self, split=None) -> list[str]:
        return self._pool._run_sync(self._pool._query(None, "task_ids", split))


def check_placeable(env_name: str, node_id: str, num_workers: int, worker_num_cpus: float, nodes=None) -> None:
    """Fail at once if the workers of a pool pinned to ``node_id`` could never be scheduled there.

    Ray would keep such an actor pending without an error, and the pool would wait ``start_timeout_s`` (minutes)
    to fail; a node that is gone, or that has fewer CPUs in total than the workers reserve (e.g. a KubeRay head
    started with ``--num-cpus=0``), will not change its mind.

    Args:
        env_name: The pool's env (for the message).
        node_id: The Ray node the workers are pinned to.
        num_workers: Worker actors of the pool.
        worker_num_cpus: Ray CPUs each reserves.
        nodes: ``ray.nodes()`` (tests pass their own).

    Raises:
        EnvPoolError: Naming the node, what it has and what the pool needs.
    """
    node = next((n for n in (ray.nodes() if nodes is None else nodes) if n["NodeID"] == node_id), None)
    where = f"env pool '{env_name}' pinned to Ray node {node_id}"
    if node is None or not node.get("Alive", False):
        raise EnvPoolError(f"{where}: the node is not alive in this Ray cluster")
    need, have = num_workers * worker_num_cpus, node.get("Resources", {}).get("CPU", 0.0)
    if need > have:
        raise EnvPoolError(
            f"{where} ({node.get('NodeManagerAddress', '?')}) can never start: its {num_workers} workers reserve "
            f"{need:g} CPUs and the node has {have:g} in all. Lower env.pool_workers, give the node CPUs "
            f"(ray start --num-cpus), or play the envs in the agent-loop processes (env.pool_workers=0)"
        )


async def _cancel_tasks() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def _wrap(ref) -> asyncio.Future:
    return asyncio.wrap_future(ref.future())


def _kill(actor) -> None:
    with contextlib.suppress(Exception):  # already dead
        ray.kill(actor, no_restart=True)


__all__ = [
    "EnvPool",
    "EnvPoolError",
    "EnvTimeoutError",
    "EnvWorker",
    "EnvWorkerError",
    "SyncEnvPool",
    "check_placeable",
]
