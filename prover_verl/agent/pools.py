"""The env pools of an agent-loop process, one per (env, kwargs, pool size), shared by every agent-loop instance."""

from __future__ import annotations

from typing import Any

from prover_verl.config import EnvConfig

_POOLS: dict[tuple, Any] = {}


def get_env_pool(env_name: str, env: EnvConfig, split: str | None = None):
    """The pool for ``env_name``'s ``split``: in-process threads, or, if ``env.pool_workers > 0``, the node's Ray env
    pool of ``env.pool_workers`` env processes, which every agent-loop worker of the node shares.

    ``split`` (a data row's ``extra_info.split``) overrides ``env.kwargs['split']``: a row's task id belongs to the
    split it was listed from, so validation rows (e.g. ALFWorld ``valid_unseen``) get envs of their own split.
    """
    kwargs = dict(env.kwargs) if split is None else {**env.kwargs, "split": split}
    key = (env_name, repr(sorted(kwargs.items())), env.pool_workers)
    if key not in _POOLS:
        from envs import open_pool

        timeouts = {"call_timeout_s": env.call_timeout_s, "start_timeout_s": env.start_timeout_s}
        _POOLS[key] = open_pool(env_name, kwargs, workers=env.pool_workers, **timeouts)
    return _POOLS[key]
