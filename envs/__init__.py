"""Text environments for ProVer: ALFWorld, WebShop and Search-QA, each with exact snapshot/restore.

Each env folder declares one :class:`~envs.spec.EnvSpec` (``envs/<name>/spec.py``); they are registered here.
A spec names its env class as ``"module:Class"``, imported on first use, so that one env's heavy dependencies
(TextWorld, the JVM) are loaded only by the processes that play it. The pools that play episodes are a layer
of their own, :mod:`envs.pools`, which this module does not import.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from envs.base import EnvState, TextEnv, UnknownTaskError
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
        ValueError: ``name`` is not registered, or a kwarg is not one of its constructor's (naming it; a
            ``protocol`` for an env without protocols says so).
    """
    check_env_kwargs(name, kwargs)  # a clear error naming the key, not the constructor's TypeError
    return env_class(name)(**kwargs)


def check_env_kwargs(name: str, kwargs: dict[str, Any]) -> None:
    """Fail if ``kwargs`` are not constructor arguments of env ``name`` (imports its class, builds nothing).

    Raises:
        ValueError: An argument the env's constructor does not take (a misspelling), naming the ones it takes; a
            ``protocol`` for an env without protocols.
    """
    cls = env_class(name)
    signature = inspect.signature(cls)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
    if "protocol" in kwargs and "protocol" not in signature.parameters and not takes_any:
        raise ValueError(
            f"env '{name}' has no protocols (no envs/{name}/protocol.py), got protocol={kwargs['protocol']!r}: drop "
            "'protocol' from its kwargs (env.protocol, env.kwargs, ENV_KWARGS or --env-kwargs)"
        )
    try:
        signature.bind(**kwargs)
    except TypeError as err:
        raise ValueError(
            f"env '{name}' does not take env_kwargs {sorted(kwargs)} ({err}); its arguments: "
            f"{', '.join(signature.parameters)}"
        ) from None


_POOL_NAMES = ("EnvPoolLike", "open_pool")  # the pool layer's entry points, formerly defined here


def __getattr__(name: str) -> Any:
    """``envs.open_pool`` and ``envs.EnvPoolLike``, kept for their callers: :mod:`envs.pools`' own, imported on
    first use so that ``import envs`` loads no pool."""
    if name in _POOL_NAMES:
        return getattr(importlib.import_module("envs.pools"), name)
    raise AttributeError(f"module 'envs' has no attribute '{name}'")


def _register_builtin() -> None:
    from envs.alfworld.spec import SPEC as ALFWORLD
    from envs.keydoor.spec import SPEC as KEYDOOR
    from envs.searchqa.spec import SPEC as SEARCHQA
    from envs.webshop.spec import SPEC as WEBSHOP

    for builtin in (ALFWORLD, WEBSHOP, SEARCHQA, KEYDOOR):  # this order is the order of the result tables
        register_env(builtin)


_register_builtin()

__all__ = [
    "EnvSpec",
    "EnvState",
    "TableSpec",
    "TextEnv",
    "UnknownTaskError",
    "check_env_kwargs",
    "env_class",
    "env_names",
    "make",
    "register_env",
    "spec",
    "specs",
]
