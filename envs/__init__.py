"""Text environments for ProVer: ALFWorld, WebShop and Search-QA, each with exact snapshot/restore."""

from __future__ import annotations

import importlib
from typing import Any

from envs.base import EnvState, TextEnv

# name -> "module:Class"; imported on first use so that one env's heavy dependencies (TextWorld, the JVM)
# are loaded only by the processes that play it.
_REGISTRY: dict[str, str | type[TextEnv]] = {
    "alfworld": "envs.alfworld.env:AlfWorldEnv",
    "searchqa": "envs.searchqa.env:SearchQAEnv",
    "webshop": "envs.webshop.env:WebShopEnv",
}


def register_env(name: str, target: str | type[TextEnv]) -> None:
    """Register an environment under ``name``: a class, or ``"module:Class"`` to import on first use.

    Only the string form reaches other processes (a Ray env worker imports the module itself).
    """
    _REGISTRY[name] = target


def env_names() -> list[str]:
    """Return the registered environment names."""
    return sorted(_REGISTRY)


def make(name: str, **kwargs: Any) -> TextEnv:
    """Build the environment registered under ``name`` with ``kwargs``.

    Raises:
        ValueError: ``name`` is not registered.
    """
    if name not in _REGISTRY:
        raise ValueError(f"unknown environment '{name}'; registered: {', '.join(env_names())}")
    target = _REGISTRY[name]
    if isinstance(target, str):
        module_name, _, class_name = target.partition(":")
        target = getattr(importlib.import_module(module_name), class_name)
    return target(**kwargs)


__all__ = ["EnvState", "TextEnv", "env_names", "make", "register_env"]
