"""The env pools: where episodes of a registered env are played, in this process or in Ray env workers.

A layer of its own beside the env folders: ``import envs`` (the registry and the envs) loads none of it, and only
the Ray pools (:mod:`envs.pools.ray_pool`, :mod:`envs.pools.shared`) import Ray, on first use.

- :mod:`envs.pools.hosting`: :class:`EnvWorker`, the episodes of one process (no Ray), and :class:`EnvPoolLike`.
- :mod:`envs.pools.local`: :class:`~envs.pools.local.LocalEnvPool`, an :class:`EnvWorker` in this process.
- :mod:`envs.pools.ray_pool`: :class:`~envs.pools.ray_pool.EnvPool`, episodes over Ray worker actors.
- :mod:`envs.pools.shared`: :class:`~envs.pools.shared.SharedEnvPool`, one :class:`EnvPool` per node.
"""

from __future__ import annotations

from typing import Any

import envs
from envs.pools.hosting import EnvPoolLike, EnvWorker


def open_pool(
    env_name: str,
    env_kwargs: dict[str, Any] | None = None,
    workers: int = 0,
    *,
    call_timeout_s: float | None = None,
    start_timeout_s: float | None = None,
    **pool_kwargs: Any,
) -> EnvPoolLike:
    """Open a pool of ``env_name`` episodes: in this process (``workers=0``), else the node's shared Ray pool.

    Args:
        env_name: Registered environment name.
        env_kwargs: Constructor arguments of the environment.
        workers: Env worker processes of the node's pool (:class:`~envs.pools.shared.SharedEnvPool`); 0: a
            :class:`~envs.pools.local.LocalEnvPool` in this process (no Ray).
        call_timeout_s: Seconds one env call may take before its worker is killed and restarted (Ray pool only:
            a call in this process cannot be killed, so the local pool has no timeout). None: the pool's default.
        start_timeout_s: Seconds an env worker may take to start (Ray pool only). None: the pool's default.
        **pool_kwargs: Further arguments of the pool class (``max_restarts`` of the Ray pool, ``max_threads`` of
            the local one).

    Raises:
        ValueError: ``env_name`` is not registered, ``workers < 0``, or (``workers=0``) ``env_kwargs`` holds an
            argument the env does not take. A Ray pool's workers build an env at start, which fails the same way.
    """
    envs.spec(env_name)  # an unknown name fails here, before any pool or Ray cluster starts
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    if workers == 0:
        from envs.pools.local import LocalEnvPool

        # here, not at the first reset inside an agent-loop worker; the env class is imported in this process
        # anyway, as its episodes are played here
        envs.check_env_kwargs(env_name, dict(env_kwargs or {}))

        return LocalEnvPool(env_name, env_kwargs, **pool_kwargs)
    from envs.pools.shared import SharedEnvPool

    timeouts = {"call_timeout_s": call_timeout_s, "start_timeout_s": start_timeout_s}
    pool_kwargs.update({k: v for k, v in timeouts.items() if v is not None})
    return SharedEnvPool(env_name, env_kwargs, num_workers=workers, **pool_kwargs)


__all__ = ["EnvPoolLike", "EnvWorker", "open_pool"]
