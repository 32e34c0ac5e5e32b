"""The judge registry: ``algorithm.prover.judge.type`` (or a demo's judge name) -> the factory that builds it.

A factory is called as ``factory(config, segment_side, seed=seed, **context)``: ``config`` is the
:class:`~prover_verl.config.JudgeConfig` (or just the name, where a caller has no config), ``segment_side`` a
:class:`~prover_verl.judge.base.SegmentSide`, ``seed`` draws the judge's pair, and ``context`` holds what the engine
can offer (``server_manager``, ``tokenizer``, ``chat_template_kwargs`` in verl; a demo's own arguments); a factory
takes what it needs and ignores the rest. Register a judge of your own with :func:`register_judge` in a module that
is imported before the config is checked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prover_verl.judge.base import Judge, SegmentSide, segment_side_of

JudgeFactory = Callable[..., Judge]

_JUDGES: dict[str, JudgeFactory] = {}


def register_judge(name: str) -> Callable[[JudgeFactory], JudgeFactory]:
    """Decorator registering a judge factory under ``name`` (a name registered twice is an error)."""

    def decorate(factory: JudgeFactory) -> JudgeFactory:
        if name in _JUDGES and _JUDGES[name] is not factory:
            raise ValueError(f"judge type {name!r} is already registered")
        _JUDGES[name] = factory
        return factory

    return decorate


def judge_types() -> tuple[str, ...]:
    """The registered judge names, in registration order."""
    return tuple(_JUDGES)


def make_judge(config: Any, segment_side: SegmentSide | str, seed: int | None = None, **context: Any) -> Judge:
    """Build the judge that ``config.type`` (or ``config``, a name) names; ``seed`` draws its success/failure pair."""
    name = config if isinstance(config, str) else config.type
    if name not in _JUDGES:
        raise ValueError(f"unknown judge type {name!r}; registered: {list(_JUDGES)}")
    return _JUDGES[name](config, segment_side_of(segment_side), seed=seed, **context)
