"""The env pools of an agent-loop process, one per (env, kwargs, pool size), shared by every agent-loop instance
and by every split."""

from __future__ import annotations

import socket
from typing import Any

from prover_verl.config import EnvConfig

_POOLS: dict[tuple, Any] = {}
_DATA: dict[tuple, str | None] = {}  # (pool, split) -> the data fingerprint of its env on this node


class SplitPool:
    """A pool whose episodes are opened in envs of ``split`` (``reset`` and ``restore``); every other call is
    the pool's own."""

    def __init__(self, pool: Any, split: str):
        self.pool, self.split = pool, split

    async def reset(self, episode_id: str | None = None, *, task_id: str | None = None, seed=None):
        return await self.pool.reset(episode_id, task_id=task_id, seed=seed, split=self.split)

    async def restore(self, state, episode_id: str | None = None):
        return await self.pool.restore(state, episode_id, split=self.split)

    async def data_fingerprint(self) -> str | None:
        return await self.pool.data_fingerprint(self.split)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)


def get_env_pool(env_name: str, env: EnvConfig, split: str | None = None):
    """The pool for ``env_name``: in-process threads, or, if ``env.pool_workers > 0``, the node's Ray env pool of
    ``env.pool_workers`` env processes, which every agent-loop worker of the node shares.

    ``split`` (a data row's ``extra_info.split``) overrides ``env.kwargs['split']`` for the episodes opened through
    the returned pool: a row's task id belongs to the split it was listed from, so validation rows (e.g. ALFWorld
    ``valid_unseen``) are played in envs of their own split. Train and validation rows share the pool and its env
    processes (each process loads the env's data once, for both).
    """
    key = (env_name, repr(sorted(env.kwargs.items())), env.pool_workers)
    if key not in _POOLS:
        from envs.pools import open_pool

        timeouts = {"call_timeout_s": env.call_timeout_s, "start_timeout_s": env.start_timeout_s}
        _POOLS[key] = open_pool(env_name, dict(env.kwargs), workers=env.pool_workers, **timeouts)
    return _POOLS[key] if split is None else SplitPool(_POOLS[key], split)


async def check_data_fingerprint(pool: Any, env_name: str, split: str | None, expected: str) -> None:
    """Fail unless the data of ``pool``'s env (of ``split``, on this node) is the data a row was written from.

    Asked once per pool and split in this process (the first reset of such a row here), so every node checks its
    own data: nodes can hold different stores at the same path, and a task id would then silently name a different
    goal on each.

    Raises:
        ValueError: Naming both fingerprints, the env, the split and the node.
    """
    key = (id(getattr(pool, "pool", pool)), split)
    if key not in _DATA:
        _DATA[key] = await pool.data_fingerprint()
    found = _DATA[key]
    if found != expected:
        raise ValueError(
            f"data row of env '{env_name}' (split {split!r}) was written from data {expected}, but the env on node "
            f"{socket.gethostname()} holds data {found}: the nodes hold different data at the same path, or it "
            f"changed since `python -m prover_verl.data` wrote the rows. Give every node the same data (one "
            f"store, or copies prepared from the same files) and write the rows from it"
        )
