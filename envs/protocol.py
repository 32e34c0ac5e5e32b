"""Named protocols: complete settings of an env family as a harness runs it (this project's, Search-R1's, ...).

An env family with protocols keeps them in ``envs/<name>/protocol.py`` as a dict ``PROTOCOLS`` of name ->
:class:`Protocol`, with a ``"default"`` entry that reproduces the env's behaviour from before protocols existed.
The env takes a ``protocol`` constructor kwarg (str, default ``"default"``) and builds itself from
:func:`settings`; the prompt adapter (``prover_verl.agent.adapters``) reads the same entry through
:func:`selected` for what is on the LLM's side (system prompt, stop strings, thoughts). A protocol is chosen with
``env.protocol=<name>`` in the training config or ``{"protocol": "<name>"}`` in the env kwargs; any setting given
explicitly as well wins over the protocol's. ``python -m prover_verl.data --protocol <name>`` writes the protocol's
train and validation splits (:attr:`Protocol.train_split`, :attr:`Protocol.val_splits`).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
from collections.abc import Mapping
from typing import Any

DEFAULT = "default"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """One named protocol of an env family.

    Attributes:
        summary: Whose harness it reproduces, and from which of its files (one line, for docs and errors).
        settings: Constructor kwargs of the env this protocol sets (its max turns, prompt template, parsing ...).
        system_prompt: The LLM's system prompt; None: the env spec's; ``""``: no system message.
        stop: Strings that end each generation (kept in the reply), e.g. a closing tag the harness stops at.
        strip_thoughts: ``<think>...</think>`` blocks are removed from a reply before the env parses it.
        strip_observations: Observations lose their leading and trailing whitespace in the prompt (else they are
            sent as the env gives them, e.g. Search-R1's blank lines around ``<information>``).
        inline_observations: Observations continue the assistant's turn as plain text and the policy goes on
            generating in that same turn (Search-R1's layout: ``...</search>\n\n<information>...</information>
            \n\n<think>...``); False: each observation is a user turn of the chat template.
        train_split: The split the data writer trains on; None: the env spec's ``train_split``.
        val_splits: The splits it validates on, each reported on its own (e.g. verl-agent's ALFWorld
            ``valid_seen`` and ``valid_unseen``); empty: the env spec's ``val_split``.
    """

    summary: str
    settings: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    system_prompt: str | None = None
    stop: tuple[str, ...] = ()
    strip_thoughts: bool = True
    strip_observations: bool = True
    inline_observations: bool = False
    train_split: str | None = None
    val_splits: tuple[str, ...] = ()


def protocols(env_name: str) -> Mapping[str, Protocol] | None:
    """The ``PROTOCOLS`` of ``envs/<env_name>/protocol.py``; None if the env family has none.

    Raises:
        ValueError: the module has no ``PROTOCOLS`` dict of :class:`Protocol` with a ``"default"`` entry.
    """
    module_name = f"envs.{env_name}.protocol"
    try:
        found = importlib.util.find_spec(module_name)
    except ModuleNotFoundError:  # no envs/<env_name>/ package at all (an env registered from elsewhere)
        found = None
    if found is None:
        return None
    table = getattr(importlib.import_module(module_name), "PROTOCOLS", None)
    if not isinstance(table, Mapping) or DEFAULT not in table:
        raise ValueError(f"{module_name}.PROTOCOLS must be a dict of name -> Protocol with a '{DEFAULT}' entry")
    bad = [name for name, value in table.items() if not isinstance(value, Protocol)]
    if bad:
        raise ValueError(f"{module_name}.PROTOCOLS: {bad} are not envs.protocol.Protocol")
    return table


def resolve(env_name: str, table: Mapping[str, Protocol] | None, name: str | None) -> Protocol | None:
    """The protocol ``name`` (None: the default) of ``env_name``'s ``table``.

    Returns:
        The protocol; None where the env family has no protocols and none was asked for.

    Raises:
        ValueError: an unknown name, a name that is not a string, or a name given for an env family without
            protocols (the message names the known ones).
    """
    if name is not None and not isinstance(name, str):  # a list or dict would fail the lookup as unhashable
        known = f"one of: {', '.join(table)}" if table is not None else f"none: env '{env_name}' has no protocols"
        raise ValueError(f"'protocol' of env '{env_name}' must be a name (a string; {known}), got {name!r}")
    if table is None:
        if name is None:
            return None
        raise ValueError(f"env '{env_name}' has no protocols (no envs/{env_name}/protocol.py); got protocol={name!r}")
    name = DEFAULT if name is None else name
    if name not in table:
        raise ValueError(f"unknown {env_name} protocol {name!r}; known: {', '.join(table)}")
    return table[name]


def selected(env_name: str, env_kwargs: Mapping[str, Any] | None) -> Protocol | None:
    """The protocol that ``env_kwargs`` (an env's constructor kwargs) select for ``env_name``; see :func:`resolve`."""
    return resolve(env_name, protocols(env_name), (env_kwargs or {}).get("protocol"))


def settings(env_name: str, table: Mapping[str, Protocol], name: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The env's settings under protocol ``name``: the protocol's, each replaced by a value given explicitly.

    Args:
        env_name: For messages.
        table: The env family's ``PROTOCOLS``.
        name: The protocol asked for.
        given: Every setting a protocol may set, as the constructor received it (None: not given).

    Raises:
        ValueError: an unknown protocol, or one that sets a key outside ``given`` (a preset out of step with the
            constructor).
    """
    protocol = resolve(env_name, table, name)
    unknown = sorted(set(protocol.settings) - set(given))
    if unknown:
        raise ValueError(f"{env_name} protocol {name!r} sets {unknown}, which are not settings of the env")
    return {key: protocol.settings.get(key) if value is None else value for key, value in given.items()}


__all__ = ["DEFAULT", "Protocol", "protocols", "resolve", "selected", "settings"]
