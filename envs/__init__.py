"""Text environments for ProVer: ALFWorld, WebShop and Search-QA, each with exact snapshot/restore.

Each env folder declares one :class:`~envs.spec.EnvSpec` (``envs/<name>/spec.py``); they are registered here.
A spec names its env class as ``"module:Class"``, imported on first use, so that one env's heavy dependencies
(TextWorld, the JVM) are loaded only by the processes that play it.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from envs.base import EnvState, TextEnv, UnknownTaskError
from envs.hosting import EnvPoolLike
from envs.spec import EnvSpec, TableSpec

_SPECS: dict[str, EnvSpec] = {}  # in registration order (the built-in envs first)


def register_env(spec_or_name: EnvSpec | str, target: str | type[TextEnv] | None = None, **fields: Any) -> EnvSpec:
    """Register an environment: a whole :class:`EnvSpec`, or a name, its target and any further spec fields.

    ``target`` is a class, or ``"module:Class"`` to import on first use. Registering a name again replaces its
    spec (a Ray env worker re-registers the spec it was given, so envs registered at run time reach it).

    Returns:
        The registered spec.
    """
    if isinstance(spec_or_name, EnvSpec):
        if target is not None or fields:
            raise TypeError("register_env(spec) takes no target or fields; they are in the spec")
        spec = spec_or_name
    else:
        if target is None:
            raise TypeError(f"register_env('{spec_or_name}') needs a target (a TextEnv class or 'module:Class')")
        spec = EnvSpec(spec_or_name, target, **fields)
    _SPECS[spec.name] = spec
    return spec


def spec(name: str) -> EnvSpec:
    """The spec registered under ``name``.

    Raises:
        ValueError: ``name`` is not registered.
    """
    if name not in _SPECS:
        raise ValueError(f"unknown environment '{name}'; registered: {', '.join(env_names())}")
    return _SPECS[name]


def specs() -> list[EnvSpec]:
    """The registered specs, in registration order (the built-in envs first)."""
    return list(_SPECS.values())


def env_names() -> list[str]:
    """Return the registered environment names, sorted."""
    return sorted(_SPECS)


def env_class(name: str) -> type[TextEnv]:
    """The env class of ``name``, importing its module if the spec names it as ``"module:Class"``."""
    target = spec(name).target
    if isinstance(target, str):
        module_name, _, class_name = target.partition(":")
        target = getattr(importlib.import_module(module_name), class_name)
    return target


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build the environment registered under ``name`` with ``kwargs``.

    Raises:
        ValueError: ``name`` is not registered.
    """
    return env_class(name)(**kwargs)


def check_env_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    """Fail if ``kwargs`` are not constructor arguments of env ``name`` (imports its class, builds nothing).

    Raises:
        ValueError: An argument the env's constructor does not take (a misspelling), naming the ones it takes.
    """
    cls = env_class(name)
    signature = inspect.signature(cls)
    try:
        signature.bind(**kwargs)
    except TypeError as err:
        raise ValueError(
            f"env '{name}' does not take env_kwargs {sorted(kwargs)} ({err}); its arguments: "
            f"{', '.join(signature.parameters)}"
        ) from None


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
        workers: Env worker processes of the node's pool (:class:`~envs.shared_pool.SharedEnvPool`); 0: a
            :class:`~envs.local_pool.LocalEnvPool` in this process (no Ray).
        call_timeout_s: Seconds one env call may take before its worker is killed and restarted (Ray pool only:
            a call in this process cannot be killed, so the local pool has no timeout). None: the pool's default.
        start_timeout_s: Seconds an env worker may take to start (Ray pool only). None: the pool's default.
        **pool_kwargs: Further arguments of the pool class (``max_restarts`` of the Ray pool, ``max_threads`` of
            the local one).

    Raises:
        ValueError: ``env_name`` is not registered, ``workers < 0``, or (``workers=0``) ``env_kwargs`` holds an
            argument the env does not take. A Ray pool's workers build an env at start, which fails the same way.
    """
    spec(env_name)  # an unknown name fails here, before any pool or Ray cluster starts
    if workers < 0:
        raise ValueError(f"workers must be >= 0, got {workers}")
    if workers == 0:
        from envs.local_pool import LocalEnvPool

        # here, not at the first reset inside an agent-loop worker; the env class is imported in this process
        # anyway, as its episodes are played here
        check_env_kwargs(env_name, dict(env_kwargs or {}))

        return LocalEnvPool(env_name, env_kwargs, **pool_kwargs)
    from envs.shared_pool import SharedEnvPool

    timeouts = {"call_timeout_s": call_timeout_s, "start_timeout_s": start_timeout_s}
    pool_kwargs.update({k: v for k, v in timeouts.items() if v is not None})
    return SharedEnvPool(env_name, env_kwargs, num_workers=workers, **pool_kwargs)


def _register_builtin() -> None:
    from envs.alfworld.spec import SPEC as ALFWORLD
    from envs.keydoor.spec import SPEC as KEYDOOR
    from envs.searchqa.spec import SPEC as SEARCHQA
    from envs.webshop.spec import SPEC as WEBSHOP

    for builtin in (ALFWORLD, WEBSHOP, SEARCHQA, KEYDOOR):  # this order is the order of the result tables
        register_env(builtin)


_register_builtin()

__all__ = [
    "EnvPoolLike",
    "EnvSpec",
    "EnvState",
    "TableSpec",
    "TextEnv",
    "UnknownTaskError",
    "check_env_kwargs",
    "env_class",
    "env_names",
    "make",
    "open_pool",
    "register_env",
    "spec",
    "specs",
]
